package soft_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	"golang.org/x/sys/unix"
)

// manaQP creates a RAW_PACKET QP on a mana-profile end and moves it to
// RTS, returning the error of creating it.
func (e *rawEnd) manaQP() (*verbsio.QP, error) {
	qp, err := e.pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRawPacket, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: verbsio.QPCap{MaxSendWR: 64, MaxRecvWR: 64}})
	if err != nil {
		return nil, err
	}
	if err := qp.Connect(verbsio.Endpoint{}, verbsio.Endpoint{}, verbsio.ConnectOptions{}); err != nil {
		qp.Destroy()
		return nil, err
	}
	return qp, nil
}

// TestRawMana checks the mana profile against manadv(7): RAW_PACKET QPs
// only (RC: EOPNOTSUPP); a RAW_PACKET QP needs the application's queue
// allocators (EINVAL without), and then its queues live in them and
// dv.InitObj describes them; one raw QP per port: a second one, in this
// process or another, gets EBUSY naming the holder, and the first keeps
// sending and receiving; the port is free again when the holder is gone.
func TestRawMana(t *testing.T) {
	// The wire's ends take the default I/O: the mana end beside them takes
	// the mode under test (TestRawIOModes), and AF_XDP's queue is one
	// context's.
	w := newRawWire(t, netns.Options{}, verbsio.OpenOptions{RawIO: "default"}, 0)
	m := openRawEnd(t, w.pair.A, verbsio.OpenOptions{RawProfile: "mana"}, 0)
	a, err := m.ctx.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if a.VendorID != 0x1414 || a.Ext == nil || a.Ext.MaxRawEthyQP != 1 {
		t.Errorf("mana device: vendor %#x, max_raw_ethy_qp %v; want Microsoft's 0x1414 and one per port", a.VendorID, a.Ext)
	}
	for _, typ := range []verbsio.QPType{verbsio.QPTypeRC, verbsio.QPTypeUC, verbsio.QPTypeUD} {
		_, err := m.pd.CreateQP(verbsio.QPInitAttr{Type: typ, SendCQ: m.cq, RecvCQ: m.cq, Cap: verbsio.QPCap{MaxSendWR: 1, MaxRecvWR: 1}})
		if !errors.Is(err, unix.EOPNOTSUPP) || !strings.Contains(err.Error(), "RAW_PACKET QPs only") {
			t.Errorf("%s QP: %v, want EOPNOTSUPP (RAW_PACKET only)", typ, err)
		}
	}
	if _, err := m.manaQP(); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "extern alloc") {
		t.Fatalf("RAW_PACKET QP without allocators: %v, want EINVAL (RAW QP requires extern alloc for buffers)", err)
	}
	rec := newRecAlloc()
	got, err := dv.SetAllocator(m.ctx, rec.Allocator())
	if err != nil || got&(dv.ResSendQueue|dv.ResRecvQueue) != dv.ResSendQueue|dv.ResRecvQueue {
		t.Fatalf("SetAllocator: %v, %v", got, err)
	}
	qp, err := m.manaQP()
	if err != nil {
		t.Fatal(err)
	}
	var obj dv.Obj
	var oqp dv.QPObj
	var ocq dv.CQObj
	var orwq dv.RWQObj
	var opd dv.PDObj
	obj.QP.In, obj.QP.Out = qp, &oqp
	obj.CQ.In, obj.CQ.Out = m.cq, &ocq
	obj.RWQ.In, obj.RWQ.Out = qp, &orwq
	obj.PD.In, obj.PD.Out = m.pd, &opd
	if err := dv.InitObj(&obj, dv.ObjQP|dv.ObjCQ|dv.ObjRWQ|dv.ObjPD); err != nil {
		t.Fatal(err)
	}
	if oqp.SQID != qp.QPN() || oqp.SQCount != 64 || oqp.DBPage == nil || rec.holder(dv.ResSendQueue, unsafe.Pointer(&oqp.SQBuf[0]), len(oqp.SQBuf)) == nil {
		t.Errorf("QP object %+v: want the QPN, 64 slots, a doorbell, in the application's send queue buffer", oqp)
	}
	if orwq.WQID != qp.QPN() || orwq.Count != 64 || orwq.DBPage == nil || rec.holder(dv.ResRecvQueue, unsafe.Pointer(&orwq.Buf[0]), len(orwq.Buf)) == nil {
		t.Errorf("RWQ object %+v: want the QPN, 64 slots, a doorbell, in the application's receive queue buffer", orwq)
	}
	if ocq.Count == 0 || len(ocq.Buf) < dv.CQHeaderSize+int(ocq.Count)*dv.CQSlotSize {
		t.Errorf("CQ object: %d slots in %d bytes", ocq.Count, len(ocq.Buf))
	}
	if err := dv.InitObj(&obj, 1<<9); !errors.Is(err, unix.EINVAL) {
		t.Errorf("InitObj of an unknown type: %v, want EINVAL", err)
	}

	// One raw QP per port: a second here is EBUSY, naming this process.
	if _, err := m.manaQP(); !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Fatalf("second raw QP on the port: %v, want EBUSY naming pid %d", err, os.Getpid())
	}
	// ... and in another process of the namespace.
	c := startChildCmd(t, netns.Command(w.pair.A.NS, os.Args[0], "-test.run=^$"), "manaport")
	c.send(t, "%s", w.pair.A.Link)
	if ans := c.recv(t); !strings.HasPrefix(ans, "busy") || !strings.Contains(ans, strconv.Itoa(os.Getpid())) {
		t.Fatalf("the other process: %q, want busy naming pid %d", ans, os.Getpid())
	}
	// The first keeps working, both ways.
	fl := mustFlow(t, qp, m.udpTo(7000, 0))
	qb := w.b.rawQP(t, 16, 16)
	flb := mustFlow(t, qb, w.b.udpTo(7000, 0))
	m.postRecvs(t, qp, 1<<20, 4, 2048)
	w.b.postRecvs(t, qb, 0, 4, 2048)
	m.postFrame(t, qp, 1, 0, udpFrame(t, m, w.b, 1, 7000, 0, 100), sendOneSGE)
	w.b.postFrame(t, qb, 2, 1<<20, udpFrame(t, w.b, m, 2, 7000, 0, 100), sendOneSGE)
	if r, err := pollN(w.b.cq, 2, 5*time.Second); err != nil || r[0].Status != 0 || r[1].Status != 0 {
		t.Fatalf("B: %+v %v", r, err)
	}
	if r, err := pollN(m.cq, 2, 5*time.Second); err != nil || r[0].Status != 0 || r[1].Status != 0 {
		t.Fatalf("the mana QP: %+v %v", r, err)
	}
	fl.Destroy()
	flb.Destroy()
	// Released: the other process gets the port, and this one is busy.
	if err := qp.Destroy(); err != nil {
		t.Fatal(err)
	}
	c.send(t, "again")
	if ans := c.recv(t); ans != "ok" {
		t.Fatalf("after the holder's QP was destroyed, the other process: %q, want ok", ans)
	}
	if _, err := m.manaQP(); !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), strconv.Itoa(c.cmd.Process.Pid)) {
		t.Fatalf("while the other process holds the port: %v, want EBUSY naming pid %d", err, c.cmd.Process.Pid)
	}
	c.send(t, "exit")
	c.cmd.Wait()
	qp2, err := m.manaQP()
	if err != nil {
		t.Fatalf("after the other process exited: %v", err)
	}
	qp2.Destroy()
}

// manaPortChild is the other process of TestRawMana: it reads the link,
// tries to create a RAW_PACKET QP on a mana-profile device and answers
// "busy <error>" or "ok"; "again" tries again; "exit" exits (releasing
// the port).
func manaPortChild(line func() string) int {
	link := line()
	ctx, err := verbsio.OpenWith("raw_"+link, verbsio.OpenOptions{RawProfile: "mana"}) // the default I/O: this process may hold the port's AF_XDP queue
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer ctx.Close()
	rec := newRecAlloc()
	if _, err := dv.SetAllocator(ctx, rec.Allocator()); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	pd, _ := ctx.AllocPD()
	cq, _ := ctx.CreateCQ(16)
	var qp *verbsio.QP
	for {
		if qp == nil {
			qp, err = pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRawPacket, SendCQ: cq, RecvCQ: cq, Cap: verbsio.QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
			switch {
			case errors.Is(err, unix.EBUSY):
				fmt.Println("busy", err)
			case err != nil:
				fmt.Println("error", err)
			default:
				fmt.Println("ok")
			}
		}
		if line() == "exit" {
			return 0
		}
	}
}
