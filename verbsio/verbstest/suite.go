package verbstest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// target is the device under test and how to open it.
type target struct {
	name string
	open verbsio.OpenOptions
}

// Run runs the conformance suite against device. Every provider that
// claims a feature must pass its part: a failure is a failure, not a skip.
func Run(t *testing.T, device string) { RunWith(t, device, verbsio.OpenOptions{}) }

// RunWith runs the suite opening each context with opts.
func RunWith(t *testing.T, device string, opts verbsio.OpenOptions) {
	dev := target{device, opts}
	t.Run("StateMachine", func(t *testing.T) { testStateMachine(t, dev) })
	t.Run("PostState", func(t *testing.T) { testPostState(t, dev) })
	t.Run("Opcodes", func(t *testing.T) { testOpcodes(t, dev) })
	t.Run("RemoteErrors", func(t *testing.T) { testRemoteErrors(t, dev) })
	t.Run("PostErrors", func(t *testing.T) { testPostErrors(t, dev) })
	t.Run("Unsignaled", func(t *testing.T) { testUnsignaled(t, dev) })
	t.Run("Flush", func(t *testing.T) { testFlush(t, dev) })
	t.Run("SRQ", func(t *testing.T) { testSRQ(t, dev) })
	t.Run("CQOverrun", func(t *testing.T) { testCQOverrun(t, dev) })
	t.Run("Resources", func(t *testing.T) { testResources(t, dev) })
	t.Run("RNR", func(t *testing.T) { testRNR(t, dev) })
	t.Run("PeerGone", func(t *testing.T) { testPeerGone(t, dev) })
	t.Run("DeviceMemory", func(t *testing.T) { testDeviceMemory(t, dev) })
	t.Run("Interfaces", func(t *testing.T) { testInterfaces(t, dev) })
	t.Run("DirectVerbs", func(t *testing.T) { testDirectVerbs(t, dev) })
	t.Run("Pacing", func(t *testing.T) { testPacing(t, dev) })
	t.Run("Timestamps", func(t *testing.T) { testTimestamps(t, dev) })
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

func sum(b []byte) uint32 { return crc32.ChecksumIEEE(b) }

const (
	stateMask = verbsio.QPAttrState
	initRC    = verbsio.QPAttrState | verbsio.QPAttrPkeyIndex | verbsio.QPAttrPort | verbsio.QPAttrAccessFlags
	rtrRC     = verbsio.QPAttrState | verbsio.QPAttrAV | verbsio.QPAttrPathMTU | verbsio.QPAttrDestQPN | verbsio.QPAttrRQPSN |
		verbsio.QPAttrMaxDestRdAtomic | verbsio.QPAttrMinRNRTimer
	rtsRC = verbsio.QPAttrState | verbsio.QPAttrTimeout | verbsio.QPAttrRetryCnt | verbsio.QPAttrRNRRetry | verbsio.QPAttrSQPSN |
		verbsio.QPAttrMaxQPRdAtomic
)

func testStateMachine(t *testing.T, dev target) {
	p := NewPair(t, PairConfig{Device: dev.name, Open: dev.open, NoConnect: true})
	q := p.A.QP
	peer := p.B.Endpoint()
	good := verbsio.QPAttr{State: verbsio.QPStateInit, PortNum: 1, AccessFlags: verbsio.AccessRemoteWrite,
		PathMTU: verbsio.MTU1024, DestQPN: peer.QPN, AH: verbsio.AHAttr{IsGlobal: true, DGID: peer.GID, PortNum: 1},
		MinRNRTimer: 12, MaxDestRdAtomic: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1}
	with := func(s verbsio.QPState, f func(a *verbsio.QPAttr)) *verbsio.QPAttr {
		a := good
		a.State = s
		if f != nil {
			f(&a)
		}
		return &a
	}
	steps := []struct {
		name    string
		attr    *verbsio.QPAttr
		mask    verbsio.QPAttrMask
		wantErr bool
		state   verbsio.QPState // state afterwards
	}{
		{"RESET->RTR skips INIT", with(verbsio.QPStateRTR, nil), rtrRC, true, verbsio.QPStateReset},
		{"RESET->RTS skips INIT", with(verbsio.QPStateRTS, nil), rtsRC, true, verbsio.QPStateReset},
		{"RESET->INIT without ACCESS_FLAGS", with(verbsio.QPStateInit, nil), initRC &^ verbsio.QPAttrAccessFlags, true, verbsio.QPStateReset},
		{"RESET->INIT with PATH_MTU (not allowed)", with(verbsio.QPStateInit, nil), initRC | verbsio.QPAttrPathMTU, true, verbsio.QPStateReset},
		{"RESET->INIT port 2", with(verbsio.QPStateInit, func(a *verbsio.QPAttr) { a.PortNum = 2 }), initRC, true, verbsio.QPStateReset},
		{"RESET->INIT", with(verbsio.QPStateInit, nil), initRC, false, verbsio.QPStateInit},
		{"INIT->INIT", with(verbsio.QPStateInit, nil), initRC, false, verbsio.QPStateInit},
		{"INIT->RTS skips RTR", with(verbsio.QPStateRTS, nil), rtsRC, true, verbsio.QPStateInit},
		{"INIT->RTR without DEST_QPN", with(verbsio.QPStateRTR, nil), rtrRC &^ verbsio.QPAttrDestQPN, true, verbsio.QPStateInit},
		{"INIT->RTR without MIN_RNR_TIMER", with(verbsio.QPStateRTR, nil), rtrRC &^ verbsio.QPAttrMinRNRTimer, true, verbsio.QPStateInit},
		{"INIT->RTR MTU 8192", with(verbsio.QPStateRTR, func(a *verbsio.QPAttr) { a.PathMTU = 6 }), rtrRC, true, verbsio.QPStateInit},
		{"INIT->RTR rq_psn over 24 bits", with(verbsio.QPStateRTR, func(a *verbsio.QPAttr) { a.RQPSN = 1 << 24 }), rtrRC, true, verbsio.QPStateInit},
		{"INIT->RTR", with(verbsio.QPStateRTR, nil), rtrRC, false, verbsio.QPStateRTR},
		{"RTR->RTS without TIMEOUT", with(verbsio.QPStateRTS, nil), rtsRC &^ verbsio.QPAttrTimeout, true, verbsio.QPStateRTR},
		{"RTR->RTS retry_cnt 8", with(verbsio.QPStateRTS, func(a *verbsio.QPAttr) { a.RetryCnt = 8 }), rtsRC, true, verbsio.QPStateRTR},
		{"RTR->RTS timeout 32", with(verbsio.QPStateRTS, func(a *verbsio.QPAttr) { a.Timeout = 32 }), rtsRC, true, verbsio.QPStateRTR},
		{"RTR->RTS", with(verbsio.QPStateRTS, nil), rtsRC, false, verbsio.QPStateRTS},
		{"RTS->RTS with MIN_RNR_TIMER", with(verbsio.QPStateRTS, nil), stateMask | verbsio.QPAttrMinRNRTimer, false, verbsio.QPStateRTS},
		{"RTS->INIT", with(verbsio.QPStateInit, nil), initRC, true, verbsio.QPStateRTS},
		{"RTS->ERR", with(verbsio.QPStateErr, nil), stateMask, false, verbsio.QPStateErr},
		{"ERR->RTS", with(verbsio.QPStateRTS, nil), rtsRC, true, verbsio.QPStateErr},
		{"ERR->RESET", with(verbsio.QPStateReset, nil), stateMask, false, verbsio.QPStateReset},
		{"RESET->INIT again", with(verbsio.QPStateInit, nil), initRC, false, verbsio.QPStateInit},
	}
	for _, s := range steps {
		err := q.Modify(s.attr, s.mask)
		if s.wantErr {
			if !errors.Is(err, unix.EINVAL) {
				t.Errorf("%s: err = %v, want EINVAL", s.name, err)
			}
		} else if err != nil {
			t.Errorf("%s: %v", s.name, err)
		}
		a, err := q.Query()
		if err != nil || a.State != s.state {
			t.Errorf("%s: state %s (err %v), want %s", s.name, a.State, err, s.state)
		}
	}

	// UD needs a Q_Key, not access flags, and nothing at RTR.
	ud := NewSide(t, PairConfig{Device: dev.name, Open: dev.open, Type: verbsio.QPTypeUD})
	udInit := verbsio.QPAttr{State: verbsio.QPStateInit, PortNum: 1, QKey: 0x11111111}
	if err := ud.QP.Modify(&udInit, initRC); !errors.Is(err, unix.EINVAL) {
		t.Errorf("UD RESET->INIT with ACCESS_FLAGS and no QKEY: err = %v, want EINVAL", err)
	}
	if err := ud.QP.Modify(&udInit, stateMask|verbsio.QPAttrPkeyIndex|verbsio.QPAttrPort|verbsio.QPAttrQKey); err != nil {
		t.Errorf("UD RESET->INIT: %v", err)
	}
	if err := ud.QP.Modify(&verbsio.QPAttr{State: verbsio.QPStateRTR}, stateMask); err != nil {
		t.Errorf("UD INIT->RTR: %v", err)
	}
	if err := ud.QP.Modify(&verbsio.QPAttr{State: verbsio.QPStateRTS}, stateMask); !errors.Is(err, unix.EINVAL) {
		t.Errorf("UD RTR->RTS without SQ_PSN: err = %v, want EINVAL", err)
	}
	if err := ud.QP.Modify(&verbsio.QPAttr{State: verbsio.QPStateRTS}, stateMask|verbsio.QPAttrSQPSN); err != nil {
		t.Errorf("UD RTR->RTS: %v", err)
	}
}

func testPostState(t *testing.T, dev target) {
	s := NewSide(t, PairConfig{Device: dev.name, Open: dev.open})
	wr := []verbsio.SendWR{{Opcode: verbsio.OpSend, SGL: []verbsio.SGE{s.MR.SGE(0, 8)}}}
	if n, err := s.QP.PostSend(wr); n != 0 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("post_send in RESET: n=%d err=%v, want 0, EINVAL", n, err)
	}
	if n, err := s.QP.PostRecv([]verbsio.RecvWR{{SGL: []verbsio.SGE{s.MR.SGE(0, 8)}}}); n != 0 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("post_recv in RESET: n=%d err=%v, want 0, EINVAL", n, err)
	}
	if err := s.QP.Modify(&verbsio.QPAttr{State: verbsio.QPStateInit, PortNum: 1}, initRC); err != nil {
		t.Fatal(err)
	}
	if n, err := s.QP.PostSend(wr); n != 0 || !errors.Is(err, unix.EINVAL) {
		t.Errorf("post_send in INIT: n=%d err=%v, want 0, EINVAL", n, err)
	}
	if n, err := s.QP.PostRecv([]verbsio.RecvWR{{SGL: []verbsio.SGE{s.MR.SGE(0, 8)}}}); n != 1 || err != nil {
		t.Errorf("post_recv in INIT: n=%d err=%v, want 1, nil", n, err)
	}
}

