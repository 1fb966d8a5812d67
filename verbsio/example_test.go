package verbsio_test

import (
	"fmt"
	"log"

	"github.com/rperf/rperf/verbsio"
	_ "github.com/rperf/rperf/verbsio/soft" // the built-in engine: devices shm0, udp_<netdev>
)

// Example opens the built-in shared-memory device twice (two contexts,
// as two processes would), registers memory, connects an RC QP pair,
// writes with RDMA WRITE and polls the completion.
func Example() {
	type side struct {
		ctx *verbsio.Context
		pd  *verbsio.PD
		cq  *verbsio.CQ
		qp  *verbsio.QP
		mr  *verbsio.MR
	}
	open := func() side {
		ctx, err := verbsio.Open("shm0")
		if err != nil {
			log.Fatal(err)
		}
		pd, _ := ctx.AllocPD()
		cq, _ := ctx.CreateCQ(16)
		qp, err := pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: verbsio.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			log.Fatal(err)
		}
		buf, _ := ctx.Alloc(4096) // shared memory: a peer process reaches it directly
		mr, err := pd.RegMR(buf, verbsio.AccessLocalWrite|verbsio.AccessRemoteWrite)
		if err != nil {
			log.Fatal(err)
		}
		return side{ctx, pd, cq, qp, mr}
	}
	a, b := open(), open()
	defer a.ctx.Close()
	defer b.ctx.Close()

	// What each side tells the other (perftest's key exchange carries it).
	endpoint := func(s side) verbsio.Endpoint {
		g, _ := s.ctx.QueryGID(1, 0)
		return verbsio.Endpoint{QPN: s.qp.QPN(), GID: g.GID, RKey: s.mr.RKey(), VAddr: s.mr.Addr()}
	}
	ea, eb := endpoint(a), endpoint(b)
	opts := verbsio.ConnectOptions{Access: verbsio.AccessRemoteWrite}
	if err := a.qp.Connect(ea, eb, opts); err != nil { // RESET -> INIT -> RTR -> RTS
		log.Fatal(err)
	}
	if err := b.qp.Connect(eb, ea, opts); err != nil {
		log.Fatal(err)
	}

	copy(a.mr.Buf(), "hello, RDMA")
	wr := []verbsio.SendWR{{ID: 1, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled,
		SGL:    []verbsio.SGE{a.mr.SGE(0, 11)},
		Remote: verbsio.RemoteAddr{Addr: eb.VAddr, RKey: eb.RKey}}}
	if _, err := a.qp.PostSend(wr); err != nil {
		log.Fatal(err)
	}
	wcs := make([]verbsio.WC, 1)
	for n := 0; n == 0; {
		var err error
		if n, err = a.cq.Poll(wcs); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(wcs[0].ID, wcs[0].Status, string(b.mr.Buf()[:11]))
	// Output: 1 SUCCESS hello, RDMA
}
