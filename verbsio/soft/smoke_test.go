package soft_test

import (
	"testing"

	"github.com/rperf/rperf/verbsio"
	_ "github.com/rperf/rperf/verbsio/soft"
)

func TestSmokeWrite(t *testing.T) {
	a, err := verbsio.Open("shm0")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := verbsio.Open("shm0")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mk := func(c *verbsio.Context) (*verbsio.PD, *verbsio.CQ, *verbsio.QP, *verbsio.MR) {
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		cq, err := c.CreateCQ(64)
		if err != nil {
			t.Fatal(err)
		}
		qp, err := pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: verbsio.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 2, MaxRecvSGE: 2}})
		if err != nil {
			t.Fatal(err)
		}
		buf, err := c.Alloc(4096)
		if err != nil {
			t.Fatal(err)
		}
		mr, err := pd.RegMR(buf, verbsio.AccessLocalWrite|verbsio.AccessRemoteWrite|verbsio.AccessRemoteRead|verbsio.AccessRemoteAtomic)
		if err != nil {
			t.Fatal(err)
		}
		return pd, cq, qp, mr
	}
	_, cqa, qpa, mra := mk(a)
	_, cqb, qpb, mrb := mk(b)
	gidA, _ := a.QueryGID(1, 0)
	gidB, _ := b.QueryGID(1, 0)
	connect := func(q *verbsio.QP, dqpn uint32, dgid verbsio.GID) {
		if err := q.Modify(&verbsio.QPAttr{State: verbsio.QPStateInit, PortNum: 1, AccessFlags: verbsio.AccessRemoteWrite | verbsio.AccessRemoteRead | verbsio.AccessRemoteAtomic},
			verbsio.QPAttrState|verbsio.QPAttrPkeyIndex|verbsio.QPAttrPort|verbsio.QPAttrAccessFlags); err != nil {
			t.Fatal(err)
		}
		if err := q.Modify(&verbsio.QPAttr{State: verbsio.QPStateRTR, PathMTU: verbsio.MTU4096, DestQPN: dqpn, AH: verbsio.AHAttr{IsGlobal: true, DGID: dgid, PortNum: 1}, MinRNRTimer: 12, MaxDestRdAtomic: 16},
			verbsio.QPAttrState|verbsio.QPAttrAV|verbsio.QPAttrPathMTU|verbsio.QPAttrDestQPN|verbsio.QPAttrRQPSN|verbsio.QPAttrMaxDestRdAtomic|verbsio.QPAttrMinRNRTimer); err != nil {
			t.Fatal(err)
		}
		if err := q.Modify(&verbsio.QPAttr{State: verbsio.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
			verbsio.QPAttrState|verbsio.QPAttrTimeout|verbsio.QPAttrRetryCnt|verbsio.QPAttrRNRRetry|verbsio.QPAttrSQPSN|verbsio.QPAttrMaxQPRdAtomic); err != nil {
			t.Fatal(err)
		}
	}
	connect(qpa, qpb.QPN(), gidB.GID)
	connect(qpb, qpa.QPN(), gidA.GID)
	copy(mra.Buf(), "hello, world")
	n, err := qpa.PostSend([]verbsio.SendWR{{ID: 7, Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{mra.SGE(0, 12)}, Remote: verbsio.RemoteAddr{Addr: mrb.Addr() + 100, RKey: mrb.RKey()}}})
	if err != nil || n != 1 {
		t.Fatal(n, err)
	}
	wcs := make([]verbsio.WC, 4)
	n, err = cqa.Poll(wcs)
	if err != nil || n != 1 || wcs[0].Status != verbsio.StatusSuccess || wcs[0].ID != 7 {
		t.Fatalf("%d %v %+v", n, err, wcs[0])
	}
	if got := string(mrb.Buf()[100:112]); got != "hello, world" {
		t.Fatalf("got %q", got)
	}
	// send
	if _, err := qpb.PostRecv([]verbsio.RecvWR{{ID: 9, SGL: []verbsio.SGE{mrb.SGE(1000, 100)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := qpa.PostSend([]verbsio.SendWR{{ID: 8, Opcode: verbsio.OpSendImm, Imm: 42, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{mra.SGE(0, 5)}}}); err != nil {
		t.Fatal(err)
	}
	n, err = cqb.Poll(wcs)
	if err != nil || n != 1 || wcs[0].ID != 9 || wcs[0].ByteLen != 5 || wcs[0].Imm != 42 {
		t.Fatalf("%d %v %+v", n, err, wcs[0])
	}
	if string(mrb.Buf()[1000:1005]) != "hello" {
		t.Fatal("send data")
	}
	// bad rkey
	qpa.PostSend([]verbsio.SendWR{{ID: 10, Opcode: verbsio.OpRDMAWrite, SGL: []verbsio.SGE{mra.SGE(0, 12)}, Remote: verbsio.RemoteAddr{Addr: mrb.Addr() + 4090, RKey: mrb.RKey()}}})
	n, _ = cqa.Poll(wcs)
	if n < 2 || wcs[1].Status != verbsio.StatusRemAccessErr {
		t.Fatalf("%d %+v", n, wcs[:n])
	}
	t.Logf("%+v", wcs[:n])
}