// opCase is one successful operation: what A posts, what B has posted, the
// completions both sides must see and the bytes that must have moved.
type opCase struct {
	name    string
	qpType  verbsio.QPType
	recv    []verbsio.SGE // B's receive SGEs as offsets/lengths into B.Buf (LKey filled in)
	wr      func(p *Pair) verbsio.SendWR
	after   func(p *Pair) // runs right after the post returns (inline buffer reuse)
	sendWC  verbsio.WC    // ID, Status, Opcode, ByteLen checked
	recvWC  *verbsio.WC   // ID, Status, Opcode, ByteLen, Imm, Flags checked (and SrcQP for UD)
	check   func(t *testing.T, p *Pair)
	srcSeed byte
}

func sge(s *Side, off, n int) verbsio.SGE { return s.MR.SGE(off, n) }

func testOpcodes(t *testing.T, dev target) {
	const imm = 0xdeadbeef
	cases := []opCase{
		{name: "RC WRITE 1 byte", wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, 1)},
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr() + 77, RKey: p.B.MR.RKey()}}
		}, sendWC: verbsio.WC{ID: 1, Opcode: verbsio.WCRDMAWrite, ByteLen: 1},
			check: func(t *testing.T, p *Pair) { expectBytes(t, p.B.Buf[77:78], p.A.Buf[:1]) }},
		{name: "RC WRITE 3 SGEs 12 KiB", wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 2, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled,
				SGL:    []verbsio.SGE{sge(p.A, 0, 4096), sge(p.A, 8192, 4096), sge(p.A, 100, 4096)},
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr() + 20000, RKey: p.B.MR.RKey()}}
		}, sendWC: verbsio.WC{ID: 2, Opcode: verbsio.WCRDMAWrite, ByteLen: 12288},
			check: func(t *testing.T, p *Pair) {
				want := append(append(append([]byte{}, p.A.Buf[:4096]...), p.A.Buf[8192:12288]...), p.A.Buf[100:4196]...)
				expectBytes(t, p.B.Buf[20000:32288], want)
			}},
		{name: "RC WRITE 0 bytes", wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 3, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled,
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}
		}, sendWC: verbsio.WC{ID: 3, Opcode: verbsio.WCRDMAWrite}},
		{name: "RC WRITE_WITH_IMM", recv: []verbsio.SGE{{Length: 16}}, wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 4, Opcode: verbsio.OpRDMAWriteImm, Flags: verbsio.SendSignaled, Imm: imm,
				SGL: []verbsio.SGE{sge(p.A, 0, 300)}, Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr() + 4000, RKey: p.B.MR.RKey()}}
		}, sendWC: verbsio.WC{ID: 4, Opcode: verbsio.WCRDMAWrite, ByteLen: 300},
			recvWC: &verbsio.WC{ID: 100, Opcode: verbsio.WCRecvRDMAWithImm, ByteLen: 300, Imm: imm, Flags: verbsio.WCWithImm},
			check:  func(t *testing.T, p *Pair) { expectBytes(t, p.B.Buf[4000:4300], p.A.Buf[:300]) }},
		{name: "RC SEND scattered", recv: []verbsio.SGE{{Addr: 1000, Length: 10}, {Addr: 5000, Length: 100}}, wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 5, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 50, 60)}}
		}, sendWC: verbsio.WC{ID: 5, Opcode: verbsio.WCSend, ByteLen: 60},
			recvWC: &verbsio.WC{ID: 100, Opcode: verbsio.WCRecv, ByteLen: 60},
			check: func(t *testing.T, p *Pair) {
				expectBytes(t, p.B.Buf[1000:1010], p.A.Buf[50:60])
				expectBytes(t, p.B.Buf[5000:5050], p.A.Buf[60:110])
			}},
		{name: "RC SEND_WITH_IMM", recv: []verbsio.SGE{{Addr: 0, Length: 64}}, wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 6, Opcode: verbsio.OpSendImm, Imm: imm, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, 64)}}
		}, sendWC: verbsio.WC{ID: 6, Opcode: verbsio.WCSend, ByteLen: 64},
			recvWC: &verbsio.WC{ID: 100, Opcode: verbsio.WCRecv, ByteLen: 64, Imm: imm, Flags: verbsio.WCWithImm},
			check:  func(t *testing.T, p *Pair) { expectBytes(t, p.B.Buf[:64], p.A.Buf[:64]) }},
		{name: "RC SEND 0 bytes", recv: []verbsio.SGE{{Addr: 0, Length: 64}}, wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 7, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled}
		}, sendWC: verbsio.WC{ID: 7, Opcode: verbsio.WCSend}, recvWC: &verbsio.WC{ID: 100, Opcode: verbsio.WCRecv}},
		{name: "RC SEND inline, buffer reused at once", recv: []verbsio.SGE{{Addr: 0, Length: 64}}, wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 8, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled | verbsio.SendInline, SGL: []verbsio.SGE{sge(p.A, 0, 32)}}
		}, after: func(p *Pair) { copy(p.A.Buf[200:232], p.A.Buf[:32]); fill(p.A.Buf[:32], 0x55) },
			sendWC: verbsio.WC{ID: 8, Opcode: verbsio.WCSend, ByteLen: 32},
			recvWC: &verbsio.WC{ID: 100, Opcode: verbsio.WCRecv, ByteLen: 32},
			check:  func(t *testing.T, p *Pair) { expectBytes(t, p.B.Buf[:32], p.A.Buf[200:232]) }},
		{name: "RC WRITE inline", wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 9, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled | verbsio.SendInline,
				SGL: []verbsio.SGE{sge(p.A, 0, 16), sge(p.A, 1000, 16)}, Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr() + 8, RKey: p.B.MR.RKey()}}
		}, sendWC: verbsio.WC{ID: 9, Opcode: verbsio.WCRDMAWrite, ByteLen: 32},
			check: func(t *testing.T, p *Pair) {
				expectBytes(t, p.B.Buf[8:24], p.A.Buf[:16])
				expectBytes(t, p.B.Buf[24:40], p.A.Buf[1000:1016])
			}},
		{name: "RC READ 2 SGEs", wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 10, Opcode: verbsio.OpRDMARead, Flags: verbsio.SendSignaled,
				SGL:    []verbsio.SGE{sge(p.A, 30000, 100), sge(p.A, 40000, 200)},
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr() + 123, RKey: p.B.MR.RKey()}}
		}, sendWC: verbsio.WC{ID: 10, Opcode: verbsio.WCRDMARead, ByteLen: 300},
			check: func(t *testing.T, p *Pair) {
				expectBytes(t, p.A.Buf[30000:30100], p.B.Buf[123:223])
				expectBytes(t, p.A.Buf[40000:40200], p.B.Buf[223:423])
			}},
		{name: "RC CMP_AND_SWP hit", wr: func(p *Pair) verbsio.SendWR {
			binary.LittleEndian.PutUint64(p.B.Buf[64:], 41)
			return verbsio.SendWR{ID: 11, Opcode: verbsio.OpAtomicCmpSwp, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 8, 8)},
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr() + 64, RKey: p.B.MR.RKey()}, Atomic: verbsio.AtomicArgs{CompareAdd: 41, Swap: 99}}
		}, sendWC: verbsio.WC{ID: 11, Opcode: verbsio.WCCompSwap, ByteLen: 8},
			check: func(t *testing.T, p *Pair) {
				expectU64(t, "remote", p.B.Buf[64:], 99)
				expectU64(t, "returned", p.A.Buf[8:], 41)
			}},
		{name: "RC CMP_AND_SWP miss", wr: func(p *Pair) verbsio.SendWR {
			binary.LittleEndian.PutUint64(p.B.Buf[64:], 40)
			return verbsio.SendWR{ID: 12, Opcode: verbsio.OpAtomicCmpSwp, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 8, 8)},
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr() + 64, RKey: p.B.MR.RKey()}, Atomic: verbsio.AtomicArgs{CompareAdd: 41, Swap: 99}}
		}, sendWC: verbsio.WC{ID: 12, Opcode: verbsio.WCCompSwap, ByteLen: 8},
			check: func(t *testing.T, p *Pair) {
				expectU64(t, "remote", p.B.Buf[64:], 40)
				expectU64(t, "returned", p.A.Buf[8:], 40)
			}},
		{name: "RC FETCH_AND_ADD", wr: func(p *Pair) verbsio.SendWR {
			binary.LittleEndian.PutUint64(p.B.Buf[128:], 1000)
			return verbsio.SendWR{ID: 13, Opcode: verbsio.OpAtomicFetchAdd, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 16, 8)},
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr() + 128, RKey: p.B.MR.RKey()}, Atomic: verbsio.AtomicArgs{CompareAdd: 5}}
		}, sendWC: verbsio.WC{ID: 13, Opcode: verbsio.WCFetchAdd, ByteLen: 8},
			check: func(t *testing.T, p *Pair) {
				expectU64(t, "remote", p.B.Buf[128:], 1005)
				expectU64(t, "returned", p.A.Buf[16:], 1000)
			}},
		{name: "UC WRITE", qpType: verbsio.QPTypeUC, wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 14, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, 512)},
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr() + 512, RKey: p.B.MR.RKey()}}
		}, sendWC: verbsio.WC{ID: 14, Opcode: verbsio.WCRDMAWrite, ByteLen: 512},
			check: func(t *testing.T, p *Pair) { expectBytes(t, p.B.Buf[512:1024], p.A.Buf[:512]) }},
		{name: "UC SEND", qpType: verbsio.QPTypeUC, recv: []verbsio.SGE{{Addr: 0, Length: 128}}, wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 15, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, 128)}}
		}, sendWC: verbsio.WC{ID: 15, Opcode: verbsio.WCSend, ByteLen: 128},
			recvWC: &verbsio.WC{ID: 100, Opcode: verbsio.WCRecv, ByteLen: 128},
			check:  func(t *testing.T, p *Pair) { expectBytes(t, p.B.Buf[:128], p.A.Buf[:128]) }},
		{name: "UD SEND with GRH", qpType: verbsio.QPTypeUD, recv: []verbsio.SGE{{Addr: 0, Length: 40 + 256}}, wr: func(p *Pair) verbsio.SendWR {
			ah, err := p.A.PD.CreateAH(verbsio.AHAttr{IsGlobal: true, DGID: p.B.GID, DLID: p.B.LID, PortNum: 1})
			if err != nil {
				panic(err)
			}
			return verbsio.SendWR{ID: 16, Opcode: verbsio.OpSendImm, Imm: 5, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, 256)},
				UD: verbsio.UDAddr{AH: ah, RemoteQPN: p.B.QP.QPN(), RemoteQKey: verbsio.DefaultQKey}}
		}, sendWC: verbsio.WC{ID: 16, Opcode: verbsio.WCSend, ByteLen: 256},
			recvWC: &verbsio.WC{ID: 100, Opcode: verbsio.WCRecv, ByteLen: 296, Imm: 5, Flags: verbsio.WCWithGRH | verbsio.WCWithImm},
			check:  func(t *testing.T, p *Pair) { expectBytes(t, p.B.Buf[40:296], p.A.Buf[:256]) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			typ := c.qpType
			if typ == 0 {
				typ = verbsio.QPTypeRC
			}
			p := NewPair(t, PairConfig{Device: dev.name, Open: dev.open, Type: typ, Cap: verbsio.QPCap{MaxInlineData: 64}})
			fill(p.A.Buf, 1)
			fill(p.B.Buf, 100)
			if c.recv != nil {
				sg := make([]verbsio.SGE, len(c.recv))
				for i, r := range c.recv {
					sg[i] = sge(p.B, int(r.Addr), int(r.Length))
				}
				if _, err := p.B.QP.PostRecv([]verbsio.RecvWR{{ID: 100, SGL: sg}}); err != nil {
					t.Fatal(err)
				}
			}
			wr := c.wr(p)
			if n, err := p.A.QP.PostSend([]verbsio.SendWR{wr}); n != 1 || err != nil {
				t.Fatalf("post_send: %d, %v", n, err)
			}
			if c.after != nil {
				c.after(p)
			}
			got := PollOne(t, p.A.CQ)
			if got.Status != verbsio.StatusSuccess || got.ID != c.sendWC.ID || got.Opcode != c.sendWC.Opcode || got.ByteLen != c.sendWC.ByteLen {
				t.Errorf("send completion %+v, want %+v", got, c.sendWC)
			}
			if got.QPN != p.A.QP.QPN() {
				t.Errorf("send completion QPN %#x, want %#x", got.QPN, p.A.QP.QPN())
			}
			if c.recvWC != nil {
				r := PollOne(t, p.B.CQ)
				w := c.recvWC
				if r.Status != verbsio.StatusSuccess || r.ID != w.ID || r.Opcode != w.Opcode || r.ByteLen != w.ByteLen ||
					r.Flags != w.Flags || (w.Flags&verbsio.WCWithImm != 0 && r.Imm != w.Imm) || r.QPN != p.B.QP.QPN() {
					t.Errorf("receive completion %+v, want %+v", r, *w)
				}
				if typ == verbsio.QPTypeUD && r.SrcQP != p.A.QP.QPN() {
					t.Errorf("UD receive SrcQP %#x, want %#x", r.SrcQP, p.A.QP.QPN())
				}
			}
			ExpectEmpty(t, p.A.CQ)
			ExpectEmpty(t, p.B.CQ)
			if c.check != nil {
				c.check(t, p)
			}
		})
	}
}

