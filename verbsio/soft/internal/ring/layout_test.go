package ring

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/rperf/rperf/verbsio/dv"
)

// TestDVLayout checks the completion ring layout that verbsio/dv documents
// against the engine's own: every field of dv.CQE at the offset and size
// of the field of CQE it names, the header words at dv's offsets, and the
// slot's state word and entry where dv says.
func TestDVLayout(t *testing.T) {
	if unsafe.Sizeof(dv.CQE{}) != unsafe.Sizeof(CQE{}) {
		t.Fatalf("dv.CQE is %d bytes, the engine's CQE %d", unsafe.Sizeof(dv.CQE{}), unsafe.Sizeof(CQE{}))
	}
	names := map[string]string{"WQEIndex": "SQIdx"} // dv's name: the engine's
	dt, et := reflect.TypeOf(dv.CQE{}), reflect.TypeOf(CQE{})
	if dt.NumField() != et.NumField() {
		t.Fatalf("dv.CQE has %d fields, the engine's CQE %d", dt.NumField(), et.NumField())
	}
	for i := 0; i < dt.NumField(); i++ {
		f := dt.Field(i)
		if f.Name == "_" {
			continue
		}
		n := f.Name
		if m, ok := names[n]; ok {
			n = m
		}
		g, ok := et.FieldByName(n)
		if !ok {
			t.Errorf("dv.CQE.%s: the engine's CQE has no field %s", f.Name, n)
			continue
		}
		if f.Offset != g.Offset || f.Type.Size() != g.Type.Size() {
			t.Errorf("dv.CQE.%s at %d (%d bytes), engine's %s at %d (%d bytes)", f.Name, f.Offset, f.Type.Size(), n, g.Offset, g.Type.Size())
		}
	}

	var h CQHeader
	base := uintptr(unsafe.Pointer(&h))
	for _, c := range []struct {
		name string
		off  uintptr
		want int
	}{
		{"Tail", uintptr(unsafe.Pointer(&h.Tail)) - base, dv.CQTailOff},
		{"Head", uintptr(unsafe.Pointer(&h.Head)) - base, dv.CQHeadOff},
		{"Overrun", uintptr(unsafe.Pointer(&h.Overrun)) - base, dv.CQOverrunOff},
		{"Lost", uintptr(unsafe.Pointer(&h.Lost)) - base, dv.CQLostOff},
		{"Depth", uintptr(unsafe.Pointer(&h.Depth)) - base, dv.CQDepthOff},
		{"Flags", uintptr(unsafe.Pointer(&h.Flags)) - base, dv.CQFlagsOff},
		{"DBRec", uintptr(unsafe.Pointer(&h.DBRec)) - base, dv.CQDBRecOff},
	} {
		if c.off != uintptr(c.want) {
			t.Errorf("CQHeader.%s at %d, dv says %d", c.name, c.off, c.want)
		}
	}
	if unsafe.Sizeof(h) != CQHeaderSize || CQHeaderSize != dv.CQHeaderSize {
		t.Errorf("header: %d bytes, CQHeaderSize %d, dv.CQHeaderSize %d", unsafe.Sizeof(h), CQHeaderSize, dv.CQHeaderSize)
	}
	var s cqSlot
	if unsafe.Sizeof(s) != dv.CQSlotSize || CQESize != dv.CQSlotSize ||
		unsafe.Offsetof(s.state) != 0 || unsafe.Offsetof(s.e) != dv.CQEOffset {
		t.Errorf("slot: %d bytes, state at %d, entry at %d", unsafe.Sizeof(s), unsafe.Offsetof(s.state), unsafe.Offsetof(s.e))
	}
	if dv.ReadyState(77) != ready(77) || dv.PhaseReady != phaseReady || dv.PhaseClaimed != phaseClaimed || dv.PhaseFree != phaseFree {
		t.Error("state word encodings differ")
	}
	if SendWQEHdr != dv.WQEHeaderSize || SGESize != dv.SGESize {
		t.Error("send WQE layout differs")
	}
}

