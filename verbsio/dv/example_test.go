package dv_test

import (
	"fmt"
	"log"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	_ "github.com/rperf/rperf/verbsio/soft"
)

// Example builds RDMA WRITE WQEs directly in a QP's send ring, writes the
// doorbell record and rings once for the batch, then reads the completion
// straight from the CQ's ring.
func Example() {
	// Two contexts of the built-in shared-memory device, each with a QP
	// and a registered buffer, connected to each other.
	type side struct {
		ctx *verbsio.Context
		pd  *verbsio.PD
		cq  *verbsio.CQ
		qp  *verbsio.QP
		mr  *verbsio.MR
		gid verbsio.GID
	}
	open := func() side {
		var s side
		var err error
		if s.ctx, err = verbsio.Open("shm0"); err != nil {
			log.Fatal(err)
		}
		s.pd, _ = s.ctx.AllocPD()
		s.cq, _ = s.ctx.CreateCQ(64)
		s.qp, _ = s.pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq,
			Cap: verbsio.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		buf, _ := s.ctx.Alloc(4096)
		s.mr, _ = s.pd.RegMR(buf, verbsio.AccessLocalWrite|verbsio.AccessRemoteWrite)
		g, _ := s.ctx.QueryGID(1, 0)
		s.gid = g.GID
		return s
	}
	a, b := open(), open()
	defer a.ctx.Close()
	defer b.ctx.Close()
	ep := func(s side) verbsio.Endpoint {
		return verbsio.Endpoint{QPN: s.qp.QPN(), GID: s.gid, RKey: s.mr.RKey(), VAddr: s.mr.Addr()}
	}
	opts := verbsio.ConnectOptions{Access: verbsio.AccessRemoteWrite}
	if err := a.qp.Connect(ep(a), ep(b), opts); err != nil {
		log.Fatal(err)
	}
	if err := b.qp.Connect(ep(b), ep(a), opts); err != nil {
		log.Fatal(err)
	}
	copy(a.mr.Buf(), "direct verbs: WQEs written in the ring")

	// Take the send ring and the CQ's ring.
	q, err := dv.InitQP(a.qp)
	if err != nil {
		log.Fatal(err)
	}
	c, err := dv.InitCQ(a.cq)
	if err != nil {
		log.Fatal(err)
	}

	// Write four WQEs in the ring, each moving 8 bytes, at free-running
	// producer indices (slot = index mod Depth).
	pi := q.Producer()
	for i := 0; i < 4; i++ {
		w := q.WQE(pi)
		*w = dv.SendWQE{WRID: uint64(i), Opcode: uint8(verbsio.OpRDMAWrite), NumSGE: 1,
			RAddr: b.mr.Addr() + uint64(8*i), RKey: b.mr.RKey()}
		if i == 3 {
			w.Flags = uint8(verbsio.SendSignaled) // one completion for the batch
		}
		q.SGEs(pi, 1)[0] = a.mr.SGE(8*i, 8)
		pi++
	}
	// One doorbell for the batch: the producer index into the doorbell
	// record, then ring.
	q.DBRec.Store(pi)
	if err := q.RingDB(); err != nil {
		log.Fatal(err)
	}

	// Read the completion from the CQ's ring: the entry at the consumer
	// index is ours when its slot's state word says ready; until then the
	// CQ doorbell (Update) lets the engine progress.
	ci := c.CI()
	for c.State(ci) != dv.ReadyState(ci) {
		if err := c.Update(); err != nil {
			log.Fatal(err)
		}
	}
	e := c.Entry(ci)
	fmt.Printf("completion %d: %s, WQE index %d\n", e.WRID, verbsio.Status(e.Status), e.WQEIndex)
	c.Consume() // ci+1 into the CQ's doorbell record: the engine may reuse the slot
	fmt.Printf("target: %q\n", b.mr.Buf()[:32])
	// Output:
	// completion 3: SUCCESS, WQE index 3
	// target: "direct verbs: WQEs written in th"
}

// ExampleSetAllocator takes a QP's send ring from the application's own
// memory. On the shm fabric only send queues come from the allocator (peer
// processes map receive queues and CQs); on udp, receive queues and CQs do
// too.
func ExampleSetAllocator() {
	ctx, err := verbsio.Open("shm0")
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	res, err := dv.SetAllocator(ctx, dv.Allocator{
		Alloc: func(r dv.Resource, size, align int) ([]byte, error) {
			b := make([]byte, size+align)
			off := (align - int(uintptr(unsafe.Pointer(&b[0]))%uintptr(align))) % align
			fmt.Printf("alloc %s: %d bytes aligned to %d\n", r, size, align)
			return b[off : off+size], nil
		},
		Free: func(r dv.Resource, buf []byte) { fmt.Printf("free %s: %d bytes\n", r, len(buf)) },
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("served:", res)
	pd, _ := ctx.AllocPD()
	cq, _ := ctx.CreateCQ(16)
	qp, err := pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: verbsio.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		log.Fatal(err)
	}
	q, _ := dv.InitQP(qp)
	fmt.Printf("%d slots of %d bytes, then the doorbell record\n", q.Depth, q.Stride)
	qp.Destroy()
	// Output:
	// served: send queue
	// alloc send queue: 2112 bytes aligned to 64
	// 16 slots of 128 bytes, then the doorbell record
	// free send queue: 2112 bytes
}
