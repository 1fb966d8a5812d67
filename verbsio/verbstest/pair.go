// Package verbstest is a test kit for verbsio providers: connected pairs of
// queue pairs and a conformance suite that every provider runs (the QP
// state machine, every opcode with its data checked, every error path and
// its completion status).
package verbstest

import (
	"fmt"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
)

// Side is one end of a Pair: a context with a PD, a CQ, a QP and a
// registered buffer.
type Side struct {
	Ctx *verbsio.Context
	PD  *verbsio.PD
	CQ  *verbsio.CQ
	QP  *verbsio.QP
	MR  *verbsio.MR
	Buf []byte
	GID verbsio.GID
	LID uint16 // the port's LID (the udp fabric's UDP port when not 4791)
	SRQ *verbsio.SRQ
}

// Endpoint returns what this side tells its peer.
func (s *Side) Endpoint() verbsio.Endpoint {
	return verbsio.Endpoint{LID: s.LID, QPN: s.QP.QPN(), GID: s.GID, RKey: s.MR.RKey(), VAddr: s.MR.Addr(), PSN: 0x1234}
}

// PairConfig describes a Pair.
type PairConfig struct {
	Device  string
	Type    verbsio.QPType
	BufSize int
	Access  verbsio.Access // MR access; default all
	QPAcc   verbsio.Access // QP remote access; default all remote
	Cap     verbsio.QPCap
	CQE     int
	SQSig   bool
	UseSRQ  bool
	Connect verbsio.ConnectOptions
	// NoConnect leaves both QPs in RESET.
	NoConnect bool
	// Open are the options each side's device is opened with.
	Open verbsio.OpenOptions
	// NoProgress leaves the engine without background progress: the test
	// drives it by polling (benchmarks do, for the lowest latency).
	NoProgress bool
	// Segmenter says who cuts the QPs' messages into packets (0: the
	// provider's choice).
	Segmenter verbsio.Segmenter
	// WCFlags, when non-zero, creates each side's CQ with CreateCQEx and
	// these completion fields (verbsio.WCExTS for timestamps).
	WCFlags verbsio.CQWCFlags
}

// AllAccess is every access right.
const AllAccess = verbsio.AccessLocalWrite | verbsio.AccessRemoteWrite | verbsio.AccessRemoteRead | verbsio.AccessRemoteAtomic

func (c *PairConfig) defaults() {
	if c.Type == 0 {
		c.Type = verbsio.QPTypeRC
	}
	if c.BufSize == 0 {
		c.BufSize = 1 << 16
	}
	if c.Access == 0 {
		c.Access = AllAccess
	}
	if c.QPAcc == 0 {
		c.QPAcc = verbsio.AccessRemoteWrite | verbsio.AccessRemoteRead | verbsio.AccessRemoteAtomic
	}
	if c.Cap.MaxSendWR == 0 {
		c.Cap.MaxSendWR = 64
	}
	if c.Cap.MaxRecvWR == 0 && !c.UseSRQ {
		c.Cap.MaxRecvWR = 64
	}
	if c.Cap.MaxSendSGE == 0 {
		c.Cap.MaxSendSGE = 4
	}
	if c.Cap.MaxRecvSGE == 0 {
		c.Cap.MaxRecvSGE = 4
	}
	if c.CQE == 0 {
		c.CQE = 256
	}
}

// Pair is two QPs, A and B, in two contexts of the same device, connected
// to each other.
type Pair struct {
	A, B *Side
	Cfg  PairConfig
}

// NewSide opens the device and creates one side; the test cleans it up.
func NewSide(tb testing.TB, cfg PairConfig) *Side {
	tb.Helper()
	cfg.defaults()
	s, err := newSide(cfg)
	if err != nil {
		tb.Fatalf("verbstest: %v", err)
	}
	// A side that is not polling still answers, as a NIC would.
	stop := func() {}
	if !cfg.NoProgress {
		stop = s.Ctx.StartProgress()
	}
	tb.Cleanup(func() {
		stop()
		s.Ctx.Close()
	})
	return s
}

