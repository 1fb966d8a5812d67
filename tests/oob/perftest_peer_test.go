package oob

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakePerftest plays an unmodified perftest (version "6.06", no rperf
// extension) running ib_write_bw, written independently of the package
// code: it formats keys with perftest's printf formats and parses them by
// splitting on ':'. Like perftest, every read is a single read() that must
// return the full message.
type fakePerftest struct {
	isClient  bool
	version   string
	pageSize  uint32
	cacheLine uint32
	mtu       int // ibv_mtu value
	dest      Dest
	report    [5]uint64 // size, iters and the bits of bw_peak, bw_avg, msg_rate
	sendsDone bool      // older releases write "done\0" before closing

	// What it received.
	gotVersion   string
	gotPage      uint32
	gotCacheLine uint32
	gotMTU       string
	gotKeys      []Dest
	gotReport    [5]uint64
}

// key formats d the way perftest's ethernet_write_keys() does.
func (f *fakePerftest) key(d Dest) []byte {
	s := fmt.Sprintf("%04x:%04x:%06x:%06x:%08x:%016x", d.LID, d.OutReads, d.QPN, d.PSN, d.RKey, d.VAddr)
	if d.HasGID {
		s += ":"
		for _, g := range d.GID {
			s += fmt.Sprintf("%02x:", g)
		}
		s += fmt.Sprintf("%08x:", d.SRQN)
	} else {
		s += fmt.Sprintf(":%08x", d.SRQN)
	}
	return []byte(s + "\x00")
}

// parseKey reads a key message the lenient C way (strtoul per field).
func (f *fakePerftest) parseKey(b []byte, withGID bool) (Dest, error) {
	parts := strings.Split(strings.TrimSuffix(string(b), "\x00"), ":")
	want := 7
	if withGID {
		want = 24 // 6 + 16 GID bytes + SRQN + the empty string after the last ':'
	}
	if len(parts) != want {
		return Dest{}, fmt.Errorf("key %q has %d fields, want %d", b, len(parts), want)
	}
	fields := parts
	if withGID { // the GID form ends with ':'
		if parts[len(parts)-1] != "" {
			return Dest{}, fmt.Errorf("key %q does not end with ':'", b)
		}
		fields = parts[:len(parts)-1]
	}
	var v []uint64
	for _, p := range fields {
		n, err := strconv.ParseUint(p, 16, 64)
		if err != nil {
			return Dest{}, fmt.Errorf("key %q: %v", b, err)
		}
		v = append(v, n)
	}
	d := Dest{LID: uint16(v[0]), OutReads: uint16(v[1]), QPN: uint32(v[2]), PSN: uint32(v[3]), RKey: uint32(v[4]), VAddr: v[5], HasGID: withGID}
	if withGID {
		for i := range d.GID {
			d.GID[i] = byte(v[6+i])
		}
		d.SRQN = uint32(v[22])
	} else {
		d.SRQN = uint32(v[6])
	}
	return d, nil
}

// xchg is ctx_xchg_data(): the client writes then reads, the server reads
// then writes; one write() and one read() each.
func (f *fakePerftest) xchg(nc net.Conn, out []byte, n int) ([]byte, error) {
	in := make([]byte, n)
	read := func() error {
		got, err := nc.Read(in)
		if err != nil {
			return err
		}
		if got != n {
			return fmt.Errorf("short read: %d of %d bytes", got, n)
		}
		return nil
	}
	write := func() error {
		_, err := nc.Write(out)
		return err
	}
	first, second := read, write
	if f.isClient {
		first, second = write, read
	}
	if err := first(); err != nil {
		return nil, err
	}
	return in, second()
}

// handShake is ctx_hand_shake().
func (f *fakePerftest) handShake(nc net.Conn) error {
	n := KeySize
	if f.dest.HasGID {
		n = KeySizeGID
	}
	in, err := f.xchg(nc, f.key(f.dest), n)
	if err != nil {
		return fmt.Errorf("key exchange %d: %w", len(f.gotKeys), err)
	}
	d, err := f.parseKey(in, f.dest.HasGID)
	if err != nil {
		return err
	}
	f.gotKeys = append(f.gotKeys, d)
	return nil
}

// run plays ib_write_bw's main(): handshake, per-QP keys, the
// extra print-remote exchange, the after-RTR exchange, the end-of-run
// exchange, the BW report, the closing exchange and "done".
func (f *fakePerftest) run(nc net.Conn) error {
	if err := f.handshake(nc); err != nil {
		return err
	}
	for range 4 {
		if err := f.handShake(nc); err != nil {
			return err
		}
	}
	for i, v := range f.report {
		in, err := f.xchg(nc, binary.BigEndian.AppendUint64(nil, v), 8)
		if err != nil {
			return fmt.Errorf("report field %d: %w", i, err)
		}
		f.gotReport[i] = binary.BigEndian.Uint64(in)
	}
	if err := f.handShake(nc); err != nil {
		return err
	}
	if f.sendsDone {
		if _, err := nc.Write([]byte("done\x00")); err != nil {
			return fmt.Errorf("done: %w", err)
		}
	}
	return nc.Close() // without reading: perftest never reads the peer's "done"
}

// handshake plays exchange_versions(), check_sys_data() and check_mtu().
func (f *fakePerftest) handshake(nc net.Conn) error {
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	ver := make([]byte, 16)
	copy(ver, f.version)
	in, err := f.xchg(nc, ver, 16)
	if err != nil {
		return fmt.Errorf("versions: %w", err)
	}
	f.gotVersion = strings.TrimRight(string(in), "\x00")
	for _, p := range []struct {
		v   uint32
		got *uint32
	}{{f.pageSize, &f.gotPage}, {f.cacheLine, &f.gotCacheLine}} {
		in, err := f.xchg(nc, binary.BigEndian.AppendUint32(nil, p.v), 4)
		if err != nil {
			return fmt.Errorf("sys-data: %w", err)
		}
		*p.got = binary.BigEndian.Uint32(in)
	}
	cur := []byte(strconv.Itoa(f.mtu) + "\x00")
	if in, err = f.xchg(nc, cur, 2); err != nil {
		return fmt.Errorf("mtu: %w", err)
	}
	f.gotMTU = strings.TrimRight(string(in), "\x00")
	return nil
}

// TestPerftestPeer runs a full write-BW session against the fake perftest,
// as client and as server, with and without GID, with older ("done") and
// newer (plain close) endings. The rperf side advertises its own version,
// so this also proves perftest is not sent the rperf-only parameter step.
func TestPerftestPeer(t *testing.T) {
	tests := []struct {
		name         string
		fakeIsClient bool
		gid          bool
		sendsDone    bool
	}{
		{"fake server/RoCE/done", false, true, true},
		{"fake client/RoCE/close", true, true, false},
		{"fake server/IB/close", false, false, false},
		{"fake client/IB/done", true, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			fake := &fakePerftest{
				isClient:  tt.fakeIsClient,
				version:   "6.06",
				pageSize:  4096,
				cacheLine: 64,
				mtu:       3,
				dest:      Dest{OutReads: 1, QPN: 0x12, PSN: 0x3a84b8, RKey: 0x3bd, VAddr: 0x557200337000},
				report:    [5]uint64{65536, 5000, math.Float64bits(1.5), math.Float64bits(2.5), math.Float64bits(0.04)},
				sendsDone: tt.sendsDone,
			}
			ours := Dest{OutReads: 16, QPN: 0x757202, PSN: 0x757202, RKey: 0x373, VAddr: 0x563692f11000}
			if tt.gid {
				fake.dest.HasGID, fake.dest.GID = true, [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 77, 15: 1}
				ours.HasGID, ours.GID = true, roceGID
			}
			ourReport := BWReport{Size: 65536, Iters: 5000, BWPeak: 11.5, BWAvg: 10.25, MsgRate: 0.5}

			conn, fakeErr := fakePair(t, ctx, fake)
			defer conn.Close()

			peer, err := conn.Handshake(ctx, Hello{PageSize: 16384, CacheLineSize: 128, MTU: MTU4096,
				Params: Params{Test: "write-bw", Fields: []Field{{Flag: "-s", Value: "65536", Symmetric: true}}}})
			if err != nil {
				t.Fatalf("Handshake: %v", err)
			}
			wantPeer := Peer{
				Version:       "6.06",
				Hello:         Hello{PageSize: 4096, CacheLineSize: 64, MTU: MTU1024},
				PageSize:      16384,
				CacheLineSize: 128,
				MTU:           MTU1024,
			}
			if diff := cmp.Diff(wantPeer, peer); diff != "" {
				t.Errorf("Peer (-want +got):\n%s", diff)
			}
			remote, err := conn.ExchangeKeys(ctx, ours)
			if err != nil {
				t.Fatalf("ExchangeKeys: %v", err)
			}
			if remote != fake.dest {
				t.Errorf("remote %+v, want %+v", remote, fake.dest)
			}
			for i := range 3 {
				if err := conn.Barrier(ctx, 0); err != nil {
					t.Fatalf("Barrier %d: %v", i, err)
				}
			}
			rep, err := conn.ExchangeBWReport(ctx, ourReport)
			if err != nil {
				t.Fatalf("ExchangeBWReport: %v", err)
			}
			wantRep := BWReport{Size: 65536, Iters: 5000, BWPeak: 1.5, BWAvg: 2.5, MsgRate: 0.04}
			if diff := cmp.Diff(wantRep, rep); diff != "" {
				t.Errorf("remote report (-want +got):\n%s", diff)
			}
			if err := conn.Finish(ctx); err != nil {
				t.Fatalf("Finish: %v", err)
			}
			if err := <-fakeErr; err != nil {
				t.Fatalf("fake perftest: %v", err)
			}

			// What perftest saw.
			if fake.gotVersion != Version || atof(fake.gotVersion) != 6.27 {
				t.Errorf("perftest saw version %q", fake.gotVersion)
			}
			if fake.gotPage != 16384 || fake.gotCacheLine != 128 || fake.gotMTU != "5" {
				t.Errorf("perftest saw page %d, cache line %d, MTU %q", fake.gotPage, fake.gotCacheLine, fake.gotMTU)
			}
			if len(fake.gotKeys) != 5 {
				t.Fatalf("perftest saw %d key messages, want 5", len(fake.gotKeys))
			}
			for i, k := range fake.gotKeys {
				if k != ours {
					t.Errorf("perftest key %d = %+v, want %+v", i, k, ours)
				}
			}
			wantBits := [5]uint64{65536, 5000, math.Float64bits(11.5), math.Float64bits(10.25), math.Float64bits(0.5)}
			if fake.gotReport != wantBits {
				t.Errorf("perftest saw report %x, want %x", fake.gotReport, wantBits)
			}
		})
	}
}

// fakePair connects a Conn to the fake over 127.0.0.1, the Conn taking the
// role the fake does not. The fake's result arrives on the channel.
func fakePair(t *testing.T, ctx context.Context, fake *fakePerftest) (*Conn, <-chan error) {
	t.Helper()
	return rawPair(t, ctx, fake.isClient, Options{IOTimeout: 5 * time.Second}, fake.run)
}
