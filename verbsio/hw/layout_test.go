package hw

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// fakeCtx, fakePD and fakeAH let the tests build *verbsio.AH values whose
// Impl is an ahHandle, without a device.
type fakeCtx struct{ verbsio.ContextImpl }

func (fakeCtx) AllocPD() (verbsio.PDImpl, error) { return fakePD{}, nil }

type fakePD struct{ verbsio.PDImpl }

func (fakePD) CreateAH(a verbsio.AHAttr) (verbsio.AHImpl, error) {
	return &fakeAH{h: uintptr(a.DLID)}, nil
}

type fakeAH struct{ h uintptr }

func (a *fakeAH) handle() uintptr { return a.h }
func (a *fakeAH) Destroy() error  { return nil }

// foreignAH is another provider's address handle.
type foreignAH struct{}

func (foreignAH) Destroy() error { return nil }

type foreignPD struct{ verbsio.PDImpl }

func (foreignPD) CreateAH(verbsio.AHAttr) (verbsio.AHImpl, error) { return foreignAH{}, nil }

type foreignCtx struct{ verbsio.ContextImpl }

func (foreignCtx) AllocPD() (verbsio.PDImpl, error) { return foreignPD{}, nil }

// newAH returns an AH whose handle() is h.
func newAH(t testing.TB, impl verbsio.ContextImpl, h uint16) *verbsio.AH {
	t.Helper()
	pd, err := verbsio.NewContext(verbsio.DeviceInfo{Name: "fake"}, impl).AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	ah, err := pd.CreateAH(verbsio.AHAttr{DLID: h, PortNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	return ah
}

// ringMem returns n zeroed values of T outside the Go heap, as the ibverbs
// build's C scratch is: the packed chain holds raw addresses, which must
// not move (a Go stack may).
func ringMem[T any](t testing.TB, n int) []T {
	t.Helper()
	if n == 0 {
		return nil
	}
	m, err := mmapAnon(n * int(unsafe.Sizeof(*new(T))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	return unsafe.Slice((*T)(unsafe.Pointer(&m[0])), n)
}

func newSendRing(t testing.TB, n, maxSGE int, ud bool) *sendRing {
	return &sendRing{wrs: ringMem[cSendWR](t, n), sges: ringMem[verbsio.SGE](t, n*maxSGE), maxSGE: maxSGE, ud: ud}
}

func newRecvRing(t testing.TB, n, maxSGE int) *recvRing {
	return &recvRing{wrs: ringMem[cRecvWR](t, n), sges: ringMem[verbsio.SGE](t, n*maxSGE), maxSGE: maxSGE}
}

func addr[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }

// rawPtr reads a raw address field of a mirror as a pointer; the memory it
// names is outside the Go heap (ringMem).
func rawPtr(u *uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(u)) }

// sendView is what a provider reads from one cSendWR, through the union
// member the opcode selects.
type sendView struct {
	ID         uint64
	Opcode     uint32
	Flags      uint32
	Imm        uint32
	SGL        []verbsio.SGE
	RemoteAddr uint64
	RKey       uint32
	CompareAdd uint64
	Swap       uint64
	AH         uintptr
	RemoteQPN  uint32
	RemoteQKey uint32
}

func viewSend(w *cSendWR, ud bool) sendView {
	v := sendView{ID: w.wrID, Opcode: w.opcode, Flags: w.flags, Imm: w.imm}
	if w.numSGE > 0 {
		v.SGL = unsafe.Slice((*verbsio.SGE)(rawPtr(&w.sgList)), w.numSGE)
	}
	switch op := verbsio.Opcode(w.opcode); {
	case ud:
		u := (*cUDWR)(unsafe.Pointer(&w.wr))
		v.AH, v.RemoteQPN, v.RemoteQKey = u.ah, u.remoteQPN, u.remoteQKey
	case op.IsAtomic():
		v.RemoteAddr, v.RKey, v.CompareAdd, v.Swap = w.wr.remoteAddr, w.wr.rkey, w.wr.compareAdd, w.wr.swap
	case op == verbsio.OpRDMAWrite || op == verbsio.OpRDMAWriteImm || op == verbsio.OpRDMARead:
		r := (*cRDMAWR)(unsafe.Pointer(&w.wr))
		v.RemoteAddr, v.RKey = r.remoteAddr, r.rkey
	}
	return v
}

func TestMirrorSizes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the mirrors describe LP64 layouts")
	}
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"ibv_send_wr", unsafe.Sizeof(cSendWR{}), 128},
		{"ibv_send_wr.wr", unsafe.Offsetof(cSendWR{}.wr), 40},
		{"ibv_send_wr.qp_type", unsafe.Offsetof(cSendWR{}.qpType), 72},
		{"ibv_send_wr.wr (rdma)", unsafe.Sizeof(cRDMAWR{}), 32},
		{"ibv_send_wr.wr (ud)", unsafe.Sizeof(cUDWR{}), 32},
		{"ibv_recv_wr", unsafe.Sizeof(cRecvWR{}), 32},
		{"ibv_sge", unsafe.Sizeof(verbsio.SGE{}), 16},
		{"ibv_wc", unsafe.Sizeof(cWC{}), 48},
		{"ibv_wc.pkey_index", unsafe.Offsetof(cWC{}.pkeyIndex), 40},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestSendPackRC(t *testing.T) {
	r := newSendRing(t, 8, 3, false)
	wrs := []verbsio.SendWR{
		{ID: 1, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled | verbsio.SendInline,
			SGL: []verbsio.SGE{{Addr: 0x1000, Length: 64, LKey: 7}, {Addr: 0x2000, Length: 32, LKey: 8}}},
		{ID: 2, Opcode: verbsio.OpRDMAWriteImm, Imm: 0xdeadbeef, SGL: []verbsio.SGE{{Addr: 0x3000, Length: 4096, LKey: 9}},
			Remote: verbsio.RemoteAddr{Addr: 0xfeed0000, RKey: 0x55}},
		{ID: 3, Opcode: verbsio.OpRDMARead, SGL: []verbsio.SGE{{Addr: 0x4000, Length: 8, LKey: 9}},
			Remote: verbsio.RemoteAddr{Addr: 0xfeed0100, RKey: 0x56}},
		{ID: 4, Opcode: verbsio.OpAtomicCmpSwp, Flags: verbsio.SendFence, SGL: []verbsio.SGE{{Addr: 0x5000, Length: 8, LKey: 9}},
			Remote: verbsio.RemoteAddr{Addr: 0xfeed0200, RKey: 0x57}, Atomic: verbsio.AtomicArgs{CompareAdd: 10, Swap: 20}},
		{ID: 5, Opcode: verbsio.OpAtomicFetchAdd, SGL: []verbsio.SGE{{Addr: 0x6000, Length: 8, LKey: 9}},
			Remote: verbsio.RemoteAddr{Addr: 0xfeed0300, RKey: 0x58}, Atomic: verbsio.AtomicArgs{CompareAdd: 3}},
		{ID: 6, Opcode: verbsio.OpSendImm, Imm: 1}, // no SGE: a zero-byte send
	}
	n, err := r.pack(wrs)
	if n != len(wrs) || err != nil {
		t.Fatalf("pack = %d, %v; want %d, nil", n, err, len(wrs))
	}
	var got []sendView
	for i := range n {
		got = append(got, viewSend(&r.wrs[i], false))
	}
	want := []sendView{
		{ID: 1, Opcode: 2, Flags: 10, SGL: wrs[0].SGL},
		{ID: 2, Opcode: 1, Imm: 0xdeadbeef, SGL: wrs[1].SGL, RemoteAddr: 0xfeed0000, RKey: 0x55},
		{ID: 3, Opcode: 4, SGL: wrs[2].SGL, RemoteAddr: 0xfeed0100, RKey: 0x56},
		{ID: 4, Opcode: 5, Flags: 1, SGL: wrs[3].SGL, RemoteAddr: 0xfeed0200, RKey: 0x57, CompareAdd: 10, Swap: 20},
		{ID: 5, Opcode: 6, SGL: wrs[4].SGL, RemoteAddr: 0xfeed0300, RKey: 0x58, CompareAdd: 3},
		{ID: 6, Opcode: 3, Imm: 1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("packed requests (-want +got):\n%s", d)
	}
	// The chain: each request points at the next slot, the last at nothing;
	// the SGEs are packed one after the other.
	for i := range n {
		wantNext := uintptr(0)
		if i < n-1 {
			wantNext = addr(&r.wrs[i+1])
		}
		if r.wrs[i].next != wantNext {
			t.Errorf("wrs[%d].next = %#x, want %#x", i, r.wrs[i].next, wantNext)
		}
	}
	for i, k := range []int{0, 2, 3, 4, 5} {
		if r.wrs[i].sgList != addr(&r.sges[k]) {
			t.Errorf("wrs[%d].sg_list is not &sges[%d]", i, k)
		}
	}
	if r.wrs[5].sgList != 0 || r.wrs[5].numSGE != 0 {
		t.Errorf("zero-SGE request: sg_list %#x num_sge %d", r.wrs[5].sgList, r.wrs[5].numSGE)
	}
}

func TestSendPackUD(t *testing.T) {
	r := newSendRing(t, 4, 1, true)
	ah := newAH(t, fakeCtx{}, 0xab)
	wrs := []verbsio.SendWR{
		{ID: 1, Opcode: verbsio.OpSend, SGL: []verbsio.SGE{{Addr: 0x1000, Length: 1024, LKey: 1}},
			UD: verbsio.UDAddr{AH: ah, RemoteQPN: 0x123456, RemoteQKey: 0x11111111}},
		{ID: 2, Opcode: verbsio.OpSendImm, Imm: 9, SGL: []verbsio.SGE{{Addr: 0x2000, Length: 8, LKey: 1}},
			UD: verbsio.UDAddr{AH: ah, RemoteQPN: 7, RemoteQKey: 8}},
	}
	n, err := r.pack(wrs)
	if n != 2 || err != nil {
		t.Fatalf("pack = %d, %v", n, err)
	}
	got := []sendView{viewSend(&r.wrs[0], true), viewSend(&r.wrs[1], true)}
	want := []sendView{
		{ID: 1, Opcode: 2, SGL: wrs[0].SGL, AH: 0xab, RemoteQPN: 0x123456, RemoteQKey: 0x11111111},
		{ID: 2, Opcode: 3, Imm: 9, SGL: wrs[1].SGL, AH: 0xab, RemoteQPN: 7, RemoteQKey: 8},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("packed requests (-want +got):\n%s", d)
	}
}

func TestSendPackStops(t *testing.T) {
	ah := newAH(t, fakeCtx{}, 1)
	other := newAH(t, foreignCtx{}, 1)
	sge := verbsio.SGE{Addr: 0x1000, Length: 1, LKey: 1}
	ok := verbsio.SendWR{Opcode: verbsio.OpSend, SGL: []verbsio.SGE{sge}, UD: verbsio.UDAddr{AH: ah}}
	for _, c := range []struct {
		name  string
		ring  *sendRing
		bad   verbsio.SendWR
		total int
		wantN int
		want  error
	}{
		{"too many SGEs", newSendRing(t, 4, 1, false), verbsio.SendWR{Opcode: verbsio.OpSend, SGL: []verbsio.SGE{sge, sge}}, 3, 2, errSendTooManySGE},
		{"bad opcode", newSendRing(t, 4, 1, false), verbsio.SendWR{Opcode: 42}, 3, 2, errBadOpcode},
		{"UD without AH", newSendRing(t, 4, 1, true), verbsio.SendWR{Opcode: verbsio.OpSend}, 3, 2, errNoAH},
		{"UD with a foreign AH", newSendRing(t, 4, 1, true), verbsio.SendWR{Opcode: verbsio.OpSend, UD: verbsio.UDAddr{AH: other}}, 3, 2, errForeignAH},
		{"ring full", newSendRing(t, 2, 1, false), ok, 5, 2, nil},
		{"first request bad", newSendRing(t, 4, 1, false), verbsio.SendWR{Opcode: 42}, 1, 0, errBadOpcode},
	} {
		t.Run(c.name, func(t *testing.T) {
			wrs := make([]verbsio.SendWR, c.total)
			for i := range wrs {
				wrs[i] = ok
				wrs[i].ID = uint64(i)
			}
			if c.want != nil {
				wrs[c.wantN] = c.bad
			}
			n, err := c.ring.pack(wrs)
			if n != c.wantN || err != c.want {
				t.Fatalf("pack = %d, %v; want %d, %v", n, err, c.wantN, c.want)
			}
			if n > 0 && c.ring.wrs[n-1].next != 0 {
				t.Errorf("the chain does not end at the last packed request")
			}
		})
	}
}

func TestSendPackClearsSlot(t *testing.T) {
	// A slot that held an atomic request must not leak its compare/swap
	// operands into the next request packed there.
	r := newSendRing(t, 1, 1, false)
	atomic := verbsio.SendWR{Opcode: verbsio.OpAtomicCmpSwp, Remote: verbsio.RemoteAddr{Addr: 1, RKey: 2}, Atomic: verbsio.AtomicArgs{CompareAdd: 3, Swap: 4}}
	if _, err := r.pack([]verbsio.SendWR{atomic}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.pack([]verbsio.SendWR{{Opcode: verbsio.OpSend}}); err != nil {
		t.Fatal(err)
	}
	if r.wrs[0].wr != (cAtomicWR{}) || r.wrs[0].imm != 0 {
		t.Errorf("stale union after repacking: %+v", r.wrs[0].wr)
	}
}

func TestRecvPack(t *testing.T) {
	r := newRecvRing(t, 3, 2)
	wrs := []verbsio.RecvWR{
		{ID: 10, SGL: []verbsio.SGE{{Addr: 0x1000, Length: 4096, LKey: 3}, {Addr: 0x9000, Length: 40, LKey: 4}}},
		{ID: 11},
		{ID: 12, SGL: []verbsio.SGE{{Addr: 0x2000, Length: 4096, LKey: 3}}},
		{ID: 13},
	}
	n, err := r.pack(wrs)
	if n != 3 || err != nil {
		t.Fatalf("pack = %d, %v; want 3 (ring full), nil", n, err)
	}
	for i, want := range wrs[:3] {
		w := &r.wrs[i]
		var got []verbsio.SGE
		if w.numSGE > 0 {
			got = unsafe.Slice((*verbsio.SGE)(rawPtr(&w.sgList)), w.numSGE)
		}
		if w.wrID != want.ID || !cmp.Equal(got, want.SGL) {
			t.Errorf("wrs[%d] = id %d sgl %v; want %d %v", i, w.wrID, got, want.ID, want.SGL)
		}
	}
	if r.wrs[0].next != addr(&r.wrs[1]) || r.wrs[1].next != addr(&r.wrs[2]) || r.wrs[2].next != 0 {
		t.Errorf("bad chain")
	}
	wrs[1].SGL = make([]verbsio.SGE, 3)
	if n, err := r.pack(wrs); n != 1 || err != errRecvTooManySGE {
		t.Errorf("pack with 3 SGEs at [1] = %d, %v; want 1, %v", n, err, errRecvTooManySGE)
	}
}

func TestConvertWCs(t *testing.T) {
	src := []cWC{
		{wrID: 1, status: 0, opcode: 0, byteLen: 64, qpNum: 0x11, wcFlags: 0},
		{wrID: 2, status: 0, opcode: cWCRecv, byteLen: 1024, imm: 0x01020304, qpNum: 0x11, srcQP: 0x22,
			wcFlags: 1<<0 | 1<<1 | 1<<2, pkeyIndex: 3, slid: 0x44, sl: 5, dlidPathBits: 6},
		{wrID: 3, status: 0, opcode: cWCRecvRDMAWithImm, imm: 9, wcFlags: 1 << 1},
		{wrID: 4, status: 10, opcode: 1, vendorErr: 0x88},
		{wrID: 5, status: 5, opcode: 5}, // IBV_WC_BIND_MW
		{wrID: 6, opcode: 4},
	}
	dst := make([]verbsio.WC, len(src)+1)
	convertWCs(dst, src)
	want := []verbsio.WC{
		{ID: 1, Status: verbsio.StatusSuccess, Opcode: verbsio.WCSend, ByteLen: 64, QPN: 0x11},
		{ID: 2, Opcode: verbsio.WCRecv, ByteLen: 1024, Imm: 0x01020304, QPN: 0x11, SrcQP: 0x22,
			Flags: verbsio.WCWithGRH | verbsio.WCWithImm, PkeyIndex: 3, SLID: 0x44, SL: 5},
		{ID: 3, Opcode: verbsio.WCRecvRDMAWithImm, Imm: 9, Flags: verbsio.WCWithImm},
		{ID: 4, Status: verbsio.StatusRemAccessErr, Opcode: verbsio.WCRDMAWrite, VendorErr: 0x88},
		{ID: 5, Status: verbsio.StatusWRFlushErr, Opcode: wcOpcodeOther},
		{ID: 6, Opcode: verbsio.WCFetchAdd},
		{},
	}
	if d := cmp.Diff(want, dst); d != "" {
		t.Errorf("converted (-want +got):\n%s", d)
	}
}

func TestFastPathDoesNotAllocate(t *testing.T) {
	ah := newAH(t, fakeCtx{}, 1)
	rc := newSendRing(t, 64, 2, false)
	ud := newSendRing(t, 64, 2, true)
	rq := newRecvRing(t, 64, 1)
	send := make([]verbsio.SendWR, 32)
	recv := make([]verbsio.RecvWR, 32)
	for i := range send {
		send[i] = verbsio.SendWR{ID: uint64(i), Opcode: verbsio.Opcode(i % 7), SGL: []verbsio.SGE{{Addr: 1, Length: 2, LKey: 3}},
			UD: verbsio.UDAddr{AH: ah, RemoteQPN: 1, RemoteQKey: 2}}
		recv[i] = verbsio.RecvWR{ID: uint64(i), SGL: []verbsio.SGE{{Addr: 1, Length: 2, LKey: 3}}}
	}
	udSend := make([]verbsio.SendWR, len(send))
	for i := range udSend {
		udSend[i] = send[i]
		udSend[i].Opcode = verbsio.OpSend
	}
	src := make([]cWC, 32)
	dst := make([]verbsio.WC, 32)
	for name, f := range map[string]func(){
		"send RC":   func() { rc.pack(send) },
		"send UD":   func() { ud.pack(udSend) },
		"recv":      func() { rq.pack(recv) },
		"poll":      func() { convertWCs(dst, src) },
		"errno":     func() { _ = postSendErrs.errno(int(unix.ENOMEM)) },
		"pack fail": func() { rc.pack([]verbsio.SendWR{{Opcode: 99}}) },
	} {
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("%s: %v allocations per batch, want 0", name, a)
		}
	}
}

func TestOpErrors(t *testing.T) {
	a, b := postSendErrs.errno(int(unix.ENOMEM)), postSendErrs.errno(-int(unix.ENOMEM))
	if a != b {
		t.Errorf("ENOMEM and -ENOMEM give different errors")
	}
	if !errors.Is(a, unix.ENOMEM) {
		t.Errorf("errors.Is(%v, ENOMEM) = false", a)
	}
	var ve *verbsio.Error
	if !errors.As(a, &ve) || ve.Op != "post_send" {
		t.Errorf("%v is not a post_send *verbsio.Error", a)
	}
	odd := postRecvErrs.errno(int(unix.ENOTCONN))
	if !errors.Is(odd, unix.ENOTCONN) || odd.Error() != "post_recv: the provider returned ENOTCONN (ENOTCONN)" {
		t.Errorf("unlisted errno: %v", odd)
	}
}

func TestQPTypesFromMask(t *testing.T) {
	got := qpTypesFromMask(1<<2 | 1<<4 | 1<<8 | 1<<9)
	want := []verbsio.QPType{verbsio.QPTypeRC, verbsio.QPTypeUD, verbsio.QPTypeRawPacket}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if qpTypesFromMask(0) != nil {
		t.Errorf("empty mask gives QP types")
	}
}

func TestMmapAnon(t *testing.T) {
	m, err := mmapAnon(100)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	if len(m) != unix.Getpagesize() || addr(&m[0])%uintptr(unix.Getpagesize()) != 0 {
		t.Errorf("mapping of %d bytes at %#x: want one aligned page", len(m), addr(&m[0]))
	}
	m[99] = 1
}
