package soft_test

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/verbstest"
)

// parentSide connects a local side to a child started in role.
func parentSide(t *testing.T, role string) (*verbstest.Side, *child, verbsio.Endpoint, verbsio.Endpoint) {
	t.Helper()
	s := verbstest.NewSide(t, verbstest.PairConfig{Device: "shm0", BufSize: 1 << 20, Cap: verbsio.QPCap{MaxSendWR: 256, MaxRecvWR: 16, MaxInlineData: 64}})
	c := startChild(t, role)
	shared, err := parseEndpoint(c.recv(t))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := parseEndpoint(c.recv(t))
	if err != nil {
		t.Fatal(err)
	}
	c.send(t, "%s", formatEndpoint(s.Endpoint()))
	if err := s.QP.Connect(s.Endpoint(), shared, verbsio.ConnectOptions{Access: verbstest.AllAccess &^ verbsio.AccessLocalWrite, Timeout: 10, RetryCnt: 3}); err != nil {
		t.Fatal(err)
	}
	if got := c.recv(t); got != "ready" {
		t.Fatalf("child: %q", got)
	}
	return s, c, shared, plain
}

// TestCrossProcessOneSided writes, reads and updates atomically the memory
// of a child process that runs no verbs code meanwhile: shared memory
// (mapped) and ordinary Go memory (process_vm_writev/readv).
func TestCrossProcessOneSided(t *testing.T) {
	s, c, shared, plain := parentSide(t, "target")
	fill := func(seed byte) {
		for i := range s.Buf {
			s.Buf[i] = seed + byte(i*13)
		}
	}
	post := func(wr verbsio.SendWR) verbsio.WC {
		t.Helper()
		wr.Flags |= verbsio.SendSignaled
		if _, err := s.QP.PostSend([]verbsio.SendWR{wr}); err != nil {
			t.Fatal(err)
		}
		return verbstest.PollOne(t, s.CQ)
	}
	const n = 1 << 20
	for _, target := range []struct {
		name string
		ep   verbsio.Endpoint
	}{{"shared", shared}, {"plain", plain}} {
		fill(7)
		want := crc32.ChecksumIEEE(s.Buf)
		if wc := post(verbsio.SendWR{Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{s.MR.SGE(0, n)},
			Remote: verbsio.RemoteAddr{Addr: target.ep.VAddr, RKey: target.ep.RKey}}); wc.Status != verbsio.StatusSuccess {
			t.Fatalf("%s write: %s", target.name, wc.Status)
		}
		fill(0)
		if wc := post(verbsio.SendWR{Opcode: verbsio.OpRDMARead, SGL: []verbsio.SGE{s.MR.SGE(0, n)},
			Remote: verbsio.RemoteAddr{Addr: target.ep.VAddr, RKey: target.ep.RKey}}); wc.Status != verbsio.StatusSuccess {
			t.Fatalf("%s read: %s", target.name, wc.Status)
		}
		if got := crc32.ChecksumIEEE(s.Buf); got != want {
			t.Errorf("%s: read back %08x, wrote %08x", target.name, got, want)
		}
		// Out of bounds by one byte: refused, memory unchanged.
		if wc := post(verbsio.SendWR{Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{s.MR.SGE(0, 2)},
			Remote: verbsio.RemoteAddr{Addr: target.ep.VAddr + n - 1, RKey: target.ep.RKey}}); wc.Status != verbsio.StatusRemAccessErr {
			t.Errorf("%s write past the end: %s, want REM_ACCESS_ERR", target.name, wc.Status)
		}
		s.QP.Modify(&verbsio.QPAttr{State: verbsio.QPStateReset}, verbsio.QPAttrState)
		if err := s.QP.Connect(s.Endpoint(), shared, verbsio.ConnectOptions{Access: verbsio.AccessRemoteWrite}); err != nil {
			t.Fatal(err)
		}
	}
	// Atomics on the shared region.
	for i := 0; i < 100; i++ {
		if wc := post(verbsio.SendWR{Opcode: verbsio.OpAtomicFetchAdd, SGL: []verbsio.SGE{s.MR.SGE(0, 8)},
			Remote: verbsio.RemoteAddr{Addr: shared.VAddr + 4096, RKey: shared.RKey}, Atomic: verbsio.AtomicArgs{CompareAdd: 3}}); wc.Status != verbsio.StatusSuccess {
			t.Fatalf("fetch_add: %s", wc.Status)
		}
	}
	orig := binary.LittleEndian.Uint64(s.Buf)
	if wc := post(verbsio.SendWR{Opcode: verbsio.OpAtomicCmpSwp, SGL: []verbsio.SGE{s.MR.SGE(0, 8)},
		Remote: verbsio.RemoteAddr{Addr: shared.VAddr + 4096, RKey: shared.RKey}, Atomic: verbsio.AtomicArgs{CompareAdd: orig + 3, Swap: 42}}); wc.Status != verbsio.StatusSuccess {
		t.Fatalf("cmp_swp: %s", wc.Status)
	}
	if got := binary.LittleEndian.Uint64(s.Buf); got != orig+3 {
		t.Errorf("cmp_swp returned %d, want %d", got, orig+3)
	}
	// The child's own view of its memory matches what we wrote.
	fill(9)
	for _, ep := range []verbsio.Endpoint{shared, plain} {
		if wc := post(verbsio.SendWR{Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{s.MR.SGE(0, n)},
			Remote: verbsio.RemoteAddr{Addr: ep.VAddr, RKey: ep.RKey}}); wc.Status != verbsio.StatusSuccess {
			t.Fatalf("write: %s", wc.Status)
		}
	}
	wantPlain := crc32.ChecksumIEEE(s.Buf)
	expect := append([]byte(nil), s.Buf...)
	binary.LittleEndian.PutUint64(expect[4096:], binary.LittleEndian.Uint64(expect[4096:])+5)
	wantShared := crc32.ChecksumIEEE(expect)
	if wc := post(verbsio.SendWR{Opcode: verbsio.OpAtomicFetchAdd, SGL: []verbsio.SGE{s.MR.SGE(0, 8)},
		Remote: verbsio.RemoteAddr{Addr: shared.VAddr + 4096, RKey: shared.RKey}, Atomic: verbsio.AtomicArgs{CompareAdd: 5}}); wc.Status != verbsio.StatusSuccess {
		t.Fatalf("fetch_add: %s", wc.Status)
	}
	c.send(t, "report")
	if got, want := c.recv(t), fmt.Sprintf("%08x %08x", wantShared, wantPlain); got != want {
		t.Errorf("child's checksums %s, want %s", got, want)
	}
	c.send(t, "exit")
}

