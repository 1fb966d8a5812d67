package verbstest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// RawConfig describes two ends of an Ethernet link for the raw part of the
// conformance suite: how to open a context at each end (in its network
// namespace, for tests over veth), and each end's MAC and IPv4 address.
type RawConfig struct {
	OpenA, OpenB func() (*verbsio.Context, error)
	MACA, MACB   verbsio.MAC
	IPA, IPB     netip.Addr
	// MTU is the link's MTU (the longest frame is MTU + 14 bytes).
	MTU int
}

// RunRaw runs the conformance suite's raw part: RAW_PACKET QPs of a device
// whose ports are Ethernet links (the built-in raw_<netdev> devices, a
// NIC's raw queues). Every feature the device claims in DeviceAttr must
// work: frames whole both ways and the state machine always; checksum
// offload (RawCapIPCsum), TSO (TSO.MaxTSO for RAW_PACKET), flow steering
// with what FlowSteering offers, completion timestamps, pacing and the
// qp_burst family when claimed.
func RunRaw(t *testing.T, cfg RawConfig) {
	t.Run("StateMachine", func(t *testing.T) { testRawStates(t, cfg) })
	t.Run("Frames", func(t *testing.T) { testRawFrames(t, cfg) })
	t.Run("Checksums", func(t *testing.T) { testRawChecksums(t, cfg) })
	t.Run("TSO", func(t *testing.T) { testRawTSO(t, cfg) })
	t.Run("Steering", func(t *testing.T) { testRawSteering(t, cfg) })
	t.Run("Timestamps", func(t *testing.T) { testRawTimestamps(t, cfg) })
	t.Run("Burst", func(t *testing.T) { testRawBurst(t, cfg) })
	t.Run("Pacing", func(t *testing.T) { testRawPacing(t, cfg) })
}

// rawSide is one end: context, PD, CQ, a registered buffer.
type rawSide struct {
	ctx *verbsio.Context
	pd  *verbsio.PD
	cq  *verbsio.CQ
	buf []byte
	mr  *verbsio.MR
	mac verbsio.MAC
	ip  netip.Addr
	rx  int // receive buffers handed out so far (2 KiB each, in the first MiB)
}

func openRawSide(t *testing.T, open func() (*verbsio.Context, error), mac verbsio.MAC, ip netip.Addr, flags verbsio.CQWCFlags) *rawSide {
	t.Helper()
	ctx, err := open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Close() })
	s := &rawSide{ctx: ctx, mac: mac, ip: ip}
	if s.pd, err = ctx.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if flags != 0 {
		s.cq, err = ctx.CreateCQEx(verbsio.CQInitAttr{CQE: 4096, WCFlags: flags})
	} else {
		s.cq, err = ctx.CreateCQ(4096)
	}
	if err != nil {
		t.Fatal(err)
	}
	s.buf = make([]byte, 1<<21)
	if s.mr, err = s.pd.RegMR(s.buf, verbsio.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	return s
}

func rawPair(t *testing.T, cfg RawConfig, flags verbsio.CQWCFlags) (a, b *rawSide) {
	return openRawSide(t, cfg.OpenA, cfg.MACA, cfg.IPA, flags), openRawSide(t, cfg.OpenB, cfg.MACB, cfg.IPB, flags)
}

func (s *rawSide) qp(t *testing.T, recvs int, seg verbsio.Segmenter) *verbsio.QP {
	t.Helper()
	qp, err := s.pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRawPacket, SendCQ: s.cq, RecvCQ: s.cq, Segmenter: seg,
		Cap: verbsio.QPCap{MaxSendWR: 256, MaxRecvWR: recvs, MaxSendSGE: 2, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qp.Destroy() })
	if err := qp.Connect(verbsio.Endpoint{}, verbsio.Endpoint{}, verbsio.ConnectOptions{}); err != nil {
		t.Fatal(err)
	}
	return qp
}

