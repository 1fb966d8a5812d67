// Package raw runs rperf's raw Ethernet tests, perftest's
// raw_ethernet_bw and raw_ethernet_lat: whole frames (Ethernet, IPv4 or
// IPv6, UDP or TCP) on a RAW_PACKET QP, steered to the receiver's QP by a
// flow rule. As in perftest there is no out-of-band exchange: both sides
// are configured from the command line (the peer's MAC, IP and port), and
// the server must be started first.
//
// raw-bw: the client streams Iterations frames per size with TxDepth
// outstanding, every send signaled, and reports the rate from its first
// post to its last send completion (the peak from the per-frame stamps);
// the server counts what its flow rule delivers and reports the rate
// between its first and last frame, and how many were lost.
//
// raw-lat: the client sends a ping and waits for the server's pong (the
// same size, every address swapped), one at a time; each sample is the
// round trip on the software clock, halved as perftest does. With
// CompletionTimestamps the same round trips are also taken from the
// completion timestamps (pong receive minus ping send, in the device's
// clock), reported beside the software clock's figures. The server only
// answers.
//
// The loops busy-poll and neither allocate nor lock per frame.
package raw

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"time"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// ClockCompletion is the Clock of results taken from completion
// timestamps (reports.ClockCompletion).
const ClockCompletion = reports.ClockCompletion

// Info is what a side announces once its QP and flow rule are ready.
type Info struct {
	QPN      uint32
	Frame    FrameSpec
	Inline   bool   // frames go inline (the largest fits the device's inline size)
	ClockKHz uint64 // the completion clock (CompletionTimestamps), else 0
}

// Run runs c's test on dev, this side's half: it checks c, creates the
// PD, CQ, buffer, RAW_PACKET QP and (server, or raw-lat client) the flow
// rule that steers the peer's frames to it, calls onReady, then measures
// each size in turn (OnProgress before, OnResult after each). It returns
// this side's results; it never closes dev.
func Run(ctx context.Context, dev *verbsio.Context, c *Config, onReady func(Info)) ([]reports.Result, error) {
	return run(ctx, dev, c, onReady, nil)
}

// run is Run; it sets *sendWCs, if not nil, to the send completions a
// bw client polled.
func run(ctx context.Context, dev *verbsio.Context, c *Config, onReady func(Info), sendWCs *int) ([]reports.Result, error) {
	if err := c.Check(); err != nil {
		return nil, fmt.Errorf("raw test: %w", err)
	}
	r, err := setup(dev, c)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if sendWCs != nil {
		defer func() { *sendWCs = r.sendWCs }()
	}
	if onReady != nil {
		onReady(r.info)
	}
	var results []reports.Result
	for i, size := range c.Sizes {
		if c.OnProgress != nil {
			c.OnProgress(session.Progress{Index: i, Count: len(c.Sizes), Bytes: size})
		}
		var res []reports.Result
		switch {
		case c.Test != session.RawLat && c.Server:
			res, err = r.bwServer(ctx, size)
		case c.Test == session.RawBW:
			res, err = r.bwClient(ctx, size)
		case c.Test == session.RawBurstLat:
			res, err = r.burstClient(ctx, size)
		case c.Server:
			err = r.latServer(ctx, size)
		default:
			res, err = r.latClient(ctx, size)
		}
		if err != nil {
			return results, err
		}
		for _, x := range res {
			x.Path = c.Path.String()
			results = append(results, x)
			if c.OnResult != nil {
				c.OnResult(x)
			}
		}
	}
	return results, nil
}