// TestDVReadsPushedEntries pushes entries with the engine's producer and
// reads them through dv's documented layout, raw bytes and all, then frees
// them through the doorbell record as the engine does.
func TestDVReadsPushedEntries(t *testing.T) {
	const depth = 4
	mem := make([]byte, CQSize(depth)+64)
	off := int((64 - uintptr(unsafe.Pointer(&mem[0]))%64) % 64)
	mem = mem[off : off+CQSize(depth)]
	for i := range mem {
		mem[i] = 0xee // allocator memory is not zero: InitCQ formats the header
	}
	r, err := InitCQ(mem, depth)
	if err != nil {
		t.Fatal(err)
	}
	cons := NewConsumer(r)
	slot := func(pos uint32) []byte {
		o := dv.CQHeaderSize + int(pos%depth)*dv.CQSlotSize
		return mem[o : o+dv.CQSlotSize]
	}
	state := func(pos uint32) uint64 { return *(*uint64)(unsafe.Pointer(&slot(pos)[0])) }
	entry := func(pos uint32) *dv.CQE { return (*dv.CQE)(unsafe.Pointer(&slot(pos)[dv.CQEOffset])) }
	u32 := func(o int) uint32 { return *(*uint32)(unsafe.Pointer(&mem[o])) }

	if u32(dv.CQDBRecOff) != 0 || u32(dv.CQHeadOff) != 0 || u32(dv.CQOverrunOff) != 0 || u32(dv.CQDepthOff) != depth {
		t.Fatalf("fresh header: dbrec %d head %d overrun %d depth %d", u32(dv.CQDBRecOff), u32(dv.CQHeadOff), u32(dv.CQOverrunOff), u32(dv.CQDepthOff))
	}
	for round := uint32(0); round < 3; round++ {
		for i := uint32(0); i < depth; i++ {
			e := CQE{WRID: uint64(round*100 + i), ByteLen: 4096 + i, Imm: 0xabcd, QPN: 0x123, SrcQP: 0x456, SQIdx: i, VendorErr: 9, Status: 5, Opcode: 2, Flags: 1, FlowTag: 0xabcdef, Timestamp: 1<<62 + uint64(i)}
			if !r.Push(&e, 1) {
				t.Fatalf("round %d: push %d refused", round, i)
			}
		}
		e := CQE{}
		if r.Push(&e, 1) || u32(dv.CQOverrunOff) != round+1 {
			t.Fatalf("round %d: a push into a full ring was taken (overrun count %d)", round, u32(dv.CQOverrunOff))
		}
		ci := round * depth
		for i := uint32(0); i < depth; i++ {
			pos := ci + i
			if state(pos) != dv.ReadyState(pos) {
				t.Fatalf("slot %d: state %#x, want ready %#x", pos, state(pos), dv.ReadyState(pos))
			}
			got := *entry(pos)
			want := dv.CQE{WRID: uint64(round*100 + i), ByteLen: 4096 + i, Imm: 0xabcd, QPN: 0x123, SrcQP: 0x456, WQEIndex: i, VendorErr: 9, Status: 5, Opcode: 2, Flags: 1, FlowTag: 0xabcdef, Timestamp: 1<<62 + uint64(i)}
			if got != want {
				t.Fatalf("slot %d: read %+v, want %+v", pos, got, want)
			}
		}
		// The application has read them all: it stores its consumer index;
		// the engine frees up to it.
		r.Header().DBRec.Store(ci + depth)
		var e2 CQE
		for int32(r.Header().DBRec.Load()-cons.Pos()) > 0 {
			if st, _ := cons.Poll(&e2); st != Ready {
				t.Fatalf("engine found %v at %d", st, cons.Pos())
			}
		}
		if u32(dv.CQHeadOff) != ci+depth || state(ci) == dv.ReadyState(ci) {
			t.Fatalf("round %d: head %d after freeing", round, u32(dv.CQHeadOff))
		}
	}
}