// steerPort installs the rule every test receives with: frames to the
// side's MAC and UDP port.
func (s *rawSide) steerPort(t *testing.T, qp *verbsio.QP, port uint16) *verbsio.Flow {
	t.Helper()
	fl, err := qp.CreateFlow(verbsio.FlowAttr{Port: 1, Specs: []verbsio.FlowSpec{
		verbsio.FlowETH{Val: verbsio.ETHFilter{Dst: s.mac}, Mask: verbsio.ETHFilter{Dst: verbsio.MAC{255, 255, 255, 255, 255, 255}}},
		verbsio.FlowUDP{Val: verbsio.PortFilter{Dst: port}, Mask: verbsio.PortFilter{Dst: 0xffff}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fl.Destroy() })
	return fl
}

// postRecvs posts n receives of 2 KiB, each its own buffer in the first
// MiB of the side's memory (sends use the second).
func (s *rawSide) postRecvs(t *testing.T, qp *verbsio.QP, n int) {
	t.Helper()
	if (s.rx+n)*2048 > 1<<20 {
		t.Fatalf("more than %d receive buffers", (1<<20)/2048)
	}
	for i := s.rx; i < s.rx+n; i++ {
		if _, err := qp.PostRecv([]verbsio.RecvWR{{ID: uint64(i * 2048), SGL: []verbsio.SGE{s.mr.SGE(i*2048, 2048)}}}); err != nil {
			t.Fatal(err)
		}
	}
	s.rx += n
}

// send posts frame (copied to off) on qp with flags and waits for its
// completion.
func (s *rawSide) send(t *testing.T, qp *verbsio.QP, off int, frame []byte, flags verbsio.SendFlags) verbsio.WC {
	t.Helper()
	copy(s.buf[off+1<<20:], frame)
	if _, err := qp.PostSend([]verbsio.SendWR{{ID: uint64(off), Opcode: verbsio.OpSend, Flags: flags | verbsio.SendSignaled,
		SGL: []verbsio.SGE{s.mr.SGE(off+1<<20, len(frame))}}}); err != nil {
		t.Fatal(err)
	}
	return PollOne(t, s.cq)
}

// udpFrame is an Ethernet/IPv4/UDP frame from a to b with correct
// checksums, ToS tos and n payload bytes.
func udpFrame(a, b *rawSide, sport, dport uint16, tos uint8, n int) []byte {
	f := make([]byte, 42+n)
	copy(f[0:6], b.mac[:])
	copy(f[6:12], a.mac[:])
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0], ip[1] = 0x45, tos
	binary.BigEndian.PutUint16(ip[2:], uint16(28+n))
	ip[6], ip[8], ip[9] = 0x40, 64, 17
	src, dst := a.ip.As4(), b.ip.As4()
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	binary.BigEndian.PutUint16(ip[10:], ^fold(sum16(0, ip)))
	u := f[34:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(8+n))
	for i := 0; i < n; i++ {
		u[8+i] = byte(i*7 + int(sport))
	}
	binary.BigEndian.PutUint16(u[6:], udpChecksum(ip, u))
	return f
}

func sum16(acc uint64, b []byte) uint64 {
	for len(b) >= 2 {
		acc += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint64(b[0]) << 8
	}
	return acc
}

func fold(acc uint64) uint16 {
	for acc > 0xffff {
		acc = acc>>16 + acc&0xffff
	}
	return uint16(acc)
}

// udpChecksum is the checksum of the UDP datagram u (its checksum field
// counted as is) under IPv4 header ip.
func udpChecksum(ip, u []byte) uint16 {
	acc := sum16(0, ip[12:20]) + 17 + uint64(len(u))
	saved := binary.BigEndian.Uint16(u[6:])
	u[6], u[7] = 0, 0
	c := ^fold(sum16(acc, u))
	binary.BigEndian.PutUint16(u[6:], saved)
	if c == 0 {
		c = 0xffff
	}
	return c
}

// checksumsGood reports whether an IPv4/UDP frame's checksums verify.
func checksumsGood(f []byte) bool {
	if len(f) < 42 || binary.BigEndian.Uint16(f[12:]) != 0x0800 {
		return false
	}
	ip := f[14:34]
	return fold(sum16(0, ip)) == 0xffff && binary.BigEndian.Uint16(f[40:]) == udpChecksum(ip, f[34:])
}

func testRawStates(t *testing.T, cfg RawConfig) {
	a, _ := rawPair(t, cfg, 0)
	qp, err := a.pd.CreateQP(verbsio.QPInitAttr{Type: verbsio.QPTypeRawPacket, SendCQ: a.cq, RecvCQ: a.cq, Cap: verbsio.QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Destroy()
	steps := []struct {
		name  string
		attr  verbsio.QPAttr
		mask  verbsio.QPAttrMask
		ok    bool
		state verbsio.QPState
	}{
		{"RESET->RTS", verbsio.QPAttr{State: verbsio.QPStateRTS}, verbsio.QPAttrState, false, verbsio.QPStateReset},
		{"RESET->INIT without a port", verbsio.QPAttr{State: verbsio.QPStateInit}, verbsio.QPAttrState, false, verbsio.QPStateReset},
		{"RESET->INIT with a Q_Key (UD's)", verbsio.QPAttr{State: verbsio.QPStateInit, PortNum: 1}, verbsio.QPAttrState | verbsio.QPAttrPort | verbsio.QPAttrQKey, false, verbsio.QPStateReset},
		{"RESET->INIT", verbsio.QPAttr{State: verbsio.QPStateInit, PortNum: 1}, verbsio.QPAttrState | verbsio.QPAttrPort, true, verbsio.QPStateInit},
		{"INIT->RTR", verbsio.QPAttr{State: verbsio.QPStateRTR}, verbsio.QPAttrState, true, verbsio.QPStateRTR},
		{"RTR->RTS with an SQ PSN (not RAW's)", verbsio.QPAttr{State: verbsio.QPStateRTS}, verbsio.QPAttrState | verbsio.QPAttrSQPSN, false, verbsio.QPStateRTR},
		{"RTR->RTS", verbsio.QPAttr{State: verbsio.QPStateRTS}, verbsio.QPAttrState, true, verbsio.QPStateRTS},
	}
	for _, s := range steps {
		a := s.attr
		err := qp.Modify(&a, s.mask)
		if s.ok != (err == nil) {
			t.Errorf("%s: %v", s.name, err)
		}
		if q, _ := qp.Query(); q.State != s.state {
			t.Errorf("%s: state %s, want %s", s.name, q.State, s.state)
		}
	}
}

func testRawFrames(t *testing.T, cfg RawConfig) {
	a, b := rawPair(t, cfg, 0)
	qa, qb := a.qp(t, 64, 0), b.qp(t, 64, 0)
	b.steerPort(t, qb, 7001)
	a.steerPort(t, qa, 7001)
	a.postRecvs(t, qa, 64)
	b.postRecvs(t, qb, 64)
	for i, n := range []int{18, 100, cfg.MTU - 28} {
		for _, dir := range []struct{ from, to *rawSide }{{a, b}, {b, a}} {
			qs, qr := qa, qb
			if dir.from == b {
				qs, qr = qb, qa
			}
			f := udpFrame(dir.from, dir.to, uint16(i+1), 7001, 0, n)
			if wc := dir.from.send(t, qs, 0, f, 0); wc.Status != verbsio.StatusSuccess || wc.ByteLen != uint32(len(f)) {
				t.Fatalf("send of a %d-byte frame: %+v", len(f), wc)
			}
			wc := PollOne(t, dir.to.cq)
			got := dir.to.buf[wc.ID : wc.ID+uint64(wc.ByteLen)]
			if wc.Status != verbsio.StatusSuccess || wc.QPN != qr.QPN() || !bytes.Equal(got, f) {
				t.Fatalf("receive %+v: got % x, want % x", wc, got, f)
			}
		}
	}
	over := udpFrame(a, b, 9, 7001, 0, cfg.MTU-27)
	if wc := a.send(t, qa, 0, over, 0); wc.Status != verbsio.StatusLocLenErr {
		t.Errorf("a frame one byte above MTU + 14: %s, want LOC_LEN_ERR", wc.Status)
	}
}

func testRawChecksums(t *testing.T, cfg RawConfig) {
	a, b := rawPair(t, cfg, 0)
	attr, _ := a.ctx.QueryDevice()
	if attr.RawPacketCaps&verbsio.RawCapIPCsum == 0 {
		t.Skip("the device claims no checksum offload for raw QPs (raw_packet_caps IP_CSUM)")
	}
	qa, qb := a.qp(t, 1, 0), b.qp(t, 64, 0)
	b.steerPort(t, qb, 7002)
	b.postRecvs(t, qb, 64)
	for i, n := range []int{0, 1, 999} {
		f := udpFrame(a, b, uint16(i+1), 7002, 0, n)
		want := append([]byte(nil), f...)
		f[24], f[25], f[40], f[41] = 0, 0, 0x12, 0x34 // wrong checksums the device must replace
		if wc := a.send(t, qa, 0, f, verbsio.SendIPCsum); wc.Status != verbsio.StatusSuccess {
			t.Fatalf("IP_CSUM send: %+v", wc)
		}
		wc := PollOne(t, b.cq)
		got := b.buf[wc.ID : wc.ID+uint64(wc.ByteLen)]
		if !bytes.Equal(got, want) || !checksumsGood(got) {
			t.Errorf("IP_CSUM frame arrived as % x, want % x", got, want)
		}
		if wc.Flags&verbsio.WCIPCsumOK == 0 {
			t.Errorf("a frame with good checksums arrived without IP_CSUM_OK")
		}
	}
	bad := udpFrame(a, b, 5, 7002, 0, 50)
	bad[41] ^= 1
	a.send(t, qa, 0, bad, 0)
	if wc := PollOne(t, b.cq); wc.Flags&verbsio.WCIPCsumOK != 0 {
		t.Errorf("a frame with a bad UDP checksum arrived with IP_CSUM_OK")
	}
}

func testRawTSO(t *testing.T, cfg RawConfig) {
	a, b := rawPair(t, cfg, 0)
	attr, _ := a.ctx.QueryDevice()
	if attr.TSO.MaxTSO == 0 || !hasQPType(attr.TSO.SupportedQP, verbsio.QPTypeRawPacket) {
		t.Skip("the device claims no TSO for RAW_PACKET QPs")
	}
	qa, qb := a.qp(t, 1, 0), b.qp(t, 512, 0)
	b.steerPort(t, qb, 7003)
	b.postRecvs(t, qb, 512)
	mss := cfg.MTU - 28
	payload := min(int(attr.TSO.MaxTSO), 60000, 512*mss)
	hdr := udpFrame(a, b, 1, 7003, 0, 0)
	for i := 0; i < payload; i++ {
		a.buf[i] = byte(i / 7)
	}
	if _, err := qa.PostSend([]verbsio.SendWR{{Opcode: verbsio.OpTSO, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{a.mr.SGE(0, payload)},
		TSO: verbsio.TSO{Hdr: hdr, MSS: uint16(mss)}}}); err != nil {
		t.Fatal(err)
	}
	if wc := PollOne(t, a.cq); wc.Status != verbsio.StatusSuccess {
		t.Fatalf("TSO send: %+v", wc)
	}
	frames := (payload + mss - 1) / mss
	wcs, err := Poll(b.cq, frames, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for i, wc := range wcs {
		f := b.buf[wc.ID : wc.ID+uint64(wc.ByteLen)]
		if !checksumsGood(f) || (i < frames-1 && len(f) != 42+mss) {
			t.Fatalf("UDP segment %d of %d: %d bytes, checksums good %v", i, frames, len(f), checksumsGood(f))
		}
		got = append(got, f[42:]...)
	}
	if !bytes.Equal(got, a.buf[:payload]) {
		t.Errorf("the segments carry %d bytes that differ from the %d sent", len(got), payload)
	}
}

func hasQPType(list []verbsio.QPType, t verbsio.QPType) bool {
	for _, x := range list {
		if x == t {
			return true
		}
	}
	return false
}

func testRawSteering(t *testing.T, cfg RawConfig) {
	a, b := rawPair(t, cfg, 0)
	attr, _ := b.ctx.QueryDevice()
	caps := attr.FlowSteering
	if !caps.Has(verbsio.FlowCanETH | verbsio.FlowCanUDP) {
		t.Skip("the device claims no ETH and UDP steering")
	}
	qa := a.qp(t, 1, 0)
	q1, q2 := b.qp(t, 64, 0), b.qp(t, 64, 0)
	b.postRecvs(t, q1, 64)
	b.postRecvs(t, q2, 64)
	b.steerPort(t, q1, 7004)
	b.steerPort(t, q2, 7005)
	for i := 0; i < 4; i++ {
		a.send(t, qa, 0, udpFrame(a, b, 1, uint16(7004+i%2), 0, 10), 0)
	}
	wcs, err := Poll(b.cq, 4, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, wc := range wcs {
		port := binary.BigEndian.Uint16(b.buf[wc.ID+36:])
		if (port == 7004) != (wc.QPN == q1.QPN()) {
			t.Errorf("a frame to port %d reached QP %#x (q1 %#x, q2 %#x)", port, wc.QPN, q1.QPN(), q2.QPN())
		}
	}
	if caps.Has(verbsio.FlowCanTag | verbsio.FlowCanIPv4Ext) {
		fl, err := q1.CreateFlow(verbsio.FlowAttr{Port: 1, Specs: []verbsio.FlowSpec{
			verbsio.FlowIPv4{Val: verbsio.IPv4Filter{TOS: 0x28}, Mask: verbsio.IPv4Filter{TOS: 0xff}}, verbsio.FlowTag{Tag: 77}}})
		if err != nil {
			t.Fatal(err)
		}
		a.send(t, qa, 0, udpFrame(a, b, 1, 9999, 0x28, 10), 0)
		if wc := PollOne(t, b.cq); wc.QPN != q1.QPN() || wc.FlowTag != 77 {
			t.Errorf("a ToS 0x28 frame: %+v, want q1 with flow tag 77", wc)
		}
		if err := fl.Destroy(); err != nil {
			t.Fatal(err)
		}
		a.send(t, qa, 0, udpFrame(a, b, 1, 9999, 0x28, 10), 0)
		time.Sleep(50 * time.Millisecond)
		ExpectEmpty(t, b.cq)
	}
	// What the device cannot steer is EOPNOTSUPP, a malformed rule EINVAL.
	if !caps.Has(verbsio.FlowCanMPLS) {
		if _, err := q1.CreateFlow(verbsio.FlowAttr{Port: 1, Specs: []verbsio.FlowSpec{verbsio.FlowMPLS{Val: 1, Mask: 0xfffff000}}}); !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("an MPLS rule: %v, want EOPNOTSUPP", err)
		}
	}
	if _, err := q1.CreateFlow(verbsio.FlowAttr{Port: 1, Specs: []verbsio.FlowSpec{verbsio.FlowUDP{Val: verbsio.PortFilter{Dst: 3}, Mask: verbsio.PortFilter{Dst: 1}}}}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a value bit outside its mask: %v, want EINVAL", err)
	}
	if err := q1.Destroy(); !errors.Is(err, unix.EBUSY) {
		t.Errorf("destroying a QP that flows steer to: %v, want EBUSY", err)
	}
}

func testRawTimestamps(t *testing.T, cfg RawConfig) {
	// The capability check's context is closed before the test's opens:
	// a port may take one context at a time (AF_XDP holds its queue).
	ctx, err := cfg.OpenA()
	if err != nil {
		t.Fatal(err)
	}
	attr, _ := ctx.QueryDevice()
	ctx.Close()
	if attr.Ext == nil || attr.Ext.CompletionTimestampMask == 0 || attr.Ext.HCACoreClock == 0 {
		t.Skip("the device reports no completion timestamps")
	}
	a, b := rawPair(t, cfg, verbsio.WCExStandard|verbsio.WCExTS)
	qa, qb := a.qp(t, 1, 0), b.qp(t, 8, 0)
	b.steerPort(t, qb, 7006)
	b.postRecvs(t, qb, 8)
	var first [2]uint64
	for i := 0; i < 2; i++ {
		if i == 1 {
			time.Sleep(30 * time.Millisecond)
		}
		s := a.send(t, qa, 0, udpFrame(a, b, 1, 7006, 0, 10), 0)
		r := PollOne(t, b.cq)
		if s.Timestamp == 0 || r.Timestamp == 0 {
			t.Fatalf("send stamped %d, receive %d: want both stamped", s.Timestamp, r.Timestamp)
		}
		if i == 0 {
			first = [2]uint64{s.Timestamp, r.Timestamp}
			continue
		}
		for j, ts := range []uint64{s.Timestamp, r.Timestamp} {
			ns, _ := verbsio.TimestampClock(ts-first[j], attr.Ext.HCACoreClock)
			if d := time.Duration(ns); ts <= first[j] || d < 24*time.Millisecond || d > 5*time.Second {
				t.Errorf("completions 30 ms apart stamped %v apart", d)
			}
		}
	}
}

func testRawBurst(t *testing.T, cfg RawConfig) {
	a, b := rawPair(t, cfg, 0)
	attr, _ := a.ctx.QueryDevice()
	claimed := false
	for _, c := range attr.Interfaces {
		claimed = claimed || c.Family == verbsio.FamilyQPBurst
	}
	if !claimed {
		t.Skip("the device offers no qp_burst family")
	}
	qa, qb := a.qp(t, 1, 0), b.qp(t, 64, 0)
	b.steerPort(t, qb, 7007)
	b.postRecvs(t, qb, 64)
	fam, st := a.ctx.QueryInterface(verbsio.InterfaceQuery{Family: verbsio.FamilyQPBurst, Object: qa})
	if st != verbsio.IntfOK {
		t.Fatalf("qp_burst on a RAW_PACKET QP: %s", st)
	}
	burst := fam.(verbsio.QPBurst)
	const n = 32
	for i := 0; i < n; i++ {
		f := udpFrame(a, b, uint16(i+1), 7007, 0, 20+i)
		off := 1<<20 + i*2048
		copy(a.buf[off:], f)
		flags := uint32(0)
		if i == n-1 {
			flags = verbsio.BurstSignaled
		}
		if err := burst.SendPending(a.mr.SGE(off, len(f)).Addr, uint32(len(f)), a.mr.LKey(), flags); err != nil {
			t.Fatal(err)
		}
	}
	if err := burst.SendFlush(); err != nil {
		t.Fatal(err)
	}
	if wc := PollOne(t, a.cq); wc.Status != verbsio.StatusSuccess {
		t.Fatalf("burst completion %+v", wc)
	}
	// The receiving side reads the frames' lengths through the cq_poll
	// family, the Accelerated Verbs poll family raw packet paths use.
	g, st := b.ctx.QueryInterface(verbsio.InterfaceQuery{Family: verbsio.FamilyCQPoll, Object: b.cq})
	if st != verbsio.IntfOK {
		t.Fatalf("cq_poll on a raw QP's CQ: %s", st)
	}
	poll := g.(verbsio.CQPoll)
	defer poll.Release()
	var lens []uint32
	for deadline := time.Now().Add(5 * time.Second); len(lens) < n && time.Now().Before(deadline); {
		l, err := poll.PollLength()
		if err != nil {
			t.Fatal(err)
		}
		if l == 0 {
			b.cq.Wait(10 * time.Millisecond)
			continue
		}
		lens = append(lens, l)
	}
	if len(lens) != n {
		t.Fatalf("%d of %d burst frames arrived through cq_poll", len(lens), n)
	}
	for i, l := range lens {
		if int(l) != 42+20+i {
			t.Errorf("burst frame %d arrived with %d bytes, want %d (in order)", i, l, 42+20+i)
		}
	}
}

func testRawPacing(t *testing.T, cfg RawConfig) {
	a, b := rawPair(t, cfg, 0)
	attr, _ := a.ctx.QueryDevice()
	if !hasQPType(attr.PacketPacing.SupportedQP, verbsio.QPTypeRawPacket) {
		t.Skip("the device claims no packet pacing for RAW_PACKET QPs")
	}
	qa, qb := a.qp(t, 1, 0), b.qp(t, 256, 0)
	b.steerPort(t, qb, 7008)
	b.postRecvs(t, qb, 256)
	const kbps, frames = 50_000, 200
	rate := verbsio.QPAttr{State: verbsio.QPStateRTS, RateLimit: kbps, MaxBurstSize: 1042, TypicalPktSize: 1042}
	if err := qa.Modify(&rate, verbsio.QPAttrState|verbsio.QPAttrRateLimit); err != nil {
		t.Fatal(err)
	}
	f := udpFrame(a, b, 1, 7008, 0, 1000)
	copy(a.buf, f)
	wrs := make([]verbsio.SendWR, frames)
	for i := range wrs {
		wrs[i] = verbsio.SendWR{Opcode: verbsio.OpSend, SGL: []verbsio.SGE{a.mr.SGE(0, len(f))}}
	}
	wrs[frames-1].Flags = verbsio.SendSignaled
	start := time.Now()
	if _, err := qa.PostSend(wrs); err != nil {
		t.Fatal(err)
	}
	PollOne(t, a.cq)
	el := time.Since(start)
	want := time.Duration(float64((frames-1)*len(f)*8) / (kbps * 1000) * float64(time.Second))
	if el < want*97/100 {
		t.Errorf("%d frames paced at %d kbit/s left in %v, faster than the rate allows (%v)", frames, kbps, el, want)
	}
	if _, err := Poll(b.cq, frames, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}