// runner holds one side's verbs objects and its preallocated work.
type runner struct {
	c    *Config
	dev  *verbsio.Context
	pd   *verbsio.PD
	cq   *verbsio.CQ
	qp   *verbsio.QP
	flow *verbsio.Flow
	// burst is the qp_burst family of the burst path's client, else nil.
	burst verbsio.QPBurst
	buf   []byte
	mr    *verbsio.MR
	info  Info

	slot  int // bytes per send frame slot
	rslot int // bytes per receive slot
	// clockKHz is the completion clock when the CQ stamps completions
	// (CompletionTimestamps, or a bw server timing arrivals), else 0.
	sendOff  int // the send frames: one slot per flow
	recvOff  int // the receive slots: RxDepth of them
	inline   bool
	clockKHz uint64

	variants int // frames per flow that differ by their VLAN priority (VLANPCPRotate: 8)
	sent     int // frames posted, which pick the priority's variant

	fwd  []verbsio.SendWR // MacFwd: a send per receive slot, of that slot's buffer
	fsgl []verbsio.SGE
	held []int // MacFwd: slots received and waiting for room in the send queue

	send []verbsio.SendWR // prebuilt WRs: variants per flow
	sgl  []verbsio.SGE    // their SGEs
	recv []verbsio.RecvWR // one prebuilt WR per receive slot
	rsgl []verbsio.SGE
	wcs  []verbsio.WC
	// carry: receive completions a bw server's size took from the CQ
	// that are the next size's (the client went on within a batch).
	carry []verbsio.WC
	// sendWCs counts the bw client's send completions (for the tests).
	sendWCs int
}

