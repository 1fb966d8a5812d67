package dv_test

import (
	"fmt"
	"log"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	_ "github.com/rperf/rperf/verbsio/soft"
)

// Example builds RDMA WRITE WQEs directly in a QP's send ring and rings
// the doorbell once for the batch.
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

	// Take the send ring and write four WQEs, each moving 8 bytes.
	q, err := dv.InitQP(a.qp)
	if err != nil {
		log.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		w, pos := q.Next()
		*w = dv.SendWQE{WRID: uint64(i), Opcode: uint8(verbsio.OpRDMAWrite), NumSGE: 1,
			RAddr: b.mr.Addr() + uint64(8*i), RKey: b.mr.RKey()}
		if i == 3 {
			w.Flags = uint8(verbsio.SendSignaled) // one completion for the batch
		}
		q.SGEs(pos, 1)[0] = a.mr.SGE(8*i, 8)
	}
	if err := q.Ring(); err != nil { // one doorbell
		log.Fatal(err)
	}
	var wc verbsio.WC
	c, _ := dv.InitCQ(a.cq)
	for !c.Poll(&wc) {
	}
	fmt.Printf("completion %d: %s\n", wc.ID, wc.Status)
	fmt.Printf("target: %q\n", b.mr.Buf()[:32])
	// Output:
	// completion 3: SUCCESS
	// target: "direct verbs: WQEs written in th"
}