func expectBytes(t *testing.T, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("data mismatch: got % x..., want % x...", head(got), head(want))
	}
}

func head(b []byte) []byte {
	if len(b) > 16 {
		return b[:16]
	}
	return b
}

func expectU64(t *testing.T, what string, b []byte, want uint64) {
	t.Helper()
	if got := binary.LittleEndian.Uint64(b); got != want {
		t.Errorf("%s value %d, want %d", what, got, want)
	}
}

// errCase is a request that must fail with a completion status.
type errCase struct {
	name     string
	cfg      func(c *PairConfig)
	prep     func(t *testing.T, p *Pair) // e.g. post receives, register other MRs
	wr       func(p *Pair) verbsio.SendWR
	want     verbsio.Status
	recvWant verbsio.Status // 0: no receive completion expected
}

func testRemoteErrors(t *testing.T, dev target) {
	write := func(off uint64, n int, rkey func(p *Pair) uint32) func(p *Pair) verbsio.SendWR {
		return func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, n)},
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr() + off, RKey: rkey(p)}}
		}
	}
	goodKey := func(p *Pair) uint32 { return p.B.MR.RKey() }
	var other *verbsio.MR
	otherMR := func(access verbsio.Access, newPD bool) func(t *testing.T, p *Pair) {
		return func(t *testing.T, p *Pair) {
			pd := p.B.PD
			if newPD {
				var err error
				if pd, err = p.B.Ctx.AllocPD(); err != nil {
					t.Fatal(err)
				}
			}
			buf, err := p.B.Ctx.Alloc(4096)
			if err != nil {
				t.Fatal(err)
			}
			if other, err = pd.RegMR(buf, access); err != nil {
				t.Fatal(err)
			}
		}
	}
	toOther := func(op verbsio.Opcode) func(p *Pair) verbsio.SendWR {
		return func(p *Pair) verbsio.SendWR {
			n := 64
			if op.IsAtomic() {
				n = 8
			}
			return verbsio.SendWR{ID: 1, Opcode: op, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, n)},
				Remote: verbsio.RemoteAddr{Addr: other.Addr(), RKey: other.RKey()}}
		}
	}
	cases := []errCase{
		{name: "WRITE bad rkey", wr: write(0, 64, func(p *Pair) uint32 { return p.B.MR.RKey() + 1<<20 }), want: verbsio.StatusRemAccessErr},
		{name: "WRITE rkey 0", wr: write(0, 64, func(*Pair) uint32 { return 0 }), want: verbsio.StatusRemAccessErr},
		{name: "WRITE past the end", wr: write(1<<16-32, 64, goodKey), want: verbsio.StatusRemAccessErr},
		{name: "WRITE wrapping address", wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, 64)},
				Remote: verbsio.RemoteAddr{Addr: ^uint64(0) - 10, RKey: p.B.MR.RKey()}}
		}, want: verbsio.StatusRemAccessErr},
		{name: "WRITE below the start", wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, 64)},
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr() - 8, RKey: p.B.MR.RKey()}}
		}, want: verbsio.StatusRemAccessErr},
		{name: "WRITE to MR without REMOTE_WRITE", prep: otherMR(verbsio.AccessLocalWrite|verbsio.AccessRemoteRead, false),
			wr: toOther(verbsio.OpRDMAWrite), want: verbsio.StatusRemAccessErr},
		{name: "READ from MR without REMOTE_READ", prep: otherMR(verbsio.AccessLocalWrite|verbsio.AccessRemoteWrite, false),
			wr: toOther(verbsio.OpRDMARead), want: verbsio.StatusRemAccessErr},
		{name: "ATOMIC on MR without REMOTE_ATOMIC", prep: otherMR(verbsio.AccessLocalWrite|verbsio.AccessRemoteWrite|verbsio.AccessRemoteRead, false),
			wr: toOther(verbsio.OpAtomicFetchAdd), want: verbsio.StatusRemAccessErr},
		{name: "WRITE to MR of another PD", prep: otherMR(AllAccess, true), wr: toOther(verbsio.OpRDMAWrite), want: verbsio.StatusRemAccessErr},
		{name: "WRITE to QP without remote write", cfg: func(c *PairConfig) { c.QPAcc = verbsio.AccessRemoteRead },
			wr: write(0, 64, goodKey), want: verbsio.StatusRemAccessErr},
		{name: "READ from QP without remote read", cfg: func(c *PairConfig) { c.QPAcc = verbsio.AccessRemoteWrite },
			wr: func(p *Pair) verbsio.SendWR {
				return verbsio.SendWR{ID: 1, Opcode: verbsio.OpRDMARead, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, 64)},
					Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}
			}, want: verbsio.StatusRemAccessErr},
		{name: "WRITE bad lkey", wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled,
				SGL:    []verbsio.SGE{{Addr: p.A.MR.Addr(), Length: 64, LKey: p.A.MR.LKey() ^ 0x7}},
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}
		}, want: verbsio.StatusLocProtErr},
		{name: "WRITE local SGE past the end", wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled,
				SGL:    []verbsio.SGE{{Addr: p.A.MR.Addr() + 1<<16 - 10, Length: 64, LKey: p.A.MR.LKey()}},
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}
		}, want: verbsio.StatusLocProtErr},
		{name: "READ into MR without LOCAL_WRITE", cfg: func(c *PairConfig) { c.Access = verbsio.AccessRemoteRead },
			wr: func(p *Pair) verbsio.SendWR {
				return verbsio.SendWR{ID: 1, Opcode: verbsio.OpRDMARead, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, 64)},
					Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}
			}, want: verbsio.StatusLocProtErr},
		{name: "ATOMIC misaligned", wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 1, Opcode: verbsio.OpAtomicCmpSwp, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, 8)},
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr() + 4, RKey: p.B.MR.RKey()}}
		}, want: verbsio.StatusRemInvReqErr},
		{name: "ATOMIC 4-byte result buffer", wr: func(p *Pair) verbsio.SendWR {
			return verbsio.SendWR{ID: 1, Opcode: verbsio.OpAtomicFetchAdd, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, 4)},
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}
		}, want: verbsio.StatusLocLenErr},
		{name: "SEND into a receive buffer too small", prep: postRecv(0, 16), wr: sendN(64),
			want: verbsio.StatusRemInvReqErr, recvWant: verbsio.StatusLocLenErr},
		{name: "SEND into a receive buffer with a bad lkey", prep: func(t *testing.T, p *Pair) {
			if _, err := p.B.QP.PostRecv([]verbsio.RecvWR{{ID: 100, SGL: []verbsio.SGE{{Addr: p.B.MR.Addr(), Length: 128, LKey: p.B.MR.LKey() + 1<<20}}}}); err != nil {
				t.Fatal(err)
			}
		}, wr: sendN(64), want: verbsio.StatusRemOpErr, recvWant: verbsio.StatusLocProtErr},
		{name: "SEND with no receive posted, rnr_retry 0", cfg: func(c *PairConfig) { c.Connect.ZeroRNRRetry = true; c.Connect.MinRNRTimer = 1 },
			wr: sendN(8), want: verbsio.StatusRNRRetryExcErr},
		{name: "SEND with no receive posted, rnr_retry 2", cfg: func(c *PairConfig) { c.Connect.RNRRetry = 2; c.Connect.MinRNRTimer = 1 },
			wr: sendN(8), want: verbsio.StatusRNRRetryExcErr},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := PairConfig{Device: dev.name, Open: dev.open}
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			p := NewPair(t, cfg)
			fill(p.A.Buf, 1)
			fill(p.B.Buf, 100)
			if c.prep != nil {
				c.prep(t, p)
			}
			before := sum(p.B.Buf)
			var otherBefore uint32
			if other != nil {
				otherBefore = sum(other.Buf())
			}
			wr := c.wr(p)
			next := verbsio.SendWR{ID: 2, Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{sge(p.A, 0, 8)},
				Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}
			if n, err := p.A.QP.PostSend([]verbsio.SendWR{wr}); n != 1 || err != nil {
				t.Fatalf("post_send: %d, %v", n, err)
			}
			got := PollOne(t, p.A.CQ)
			if got.Status != c.want || got.ID != 1 {
				t.Errorf("completion %s (id %d), want %s", got.Status, got.ID, c.want)
			}
			if c.recvWant != 0 {
				r := PollOne(t, p.B.CQ)
				if r.Status != c.recvWant || r.ID != 100 {
					t.Errorf("receive completion %s (id %d), want %s", r.Status, r.ID, c.recvWant)
				}
			}
			a, _ := p.A.QP.Query()
			if a.State != verbsio.QPStateErr {
				t.Errorf("QP state after the error: %s, want ERR", a.State)
			}
			// Later requests are flushed, unsignaled or not.
			if n, err := p.A.QP.PostSend([]verbsio.SendWR{next}); n != 1 || err != nil {
				t.Fatalf("post_send after error: %d, %v", n, err)
			}
			if f := PollOne(t, p.A.CQ); f.Status != verbsio.StatusWRFlushErr || f.ID != 2 {
				t.Errorf("after the error: %s (id %d), want WR_FLUSH_ERR (id 2)", f.Status, f.ID)
			}
			if after := sum(p.B.Buf); after != before && c.recvWant == 0 {
				t.Errorf("target memory changed by a failed request")
			}
			if other != nil && sum(other.Buf()) != otherBefore {
				t.Errorf("protected region changed by a failed request")
			}
			other = nil
		})
	}
}