func setup(dev *verbsio.Context, c *Config) (r *runner, err error) {
	r = &runner{c: c, dev: dev}
	made := r // a failing return sets r to nil
	defer func() {
		if err != nil {
			made.close()
			r = nil
		}
	}()
	attr, err := dev.QueryDevice()
	if err != nil {
		return nil, err
	}
	maxSize := c.MaxSize()
	// A tso send is the client's; what arrives is its segments.
	recvMax, _ := c.Segments(maxSize)
	r.slot = (max(maxSize, c.RecvSize) + 63) &^ 63
	r.rslot = (max(recvMax, c.RecvSize) + 63) &^ 63
	flows := c.Flows
	if c.Server {
		flows = 1
	}
	r.variants = c.Frame.pcpVariants()
	flows *= r.variants
	r.sendOff, r.recvOff = 0, flows*r.slot
	if r.buf, err = dev.Alloc(r.recvOff + c.RxDepth*r.rslot); err != nil {
		return nil, err
	}
	if r.pd, err = dev.AllocPD(); err != nil {
		return nil, err
	}
	if r.mr, err = r.pd.RegMR(r.buf, verbsio.AccessLocalWrite); err != nil {
		return nil, err
	}
	cqe := c.TxDepth + c.RxDepth + 1
	// A bw server times arrivals by the receive completions' stamps where
	// the device gives them (the engine: the kernel's stamp of each
	// frame), not by when its polls found them: a poll that comes late
	// finds a batch, which would look like a burst at line rate.
	stampRecv := c.Server && c.Test != session.RawLat && attr.Ext != nil && attr.Ext.HCACoreClock != 0 && attr.Ext.CompletionTimestampMask != 0
	if stampRecv {
		r.clockKHz = attr.Ext.HCACoreClock
		r.cq, err = dev.CreateCQEx(verbsio.CQInitAttr{CQE: cqe, WCFlags: verbsio.WCExStandard | verbsio.WCExTS})
	} else if c.CompletionTimestamps {
		if attr.Ext == nil || attr.Ext.HCACoreClock == 0 || attr.Ext.CompletionTimestampMask == 0 {
			return nil, fmt.Errorf("raw test: the device does not stamp completions (hca_core_clock or completion_timestamp_mask 0); run without completion timestamps")
		}
		r.clockKHz = attr.Ext.HCACoreClock
		r.cq, err = dev.CreateCQEx(verbsio.CQInitAttr{CQE: cqe, WCFlags: verbsio.WCExStandard | verbsio.WCExTS})
	} else {
		r.cq, err = dev.CreateCQ(cqe)
	}
	if err != nil {
		return nil, err
	}
	inline, err := checkDevicePath(c, attr, dev.Device.Name, maxSize)
	if err != nil {
		return nil, err
	}
	r.qp, err = r.pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRawPacket, SendCQ: r.cq, RecvCQ: r.cq,
		Cap:       verbsio.QPCap{MaxSendWR: c.TxDepth, MaxRecvWR: c.RxDepth, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: inline},
		Segmenter: c.Segmenter})
	if err != nil {
		return nil, err
	}
	r.inline = inline > 0
	if err = r.qp.Connect(verbsio.Endpoint{}, verbsio.Endpoint{}, verbsio.ConnectOptions{}); err != nil {
		return nil, err
	}
	if c.Path == sendpath.Burst && !c.Server {
		fam, st := dev.QueryInterface(verbsio.InterfaceQuery{Family: verbsio.FamilyQPBurst, Version: 1, Object: r.qp})
		if st != verbsio.IntfOK {
			return nil, fmt.Errorf("raw test: the burst path: %s offers no qp_burst family on a raw QP (%v); use the generic path", dev.Device.Name, st)
		}
		r.burst = fam.(verbsio.QPBurst)
	}
	if c.HWPacing && !c.Server {
		kbps := uint32(c.RateMbps * 1000)
		pkt := uint16(min(max(c.TypicalPktSize, 0), 0xffff))
		if pkt == 0 {
			pkt = uint16(min(maxSize, 0xffff))
		}
		qa := verbsio.QPAttr{State: verbsio.QPStateRTS, RateLimit: kbps, TypicalPktSize: pkt}
		if err = r.qp.Modify(&qa, verbsio.QPAttrState|verbsio.QPAttrRateLimit); err != nil {
			return nil, fmt.Errorf("raw test: pace the QP at %d kb/s: %w", kbps, err)
		}
	}
	r.sgl = make([]verbsio.SGE, flows)
	r.send = make([]verbsio.SendWR, flows)
	flags, op := verbsio.SendSignaled, verbsio.OpSend
	if r.inline {
		flags |= verbsio.SendInline
	}
	if c.Path == sendpath.TSO && !c.Server {
		op = verbsio.OpTSO
	}
	for i := range r.send {
		r.send[i] = verbsio.SendWR{ID: uint64(i), Opcode: op, Flags: flags, SGL: r.sgl[i : i+1]}
		if op == verbsio.OpTSO {
			r.send[i].TSO.MSS = uint16(c.MSS)
		}
	}
	r.rsgl = make([]verbsio.SGE, c.RxDepth)
	r.recv = make([]verbsio.RecvWR, c.RxDepth)
	for i := range r.recv {
		r.rsgl[i] = r.mr.SGE(r.recvOff+i*r.rslot, r.rslot)
		r.recv[i] = verbsio.RecvWR{ID: uint64(i), SGL: r.rsgl[i : i+1]}
	}
	r.wcs = make([]verbsio.WC, 64)
	r.carry = make([]verbsio.WC, 0, len(r.wcs))
	if c.MacFwd {
		r.fsgl = make([]verbsio.SGE, c.RxDepth)
		r.fwd = make([]verbsio.SendWR, c.RxDepth)
		for i := range r.fwd {
			r.fsgl[i] = r.rsgl[i]
			r.fwd[i] = verbsio.SendWR{ID: uint64(i), Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: r.fsgl[i : i+1]}
		}
		r.held = make([]int, 0, c.RxDepth)
	}
	// The bw client receives nothing; every other side (the burst-lat
	// client: the pongs) gets its frames
	// by a rule on its MAC and port(s).
	if c.Server || c.Test == session.RawLat || c.Test == session.RawBurstLat {
		if r.flow, err = r.qp.CreateFlow(r.rule()); err != nil {
			return nil, fmt.Errorf("raw test: steer the peer's frames to this QP: %w", err)
		}
		if n, err := r.qp.PostRecv(r.recv); err != nil || n != len(r.recv) {
			return nil, fmt.Errorf("raw test: post %d receives: %d posted: %w", len(r.recv), n, err)
		}
	}
	r.info = Info{QPN: r.qp.QPN(), Frame: c.Frame, Inline: r.inline, ClockKHz: r.clockKHz}
	return r, nil
}

// flows is how many flows this side sends.
func (r *runner) flows() int { return len(r.send) / r.variants }

// next returns the WR that sends flow's next frame (the next priority's
// with VLANPCPRotate).
func (r *runner) next(flow int) []verbsio.SendWR {
	i := flow * r.variants
	if r.variants > 1 {
		i += r.sent % r.variants
		r.sent++
	}
	return r.send[i : i+1]
}