// TestCrossProcessPeerKilled kills the receiving process in the middle of
// a stream of SENDs: the stream ends with RETRY_EXC_ERR and then
// WR_FLUSH_ERR, within the QP's timeout, and nothing hangs.
func TestCrossProcessPeerKilled(t *testing.T) {
	s, c, _, _ := parentSide(t, "sink")
	wr := verbsio.SendWR{Opcode: verbsio.OpSend, SGL: []verbsio.SGE{s.MR.SGE(0, 64)}}
	wcs := make([]verbsio.WC, 64)
	sent, done := 0, 0
	var killedAt time.Time
	var errs []verbsio.WC
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if killedAt.IsZero() && done >= 5000 {
			c.cmd.Process.Kill()
			killedAt = time.Now()
		}
		if sent-done < 128 {
			wr.ID = uint64(sent)
			wr.Flags = verbsio.SendSignaled
			if n, err := s.QP.PostSend([]verbsio.SendWR{wr}); err != nil || n != 1 {
				t.Fatalf("post %d: %v", sent, err)
			}
			sent++
		}
		n, err := s.CQ.Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		for _, wc := range wcs[:n] {
			done++
			if wc.Status != verbsio.StatusSuccess {
				errs = append(errs, wc)
			}
		}
		if len(errs) > 0 && done == sent {
			break
		}
	}
	if killedAt.IsZero() || len(errs) == 0 {
		t.Fatalf("sent %d, completed %d, errors %d: the stream did not fail", sent, done, len(errs))
	}
	if errs[0].Status != verbsio.StatusRetryExcErr {
		t.Errorf("first error %s, want RETRY_EXC_ERR", errs[0].Status)
	}
	for _, wc := range errs[1:] {
		if wc.Status != verbsio.StatusWRFlushErr {
			t.Errorf("later error %s, want WR_FLUSH_ERR", wc.Status)
			break
		}
	}
	// timeout 10 (4.2 ms) x 4 tries; the pidfd usually tells at once.
	if el := time.Since(killedAt); el > 2*time.Second {
		t.Errorf("the failure surfaced %v after the kill", el)
	}
	t.Logf("%d sends completed before the kill was noticed; failure after %v", done-len(errs), time.Since(killedAt))
}