func postRecv(off, n int) func(t *testing.T, p *Pair) {
	return func(t *testing.T, p *Pair) {
		if _, err := p.B.QP.PostRecv([]verbsio.RecvWR{{ID: 100, SGL: []verbsio.SGE{sge(p.B, off, n)}}}); err != nil {
			t.Fatal(err)
		}
	}
}

func sendN(n int) func(p *Pair) verbsio.SendWR {
	return func(p *Pair) verbsio.SendWR {
		return verbsio.SendWR{ID: 1, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, n)}}
	}
}

func testPostErrors(t *testing.T, dev target) {
	cases := []struct {
		name  string
		typ   verbsio.QPType
		wr    func(p *Pair) []verbsio.SendWR
		n     int
		errno unix.Errno
	}{
		{"too many SGEs", verbsio.QPTypeRC, func(p *Pair) []verbsio.SendWR {
			return []verbsio.SendWR{{Opcode: verbsio.OpSend, SGL: make([]verbsio.SGE, 5)}}
		}, 0, unix.EINVAL},
		{"inline longer than max_inline_data", verbsio.QPTypeRC, func(p *Pair) []verbsio.SendWR {
			return []verbsio.SendWR{{Opcode: verbsio.OpSend, Flags: verbsio.SendInline, SGL: []verbsio.SGE{sge(p.A, 0, 65)}}}
		}, 0, unix.EINVAL},
		{"inline from unknown memory", verbsio.QPTypeRC, func(p *Pair) []verbsio.SendWR {
			return []verbsio.SendWR{{Opcode: verbsio.OpSend, Flags: verbsio.SendInline, SGL: []verbsio.SGE{{Addr: 4096, Length: 8}}}}
		}, 0, unix.EFAULT},
		{"READ on UC", verbsio.QPTypeUC, func(p *Pair) []verbsio.SendWR {
			return []verbsio.SendWR{{Opcode: verbsio.OpRDMARead, SGL: []verbsio.SGE{sge(p.A, 0, 8)}}}
		}, 0, unix.EINVAL},
		{"WRITE on UD", verbsio.QPTypeUD, func(p *Pair) []verbsio.SendWR {
			return []verbsio.SendWR{{Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{sge(p.A, 0, 8)}}}
		}, 0, unix.EINVAL},
		{"UD without address handle", verbsio.QPTypeUD, func(p *Pair) []verbsio.SendWR {
			return []verbsio.SendWR{{Opcode: verbsio.OpSend, SGL: []verbsio.SGE{sge(p.A, 0, 8)}}}
		}, 0, unix.EINVAL},
		{"second request bad, first posted", verbsio.QPTypeRC, func(p *Pair) []verbsio.SendWR {
			return []verbsio.SendWR{
				{Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{sge(p.A, 0, 8)}, Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}},
				{Opcode: verbsio.OpSend, SGL: make([]verbsio.SGE, 9)}}
		}, 1, unix.EINVAL},
		{"send queue full", verbsio.QPTypeRC, func(p *Pair) []verbsio.SendWR {
			wrs := make([]verbsio.SendWR, 65)
			for i := range wrs {
				wrs[i] = verbsio.SendWR{Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{sge(p.A, 0, 8)}, Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}
			}
			return wrs
		}, 64, unix.ENOMEM},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := NewPair(t, PairConfig{Device: dev.name, Open: dev.open, Type: c.typ, Cap: verbsio.QPCap{MaxInlineData: 64}})
			n, err := p.A.QP.PostSend(c.wr(p))
			if n != c.n || !errors.Is(err, c.errno) {
				t.Errorf("post_send = %d, %v; want %d, %s", n, err, c.n, unix.ErrnoName(c.errno))
			}
			var ve *verbsio.Error
			if err != nil && (!errors.As(err, &ve) || ve.Detail == "") {
				t.Errorf("error %v carries no detail", err)
			}
		})
	}
	t.Run("receive queue full", func(t *testing.T) {
		p := NewPair(t, PairConfig{Device: dev.name, Open: dev.open})
		wrs := make([]verbsio.RecvWR, 65)
		for i := range wrs {
			wrs[i] = verbsio.RecvWR{SGL: []verbsio.SGE{sge(p.B, 0, 8)}}
		}
		if n, err := p.B.QP.PostRecv(wrs); n != 64 || !errors.Is(err, unix.ENOMEM) {
			t.Errorf("post_recv = %d, %v; want 64, ENOMEM", n, err)
		}
	})
}