// rule steers frames to this side's MAC (a multicast server: the
// group's) and L4 port (each of the flows' ports on a bw server: the
// port's bits that the flows vary are masked out only when the flows
// count is a power of two; else one rule per flow would be needed, and
// the ETH rule alone is used). A server's rule also matches the IPs
// (ipRule) and the client's source port, as perftest's server's does.
func (r *runner) rule() verbsio.FlowAttr {
	if t := r.c.RuleType; t != verbsio.FlowNormal && r.c.Server {
		return verbsio.FlowAttr{Type: t, Port: 1}
	}
	f := &r.c.Frame
	all := verbsio.MAC{255, 255, 255, 255, 255, 255}
	dst := f.SrcMAC
	if r.c.Multicast && r.c.Server {
		dst = f.DstMAC // the group's MAC, as attaching the QP to the group would take
	}
	eth := verbsio.FlowETH{Val: verbsio.ETHFilter{Dst: verbsio.MAC(dst)}, Mask: verbsio.ETHFilter{Dst: all}}
	if f.EtherType != 0 {
		eth.Val.EtherType, eth.Mask.EtherType = f.EtherType, 0xffff
	}
	specs := []verbsio.FlowSpec{eth}
	if f.EtherType != 0 && f.EtherType != f.ipEtherType() {
		return verbsio.FlowAttr{Port: 1, Specs: specs} // not IP to a receiver: MAC and EtherType only
	}
	if r.c.Server {
		specs = append(specs, r.ipRule())
	}
	if n := r.c.Flows; n == 1 || (n&(n-1) == 0 && int(f.SrcPort)%n == 0) {
		mask := ^uint16(n - 1)
		port := verbsio.PortFilter{Dst: f.SrcPort & mask}
		pm := verbsio.PortFilter{Dst: mask}
		if r.c.Server && !r.c.Multicast && int(f.DstPort)%n == 0 {
			// The client's port(s), as perftest's server matches them.
			port.Src, pm.Src = f.DstPort&mask, mask
		}
		if f.TCP {
			specs = append(specs, verbsio.FlowTCP{Val: port, Mask: pm})
		} else {
			specs = append(specs, verbsio.FlowUDP{Val: port, Mask: pm})
		}
	}
	return verbsio.FlowAttr{Port: 1, Specs: specs}
}

// ipRule is the server's IP match, as perftest's server has it: the
// destination is its IP (a multicast server: the group's) and the
// source the client's (a multicast server: any), and a TOS (IPv6:
// traffic class) or flow label other than 0 must match too.
func (r *runner) ipRule() verbsio.FlowSpec {
	f := &r.c.Frame
	dst, src := f.SrcIP, f.DstIP
	if r.c.Multicast {
		dst, src = f.DstIP, netip.Addr{}
	}
	if f.SrcIP.Is6() {
		var val, mask verbsio.IPv6Filter
		val.Dst, mask.Dst = dst.As16(), [16]byte{0: 0xff, 1: 0xff, 2: 0xff, 3: 0xff, 4: 0xff, 5: 0xff, 6: 0xff, 7: 0xff, 8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 13: 0xff, 14: 0xff, 15: 0xff}
		if src.IsValid() {
			val.Src, mask.Src = src.As16(), mask.Dst
		}
		if f.TOS != 0 {
			val.TrafficClass, mask.TrafficClass = f.TOS, 0xff
		}
		if f.FlowLabel != 0 {
			val.FlowLabel, mask.FlowLabel = f.FlowLabel, 0xfffff
		}
		return verbsio.FlowIPv6{Val: val, Mask: mask}
	}
	var val, mask verbsio.IPv4Filter
	val.Dst, mask.Dst = dst.As4(), [4]byte{0xff, 0xff, 0xff, 0xff}
	if src.IsValid() {
		val.Src, mask.Src = src.As4(), mask.Dst
	}
	if f.TOS != 0 {
		val.TOS, mask.TOS = f.TOS, 0xff
	}
	return verbsio.FlowIPv4{Val: val, Mask: mask}
}