func newSide(cfg PairConfig) (*Side, error) {
	ctx, err := verbsio.OpenWith(cfg.Device, cfg.Open)
	if err != nil {
		return nil, err
	}
	s := &Side{Ctx: ctx}
	fail := func(err error) (*Side, error) { ctx.Close(); return nil, err }
	if s.PD, err = ctx.AllocPD(); err != nil {
		return fail(err)
	}
	if cfg.WCFlags != 0 {
		s.CQ, err = ctx.CreateCQEx(verbsio.CQInitAttr{CQE: cfg.CQE, WCFlags: cfg.WCFlags})
	} else {
		s.CQ, err = ctx.CreateCQ(cfg.CQE)
	}
	if err != nil {
		return fail(err)
	}
	if cfg.UseSRQ {
		if s.SRQ, err = s.PD.CreateSRQ(verbsio.SRQInitAttr{MaxWR: 64, MaxSGE: cfg.Cap.MaxRecvSGE}); err != nil {
			return fail(err)
		}
	}
	if s.QP, err = s.PD.CreateQP(verbsio.QPInitAttr{Type: cfg.Type, SendCQ: s.CQ, RecvCQ: s.CQ, SRQ: s.SRQ, Cap: cfg.Cap, SQSigAll: cfg.SQSig, Segmenter: cfg.Segmenter}); err != nil {
		return fail(err)
	}
	if s.Buf, err = ctx.Alloc(cfg.BufSize); err != nil {
		return fail(err)
	}
	if s.MR, err = s.PD.RegMR(s.Buf, cfg.Access); err != nil {
		return fail(err)
	}
	g, err := ctx.QueryGID(1, int(cfg.Connect.SGIDIndex))
	if err != nil {
		return fail(err)
	}
	s.GID = g.GID
	pa, err := ctx.QueryPort(1)
	if err != nil {
		return fail(err)
	}
	s.LID = pa.LID
	return s, nil
}

// NewPair builds and connects a pair.
func NewPair(tb testing.TB, cfg PairConfig) *Pair {
	tb.Helper()
	cfg.defaults()
	p := &Pair{A: NewSide(tb, cfg), B: NewSide(tb, cfg), Cfg: cfg}
	if !cfg.NoConnect {
		if err := p.Connect(); err != nil {
			tb.Fatalf("verbstest: connect: %v", err)
		}
	}
	return p
}

// Connect moves both QPs to RTS towards each other.
func (p *Pair) Connect() error {
	o := p.Cfg.Connect
	o.Access = p.Cfg.QPAcc
	if err := p.A.QP.Connect(p.A.Endpoint(), p.B.Endpoint(), o); err != nil {
		return fmt.Errorf("A: %w", err)
	}
	if err := p.B.QP.Connect(p.B.Endpoint(), p.A.Endpoint(), o); err != nil {
		return fmt.Errorf("B: %w", err)
	}
	return nil
}

// Poll waits up to timeout for n completions on cq.
func Poll(cq *verbsio.CQ, n int, timeout time.Duration) ([]verbsio.WC, error) {
	out := make([]verbsio.WC, 0, n)
	wcs := make([]verbsio.WC, n)
	deadline := time.Now().Add(timeout)
	for len(out) < n {
		k, err := cq.Poll(wcs[:n-len(out)])
		out = append(out, wcs[:k]...)
		if err != nil {
			return out, err
		}
		if len(out) == n {
			break
		}
		left := time.Until(deadline)
		if left <= 0 {
			return out, fmt.Errorf("got %d of %d completions in %v", len(out), n, timeout)
		}
		if err := cq.Wait(min(left, 50*time.Millisecond)); err != nil && err != verbsio.ErrTimeout {
			return out, err
		}
	}
	return out, nil
}

// PollOne waits for one completion.
func PollOne(tb testing.TB, cq *verbsio.CQ) verbsio.WC {
	tb.Helper()
	wcs, err := Poll(cq, 1, 5*time.Second)
	if err != nil {
		tb.Fatalf("poll: %v", err)
	}
	return wcs[0]
}

// ExpectEmpty fails if cq holds a completion.
func ExpectEmpty(tb testing.TB, cq *verbsio.CQ) {
	tb.Helper()
	var wcs [4]verbsio.WC
	if n, err := cq.Poll(wcs[:]); n != 0 || err != nil {
		tb.Fatalf("expected an empty CQ, got %d completions %+v (err %v)", n, wcs[:n], err)
	}
}