func testUnsignaled(t *testing.T, dev target) {
	p := NewPair(t, PairConfig{Device: dev.name, Open: dev.open, Cap: verbsio.QPCap{MaxSendWR: 16}})
	w := verbsio.SendWR{Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{sge(p.A, 0, 8)}, Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}
	for round := 0; round < 5; round++ {
		wrs := make([]verbsio.SendWR, 16)
		for i := range wrs {
			wrs[i] = w
			wrs[i].ID = uint64(round*100 + i)
		}
		wrs[15].Flags = verbsio.SendSignaled
		if n, err := p.A.QP.PostSend(wrs); n != 16 || err != nil {
			t.Fatalf("round %d: post %d, %v (slots of unsignaled requests must be freed by the signaled completion)", round, n, err)
		}
		if n, err := p.A.QP.PostSend(wrs[:1]); n != 0 || !errors.Is(err, unix.ENOMEM) {
			t.Fatalf("round %d: post into a full queue: %d, %v; want ENOMEM", round, n, err)
		}
		wc := PollOne(t, p.A.CQ)
		if wc.ID != uint64(round*100+15) || wc.Status != verbsio.StatusSuccess {
			t.Fatalf("round %d: completion %+v", round, wc)
		}
		ExpectEmpty(t, p.A.CQ)
	}
	// With sq_sig_all every request completes.
	q := NewPair(t, PairConfig{Device: dev.name, Open: dev.open, SQSig: true})
	wrs := []verbsio.SendWR{w, w, w}
	wrs[0].Remote.RKey, wrs[1].Remote.RKey, wrs[2].Remote.RKey = q.B.MR.RKey(), q.B.MR.RKey(), q.B.MR.RKey()
	wrs[0].Remote.Addr, wrs[1].Remote.Addr, wrs[2].Remote.Addr = q.B.MR.Addr(), q.B.MR.Addr(), q.B.MR.Addr()
	wrs[0].SGL, wrs[1].SGL, wrs[2].SGL = []verbsio.SGE{sge(q.A, 0, 8)}, []verbsio.SGE{sge(q.A, 0, 8)}, []verbsio.SGE{sge(q.A, 0, 8)}
	if _, err := q.A.QP.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	if got, err := Poll(q.A.CQ, 3, 5*time.Second); err != nil || len(got) != 3 {
		t.Fatalf("sq_sig_all: %d completions, %v", len(got), err)
	}
}

