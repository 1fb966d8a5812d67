package soft_test

import (
	"bytes"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/verbstest"
)

type resources struct{ fds, maps, goroutines int }

func count(t *testing.T) resources {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	// Only the engine's mappings: the Go heap's own come and go.
	return resources{len(fds), bytes.Count(maps, []byte("memfd:rperf")), runtime.NumGoroutine()}
}

// settle waits for goroutines that are exiting to be gone, and reports
// whether anything grew. (Something another test left may finish while
// this one runs: counts that fall are not leaks.)
func settle(t *testing.T, before resources) (resources, bool) {
	var got resources
	for i := 0; i < 100; i++ {
		got = count(t)
		if got.fds <= before.fds && got.maps <= before.maps && got.goroutines <= before.goroutines {
			return got, false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return got, true
}

// TestCloseReleasesEverything opens contexts, connects QPs (in this process
// and to a child process), moves data, and closes: memfds, mappings, pidfds
// and goroutines must all be released.
func TestCloseReleasesEverything(t *testing.T) {
	cycle := func() {
		p := verbstest.NewPair(t, verbstest.PairConfig{Device: "shm0", UseSRQ: true})
		ah, err := p.A.PD.CreateAH(verbsio.AHAttr{DGID: p.B.GID})
		if err != nil {
			t.Fatal(err)
		}
		_ = ah
		p.A.QP.PostSend([]verbsio.SendWR{{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)},
			Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}})
		verbstest.PollOne(t, p.A.CQ)
		extra, err := p.A.Ctx.Alloc(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.A.PD.RegMR(extra, verbsio.AccessLocalWrite); err != nil {
			t.Fatal(err)
		}
		p.A.Ctx.Close()
		p.B.Ctx.Close()
	}
	cycle() // warm up lazily created runtime state
	before := count(t)
	for i := 0; i < 20; i++ {
		t.Run("", func(t *testing.T) { cycle() })
	}
	if after, grew := settle(t, before); grew {
		t.Errorf("in-process cycles leaked: before %+v, after %+v", before, after)
	}

	// A peer in another process: a pidfd and a watcher goroutine appear,
	// and must go with Close.
	before = count(t)
	t.Run("child", func(t *testing.T) {
		s, c, shared, _ := parentSide(t, "target")
		s.QP.PostSend([]verbsio.SendWR{{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{s.MR.SGE(0, 64)},
			Remote: verbsio.RemoteAddr{Addr: shared.VAddr, RKey: shared.RKey}}})
		verbstest.PollOne(t, s.CQ)
		c.send(t, "report")
		c.recv(t)
		c.send(t, "exit")
		c.cmd.Wait()
	})
	if after, grew := settle(t, before); grew {
		t.Errorf("cross-process cycle leaked: before %+v, after %+v", before, after)
	}
}