// buildFrames writes the frames of size bytes: flow i's in send slots
// i*variants to (i+1)*variants-1.
func (r *runner) buildFrames(size int, spec FrameSpec) error {
	for i := range r.send {
		s := spec
		flow, v := i/r.variants, i%r.variants
		s.SrcPort += uint16(flow)
		s.DstPort += uint16(flow)
		if r.variants > 1 {
			s.VLANPCP = uint8(v+1) & 7 // as perftest counts: the first frame has priority 1
		}
		off := r.sendOff + i*r.slot
		if err := s.Build(r.buf[off:off+size], byte(i)); err != nil {
			return fmt.Errorf("raw test: %w", err)
		}
		r.sgl[i] = r.mr.SGE(off, size)
		if r.send[i].Opcode == verbsio.OpTSO { // the headers apart, the SGL the payload
			h := s.HeaderLen()
			r.send[i].TSO.Hdr = r.buf[off : off+h]
			r.sgl[i] = r.mr.SGE(off+h, size-h)
		}
	}
	return nil
}

// post sends wr's frame, asking for a completion if signaled: with
// PostSend, or on the burst path staged with SendPending for the next
// flush.
func (r *runner) post(wr []verbsio.SendWR, signaled bool) error {
	if r.burst == nil {
		if signaled {
			wr[0].Flags |= verbsio.SendSignaled
		} else {
			wr[0].Flags &^= verbsio.SendSignaled
		}
		_, err := r.qp.PostSend(wr)
		return err
	}
	var flags uint32
	if signaled {
		flags = verbsio.BurstSignaled
	}
	s := &wr[0].SGL[0]
	return r.burst.SendPending(s.Addr, s.Length, s.LKey, flags)
}

// flush sends the frames staged on the burst path, if any.
func (r *runner) flush(staged int) error {
	if r.burst == nil || staged == 0 {
		return nil
	}
	if err := r.burst.SendFlush(); err != nil {
		return fmt.Errorf("raw test: flush %d frames: %w", staged, err)
	}
	return nil
}

// checkDevicePath checks that the device offers c's send path and
// returns the inline size the QP asks for: every frame on the inline
// path, none on the others.
func checkDevicePath(c *Config, attr verbsio.DeviceAttr, dev string, maxSize int) (int, error) {
	if err := sendpath.CheckDevice(c.Path, attr, dev); err != nil {
		return 0, fmt.Errorf("raw test: %w", err)
	}
	switch c.Path {
	case sendpath.Inline:
		if maxSize > attr.MaxInlineData {
			return 0, &PathError{Path: c.Path, Err: fmt.Errorf("%d-byte frames do not fit %s's max_inline_data %d; use frames of %d bytes or less, or another path", maxSize, dev, attr.MaxInlineData, attr.MaxInlineData)}
		}
		return maxSize, nil
	case sendpath.TSO:
		supported := slices.Contains(attr.TSO.SupportedQP, verbsio.QPTypeRawPacket)
		if !c.Server && (attr.TSO.MaxTSO == 0 || !supported) {
			return 0, &PathError{Path: c.Path, Err: fmt.Errorf("%s offers no TSO on raw QPs (tso_caps max_tso %d); use another path", dev, attr.TSO.MaxTSO)}
		}
		if p := maxSize - c.Frame.HeaderLen(); !c.Server && p > int(attr.TSO.MaxTSO) {
			return 0, &PathError{Path: c.Path, Err: fmt.Errorf("a %d-byte payload is more than %s's max_tso %d; send smaller frames", p, dev, attr.TSO.MaxTSO)}
		}
	}
	return 0, nil
}

// PathError is a send path the device cannot run as configured.
type PathError struct {
	Path sendpath.Path
	Err  error
}

func (e *PathError) Error() string { return "the " + e.Path.String() + " path: " + e.Err.Error() }

// Unwrap returns the cause.
func (e *PathError) Unwrap() error { return e.Err }

func (r *runner) close() {
	if r.burst != nil {
		r.burst.Release()
	}
	if r.flow != nil {
		r.flow.Destroy()
	}
	if r.qp != nil {
		r.qp.Destroy()
	}
	if r.cq != nil {
		r.cq.Destroy()
	}
	if r.mr != nil {
		r.mr.Dereg()
	}
	if r.pd != nil {
		r.pd.Dealloc()
	}
	if r.buf != nil {
		r.dev.Free(r.buf)
	}
}

// waiter bounds a busy-poll: it checks the clock and the context every
// 1024 spins, yields to the scheduler each time, and naps (a
// millisecond) once a wait lasts longer than session.BackoffAfter, so
// that a loaded machine still runs the peer.
type waiter struct {
	ctx      context.Context
	what     string
	limit    time.Duration
	start    int64
	spins    int
	deadline int64
	napping  bool // backed off: every idle poll of a CQ naps in CQ.Wait
}