func testFlush(t *testing.T, dev target) {
	p := NewPair(t, PairConfig{Device: dev.name, Open: dev.open})
	recvs := []verbsio.RecvWR{{ID: 1, SGL: []verbsio.SGE{sge(p.B, 0, 8)}}, {ID: 2, SGL: []verbsio.SGE{sge(p.B, 8, 8)}}}
	if _, err := p.B.QP.PostRecv(recvs); err != nil {
		t.Fatal(err)
	}
	if err := p.B.QP.Modify(&verbsio.QPAttr{State: verbsio.QPStateErr}, stateMask); err != nil {
		t.Fatal(err)
	}
	got, err := Poll(p.B.CQ, 2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i, wc := range got {
		if wc.Status != verbsio.StatusWRFlushErr || wc.ID != uint64(i+1) {
			t.Errorf("flushed receive %d: %+v", i, wc)
		}
	}
	// Posting to a QP in ERR completes at once with WR_FLUSH_ERR.
	if n, err := p.B.QP.PostRecv(recvs[:1]); n != 1 || err != nil {
		t.Fatalf("post_recv in ERR: %d %v", n, err)
	}
	if wc := PollOne(t, p.B.CQ); wc.Status != verbsio.StatusWRFlushErr {
		t.Errorf("receive posted in ERR: %s", wc.Status)
	}
	if n, err := p.B.QP.PostSend([]verbsio.SendWR{{ID: 9, Opcode: verbsio.OpSend}}); n != 1 || err != nil {
		t.Fatalf("post_send in ERR: %d %v", n, err)
	}
	if wc := PollOne(t, p.B.CQ); wc.Status != verbsio.StatusWRFlushErr || wc.ID != 9 {
		t.Errorf("send posted in ERR: %+v", wc)
	}
}

func testSRQ(t *testing.T, dev target) {
	p := NewPair(t, PairConfig{Device: dev.name, Open: dev.open, UseSRQ: true})
	if _, err := p.B.QP.PostRecv([]verbsio.RecvWR{{SGL: []verbsio.SGE{sge(p.B, 0, 8)}}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("post_recv on a QP with an SRQ: %v, want EINVAL", err)
	}
	var wrs []verbsio.RecvWR
	for i := 0; i < 4; i++ {
		wrs = append(wrs, verbsio.RecvWR{ID: uint64(10 + i), SGL: []verbsio.SGE{sge(p.B, i*100, 100)}})
	}
	if n, err := p.B.SRQ.PostRecv(wrs); n != 4 || err != nil {
		t.Fatal(n, err)
	}
	fill(p.A.Buf, 3)
	for i := 0; i < 4; i++ {
		if _, err := p.A.QP.PostSend([]verbsio.SendWR{{ID: uint64(i), Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, i, 50)}}}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Poll(p.B.CQ, 4, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i, wc := range got {
		if wc.ID != uint64(10+i) || wc.ByteLen != 50 || wc.Status != verbsio.StatusSuccess {
			t.Errorf("SRQ receive %d: %+v", i, wc)
		}
		expectBytes(t, p.B.Buf[i*100:i*100+50], p.A.Buf[i:i+50])
	}
}

func testCQOverrun(t *testing.T, dev target) {
	p := NewPair(t, PairConfig{Device: dev.name, Open: dev.open, CQE: 4})
	// A provider with asynchronous events reports the overrun as CQ_ERR.
	evs := make(chan verbsio.AsyncEvent, 16)
	cancel, subErr := p.A.Ctx.SubscribeAsyncEvents(func(e verbsio.AsyncEvent) {
		select {
		case evs <- e:
		default:
		}
	})
	if subErr == nil {
		defer cancel()
	}
	w := verbsio.SendWR{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, 8)},
		Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}
	depth := p.A.CQ.Depth()
	for i := 0; i < depth+2; i++ {
		w.ID = uint64(i)
		if _, err := p.A.QP.PostSend([]verbsio.SendWR{w}); err != nil {
			t.Fatal(err)
		}
	}
	// Let every completion arrive (at once on shm; after the target's
	// acknowledgements on a network fabric, the engine running in the
	// background) before polling.
	if err := p.A.CQ.Wait(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	wcs := make([]verbsio.WC, 64)
	n, err := p.A.CQ.Poll(wcs)
	if !errors.Is(err, unix.EOVERFLOW) {
		t.Errorf("poll after overrun: %d completions, err %v; want EOVERFLOW", n, err)
	}
	if n != depth {
		t.Errorf("kept %d completions, want the %d the CQ holds", n, depth)
	}
	if subErr != nil {
		return
	}
	select {
	case e := <-evs:
		if e.Type != verbsio.EventCQErr || e.CQ != p.A.CQ.Impl() {
			t.Errorf("asynchronous event %s (CQ %v), want CQ_ERR of the overrun CQ", e, e.CQ)
		}
	case <-time.After(5 * time.Second):
		t.Error("no CQ_ERR event for the overrun")
	}
	if n, err := p.A.CQ.Poll(wcs); !errors.Is(err, unix.EOVERFLOW) || n != 0 {
		t.Errorf("second poll: %d, %v; want EOVERFLOW again", n, err)
	}
	select {
	case e := <-evs:
		t.Errorf("a second event %s: CQ_ERR is raised once per CQ", e)
	case <-time.After(50 * time.Millisecond):
	}
}

func testResources(t *testing.T, dev target) {
	s := NewSide(t, PairConfig{Device: dev.name, Open: dev.open})
	if err := s.Ctx.Free(s.Buf); !errors.Is(err, unix.EBUSY) {
		t.Errorf("free registered memory: %v, want EBUSY", err)
	}
	if err := s.CQ.Destroy(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("destroy CQ in use: %v, want EBUSY", err)
	}
	if err := s.PD.Dealloc(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("dealloc PD in use: %v, want EBUSY", err)
	}
	if _, err := s.PD.RegMR(make([]byte, 64), verbsio.AccessRemoteWrite); !errors.Is(err, unix.EINVAL) {
		t.Errorf("REMOTE_WRITE without LOCAL_WRITE: %v, want EINVAL", err)
	}
	if err := s.MR.Dereg(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ctx.Free(s.Buf); err != nil {
		t.Errorf("free after dereg: %v", err)
	}
	if err := s.QP.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := s.CQ.Destroy(); err != nil {
		t.Errorf("destroy CQ: %v", err)
	}
	if err := s.PD.Dealloc(); err != nil {
		t.Errorf("dealloc PD: %v", err)
	}
	// A deregistered region's rkey is refused.
	p := NewPair(t, PairConfig{Device: dev.name, Open: dev.open})
	key := p.B.MR.RKey()
	if err := p.B.MR.Dereg(); err != nil {
		t.Fatal(err)
	}
	before := sum(p.B.Buf)
	p.A.QP.PostSend([]verbsio.SendWR{{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, 8)},
		Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: key}}})
	if wc := PollOne(t, p.A.CQ); wc.Status != verbsio.StatusRemAccessErr {
		t.Errorf("write with a deregistered rkey: %s, want REM_ACCESS_ERR", wc.Status)
	}
	if sum(p.B.Buf) != before {
		t.Errorf("deregistered memory changed")
	}
}

