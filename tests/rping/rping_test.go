package rping

import (
	"bytes"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm"
	_ "github.com/rperf/rperf/verbsio/soft" // registers shm0
)

// lateDisconnect is a server's event source that puts the connection's
// DISCONNECTED after the flush of the server's posted receive, as rxe0
// did against rdma-core's rping client: when the real DISCONNECTED comes
// it moves the QP to the error state (flushing the receive) and holds the
// event. With deliver, the next call that waits for an event gets it,
// 20 ms late; without, it never comes.
type lateDisconnect struct {
	ch      *cm.EventChannel
	deliver bool

	mu        sync.Mutex
	held      *cm.Event
	flushed   bool      // the QP was moved to the error state
	flushedAt time.Time // when
	delivered bool      // the held event went to a call that waited
}

func (l *lateDisconnect) GetEvent(timeout time.Duration) (*cm.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	end := time.Now().Add(timeout)
	if l.held != nil && l.deliver && timeout > 0 {
		time.Sleep(20 * time.Millisecond)
		ev := l.held
		l.held, l.delivered = nil, true
		return ev, nil
	}
	for {
		ev, err := l.ch.GetEvent(max(time.Until(end), 0))
		if err != nil || ev.Type != cm.EventDisconnected || l.flushed {
			return ev, err
		}
		if err := ev.ID.QP().Modify(&verbsio.QPAttr{State: verbsio.QPStateErr}, verbsio.QPAttrState); err != nil {
			return nil, err
		}
		l.held, l.flushed, l.flushedAt = ev, true, time.Now()
		if timeout <= 0 || l.deliver {
			return nil, verbsio.ErrTimeout
		}
	}
}

// cmPair opens two shm0 contexts with their connection managers on one
// Loopback network and returns them with their addresses.
func cmPair(t *testing.T) (srv, cli *cm.Device, srvAddr, cliAddr netip.Addr) {
	t.Helper()
	lb := cm.NewLoopback()
	open := func() (*cm.Device, netip.Addr) {
		ctx, err := verbsio.Open("shm0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ctx.Close() })
		gids, err := ctx.QueryGIDTable(1)
		if err != nil || len(gids) == 0 {
			t.Fatalf("shm0 GID table: %v %v", gids, err)
		}
		mp, err := lb.Port(0, gids[0].GID)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mp.Close() })
		dev, err := cm.Open(ctx, cm.Options{MADPort: mp})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := dev.Close(); err != nil {
				t.Error(err)
			}
		})
		return dev, gids[0].GID.Addr()
	}
	srv, srvAddr = open()
	cli, cliAddr = open()
	return srv, cli, srvAddr, cliAddr
}

// TestServerFlushBeforeDisconnected: the client's three pings done and
// its disconnect, the server's posted receive flushed before the
// connection's DISCONNECTED reaches the server (seen on rxe0 against
// rdma-core's rping client). The server waits up to flushGrace for the
// event and ends as for any disconnect; when the event does not come, the
// flush is an error that says so, after that wait.
func TestServerFlushBeforeDisconnected(t *testing.T) {
	tests := []struct {
		name    string
		deliver bool
		wantErr string
	}{
		{"DISCONNECTED after the flush", true, ""},
		{"no DISCONNECTED", false, "DISCONNECTED did not come within 2s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srvDev, cliDev, addr, cliAddr := cmPair(t)
			events := &lateDisconnect{deliver: tt.deliver}
			var out bytes.Buffer
			srvOpts := Options{Verbose: true, Out: &out, Timeout: 10 * time.Second, Device: srvDev,
				events: func(ch *cm.EventChannel) eventSource { events.ch = ch; return events }}
			listening := make(chan netip.AddrPort, 1)
			type result struct {
				n   int
				err error
				at  time.Time
			}
			srvDone := make(chan result, 1)
			go func() {
				n, err := Server(srvDev.Context(), netip.AddrPortFrom(addr, 0), srvOpts, func(a netip.AddrPort) { listening <- a })
				srvDone <- result{n, err, time.Now()}
			}()
			var dst netip.AddrPort
			select {
			case dst = <-listening:
			case r := <-srvDone:
				t.Fatalf("server ended before it listened: %v", r.err)
			}
			n, err := Client(cliDev.Context(), cliAddr, dst, Options{Count: 3, Size: 40, Validate: true, Timeout: 10 * time.Second, Device: cliDev})
			if err != nil || n != 3 {
				t.Fatalf("client: %d pings, %v", n, err)
			}
			var r result
			select {
			case r = <-srvDone:
			case <-time.After(30 * time.Second):
				t.Fatal("the server did not end within 30 s of the client's disconnect")
			}
			events.mu.Lock()
			flushed, flushedAt, delivered := events.flushed, events.flushedAt, events.delivered
			events.mu.Unlock()
			if !flushed {
				t.Fatal("the server's QP was never moved to the error state: the test did not flush before DISCONNECTED")
			}
			if strings.Count(out.String(), "server ping data: rdma-ping-") != 3 {
				t.Errorf("server printed\n%s", out.String())
			}
			if tt.wantErr == "" {
				if r.err != nil || r.n != 3 || !delivered {
					t.Errorf("server: %d pings, %v (DISCONNECTED delivered after the flush: %v); want 3, no error", r.n, r.err, delivered)
				}
				return
			}
			if r.err == nil || !strings.Contains(r.err.Error(), tt.wantErr) || !strings.Contains(r.err.Error(), "WR_FLUSH_ERR") {
				t.Errorf("server: %d pings, %v; want an error with %q", r.n, r.err, tt.wantErr)
			}
			// The server waited for the event before it gave up.
			if waited := r.at.Sub(flushedAt); waited < flushGrace {
				t.Errorf("server gave up %v after the flush, want at least the %v it waits for DISCONNECTED", waited, flushGrace)
			}
		})
	}
}