func (w *waiter) begin(ctx context.Context, what string, limit time.Duration) {
	w.ctx, w.what, w.limit, w.spins, w.napping = ctx, what, limit, 0, false
	w.start = clock.Now()
	w.deadline = w.start + int64(limit)
}

// progress restarts the wait at now: something arrived.
func (w *waiter) progress(now int64) {
	w.start, w.deadline, w.spins, w.napping = now, now+int64(w.limit), 0, false
}

// idle is called when a poll found nothing.
func (w *waiter) idle() error { return w.idleOn(nil) }

// idleOn is idle for a poll of cq: a backed-off wait naps in cq.Wait
// rather than in time.Sleep, so that the engine's own deadlines (its
// pacer's next frame) end the nap and keep being served. A paced sender
// that completes one frame in -Q otherwise napped between completions
// and the pacer, which then kept no credit for a late sender beyond one
// burst, lost the time: 100 Mb/s of 1514-byte frames came out at 40 Mb/s
// on an idle machine (cmd/rperf's TestRawBWPacedProcesses).
//
// Once backed off, every idle poll of a CQ naps in it (up to napWait),
// not every 1024th: a paced sender then sleeps in CQ.Wait until its next
// frame is due instead of spinning through the gaps between completions
// (121 ms at 10 Mb/s with -Q 100), and on a busy machine it is kept
// waiting for a CPU less: in interleaved runs at load 4-5, 10 Mb/s came
// out -3.8%, -14.2%, -18.2%, +0.27% spinning (the sender waiting 0.5-0.9
// s of 1.3-1.5 s for a CPU) and -0.04%, -3.2%, -0.03%, +0.14% napping.
func (w *waiter) idleOn(cq *verbsio.CQ) error {
	w.spins++
	if w.spins&1023 != 0 && !(w.napping && cq != nil) {
		return nil
	}
	now := clock.Now()
	if now > w.deadline {
		return &stallError{w.what, w.limit}
	}
	if err := w.ctx.Err(); err != nil {
		return fmt.Errorf("raw test: %s: %w", w.what, err)
	}
	if now-w.start > int64(session.BackoffAfter) {
		w.napping = true
		if cq == nil {
			time.Sleep(50 * time.Microsecond)
		} else if err := cq.Wait(napWait); err != nil && !errors.Is(err, verbsio.ErrTimeout) {
			return fmt.Errorf("raw test: %s: %w", w.what, err)
		}
	} else {
		runtime.Gosched()
	}
	return nil
}

// napWait is the longest nap in CQ.Wait of a backed-off wait: a
// completion or the engine's own deadline (its pacer's next frame) ends
// it sooner; the stall limit and the context are checked between naps.
const napWait = time.Millisecond

// stallError is a wait that saw nothing for its limit.
type stallError struct {
	what  string
	limit time.Duration
}

func (e *stallError) Error() string {
	return fmt.Sprintf("raw test: %s: nothing for %v (is the peer running, sending to this side's MAC, IP and port, and to a server from the client's IP and port the server was given?)", e.what, e.limit)
}

// pollCarried is poll that first returns, up to n, the completions an
// earlier size carried (runner.carry).
func (r *runner) pollCarried(w *waiter, n int) (int, error) {
	if len(r.carry) == 0 {
		return r.poll(w, n)
	}
	k := copy(r.wcs[:n], r.carry)
	r.carry = r.carry[:copy(r.carry, r.carry[k:])]
	return k, nil
}

// poll polls up to n completions into r.wcs; when there are none it runs
// the wait's idle turn, whose error (a stall, a cancelled context) it
// returns.
func (r *runner) poll(w *waiter, n int) (int, error) {
	k, err := r.cq.Poll(r.wcs[:n])
	if err != nil {
		return 0, fmt.Errorf("raw test: poll: %w", err)
	}
	if k == 0 {
		return 0, w.idleOn(r.cq)
	}
	return k, nil
}

func wcError(what string, wc *verbsio.WC) error {
	return fmt.Errorf("raw test: %s completed with %v (vendor error 0x%x)", what, wc.Status, wc.VendorErr)
}