func testRNR(t *testing.T, dev target) {
	// The receive arrives while the sender is retrying: the send succeeds.
	p := NewPair(t, PairConfig{Device: dev.name, Open: dev.open, Connect: verbsio.ConnectOptions{MinRNRTimer: 1}})
	if _, err := p.A.QP.PostSend([]verbsio.SendWR{{ID: 1, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, 8)}}}); err != nil {
		t.Fatal(err)
	}
	var wcs [1]verbsio.WC
	if n, _ := p.A.CQ.Poll(wcs[:]); n != 0 {
		t.Fatalf("send completed without a receive: %+v", wcs[0])
	}
	postRecv(0, 8)(t, p)
	if wc := PollOne(t, p.A.CQ); wc.Status != verbsio.StatusSuccess {
		t.Errorf("send after RNR: %s", wc.Status)
	}
	if wc := PollOne(t, p.B.CQ); wc.Status != verbsio.StatusSuccess || wc.ByteLen != 8 {
		t.Errorf("receive after RNR: %+v", wc)
	}
}

func testPeerGone(t *testing.T, dev target) {
	// The target context closes: outstanding and later requests fail with
	// RETRY_EXC_ERR then WR_FLUSH_ERR, within the QP's timeout.
	p := NewPair(t, PairConfig{Device: dev.name, Open: dev.open, Connect: verbsio.ConnectOptions{Timeout: 8, RetryCnt: 2}})
	if _, err := p.A.QP.PostSend([]verbsio.SendWR{{ID: 1, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{sge(p.A, 0, 8)}}}); err != nil {
		t.Fatal(err)
	}
	p.B.Ctx.Close()
	start := time.Now()
	p.A.QP.PostSend([]verbsio.SendWR{{ID: 2, Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{sge(p.A, 0, 8)}, Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}})
	got, err := Poll(p.A.CQ, 2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Status != verbsio.StatusRetryExcErr || got[0].ID != 1 || got[1].Status != verbsio.StatusWRFlushErr || got[1].ID != 2 {
		t.Errorf("after the peer closed: %+v", got)
	}
	// timeout 8 = 1 ms, 3 tries: 3 ms; allow scheduling slack.
	if el := time.Since(start); el > time.Second {
		t.Errorf("failure took %v", el)
	}
}
