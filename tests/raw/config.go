package raw

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// Config is a raw test's configuration: the shared part (Test RawBW or
// RawLat, Sizes as whole frame lengths without the FCS, Iterations or
// Duration (raw-bw and raw-lat: each size runs for it, from the client's
// first frame or the server's first arrival; the server stops on silence
// too), Warmup, TxDepth, RxDepth, the stall timeout and the callbacks) and the
// frames' shape, as perftest's raw flags give them; Path is the send
// path (generic, burst, inline or tso, below) and Segmenter who cuts a
// tso send (0: the provider's choice; the built-in engine's raw devices
// choose the kernel where its segments reach the wire as segments, else
// cut them in the engine). Fields of the shared part
// not listed (Inline, Validate, ...) do not apply.
//
// The paths: generic posts each frame with PostSend from the registered
// buffer; inline copies each frame into its work request (SendInline:
// the largest frame must fit the device's max_inline_data); burst (raw-bw
// only) stages the frames with the qp_burst family's SendPending and
// rings once per batch with SendFlush; tso (raw-bw only) posts each frame
// as one OpTSO send, its headers as TSO.Hdr and its payload cut into MSS
// bytes per segment by the device, and the server counts the segments.
type Config struct {
	session.Config
	// Server is perftest's --server (-Z): it receives (raw-bw) or
	// answers each ping (raw-lat); else this side is the client
	// (--client, -P), which sends and measures.
	Server bool
	// Frame is this side's frames: its own addresses as the source, the
	// peer's as the destination. The server's flow rule takes frames to
	// its MAC, IP and L4 port from the client's IP and port (and with
	// the frames' TOS or traffic class and flow label when not 0), as
	// perftest's server's rule does.
	Frame FrameSpec
	// RuleType is the kind of the server's steering rule: FlowNormal (its
	// MAC and port), FlowSniffer (perftest --sniffer: a copy of every
	// frame of the port) or FlowAllDefault (--promiscuous: every frame
	// no normal rule took). Frames of other sizes than the test's are
	// then counted as strays, not as the client's.
	RuleType verbsio.FlowType
	// Flows is how many flows the client sends (perftest --flows): flow
	// i uses source and destination ports +i; FlowsBurst frames go to one
	// flow before the next (--flows_burst). The server steers all of
	// them to its QP.
	Flows, FlowsBurst int
	// Multicast (raw-bw, perftest --raw_mcast) sends to an IPv4 multicast
	// group: Frame.DstIP is the group on both sides and Frame.DstMAC its
	// MAC (MulticastMAC); the server's rule takes frames to that MAC
	// and its port instead of to its own MAC.
	Multicast bool
	// CompletionTimestamps (raw-lat) also measures every round trip from
	// the completion timestamps of the ping's send and the pong's receive,
	// in the device's clock: a second result per size, with Clock
	// "completion".
	CompletionTimestamps bool
	// BurstSize (raw-burst-lat; raw-bw with a software rate) is how many
	// frames the client posts at once (perftest --burst_size); 0 means
	// TxDepth.
	BurstSize int
	// MacFwd (raw-bw's server, perftest --mac_fwd) sends every frame of
	// the test's size it receives back out, from the receive buffer, its
	// MAC addresses swapped; the receive is posted again once that send
	// completed.
	MacFwd bool
	// ReplyEvery (raw-burst-lat, perftest --reply_every) is how many of
	// the client's frames the server takes per pong: it answers the
	// N-th, 2N-th, ... frame, and the client's samples are those frames'
	// round trips, from the post of the frame that asked to the pong's
	// arrival. Both sides must be given the same; 0 means 1.
	ReplyEvery int
	// RateMbps paces the client's frames to this rate, in Mb/s of
	// frames: raw-burst-lat and raw-bw space bursts of BurstSize frames
	// in software (perftest --rate_limit_type SW), or with HWPacing
	// (perftest --rate_limit_type PP) the rate is the QP's packet pacing
	// rate.
	// 0 sends as fast as the queue allows.
	RateMbps float64
	HWPacing bool
	// TypicalPktSize is the QP pacing's typical packet size (perftest
	// --typical_pkt_size; QPAttr.TypicalPktSize; the burst is the
	// provider's default); 0: the largest frame.
	TypicalPktSize int
	// Percentiles of raw-lat's true statistics; nil: the defaults.
	Percentiles []float64
	// RecvSize is each receive buffer's size: the largest frame the
	// port may deliver (its MTU plus the Ethernet header and a tag), so
	// that a frame of another size than expected is seen and named
	// instead of failing its receive; 0 means the largest of Sizes.
	RecvSize int
	// FirstWait bounds the server's wait for the first frame of a size;
	// 0 means 10 × the stall timeout.
	FirstWait time.Duration
	// CQMod (raw-bw's client, perftest -Q) asks for a send completion
	// every CQMod-th frame (and the last), on every path; 0 means
	// perftest's rule (session.CQModFor): 100, or 1 above 8 KiB, capped
	// at TxDepth. CQModFor gives the one in use.
	CQMod int
	// MSS is the tso path's payload bytes per segment, on both sides:
	// every frame's payload (its size less its headers) must be a whole
	// number of segments, so that the server counts whole sends.
	MSS int
}

// Default returns perftest's defaults for raw test t: one size of 64
// bytes, 1000 iterations, tx depth 128 (raw-bw) or 1 (raw-lat), rx depth
// 512, UDP, one flow.
func Default(t session.Test) Config {
	return Config{Config: session.Default(t), Flows: 1, FlowsBurst: 1}
}

// Check reports every problem with c, as session.Problems of
// FieldErrors; nil if there is none.
func (c *Config) Check() error {
	var ps session.Problems
	t := c.Test
	if t != session.RawBW && t != session.RawLat && t != session.RawBurstLat {
		ps.AddField(session.NewFieldError("Test", int(t), "not one of rperf's raw tests (raw-bw, raw-lat, raw-burst-lat)"))
		return ps.Err()
	}
	if len(c.Sizes) == 0 {
		ps.AddField(session.NewFieldError("Sizes", c.Sizes, "no frame size"))
	}
	h := c.Frame.HeaderLen()
	for _, s := range c.Sizes {
		if s < session.MinRawSize || s < h {
			ps.AddField(session.NewFieldError("Sizes", s, "a frame is at least %d bytes (the Ethernet minimum without FCS, and this frame's %d bytes of headers)", max(session.MinRawSize, h), h).
				WithFix("use a larger size"))
			break
		}
		if c.Path != sendpath.TSO && s > MaxFrame {
			ps.AddField(session.NewFieldError("Sizes", s, "frames larger than %d bytes are refused (jumbo MTU)", MaxFrame).WithFix("use a smaller size"))
			break
		}
	}
	c.checkPath(&ps)
	switch {
	case c.Duration < 0:
		ps.AddField(session.NewFieldError("Duration", c.Duration, "the duration cannot be negative"))
	case c.Duration > 0 && t == session.RawBurstLat:
		ps.AddField(session.NewFieldError("Duration", c.Duration, "raw-burst-lat runs a number of frames, not for a duration").WithFix("use {Iterations}"))
	case c.Duration > 0:
	case c.Iterations < session.MinIterations:
		ps.AddField(session.NewFieldError("Iterations", c.Iterations, "at least %d iterations are needed", session.MinIterations))
	}
	if c.Warmup < 0 {
		ps.AddField(session.NewFieldError("Warmup", c.Warmup, "the warm-up cannot be negative"))
	}
	ps.Add(session.CheckTxDepth(c.TxDepth))
	ps.Add(session.CheckRxDepth(c.RxDepth))
	if c.CQMod != 0 {
		ps.Add(session.CheckCQMod(c.CQMod))
		if t != session.RawBW || c.Server {
			ps.AddField(session.NewFieldError("CQMod", c.CQMod, "only raw-bw's client moderates its send completions"))
		}
	}
	f := &c.Frame
	if !f.SrcIP.IsValid() || !f.DstIP.IsValid() || f.SrcIP.Is4() != f.DstIP.Is4() {
		ps.AddField(session.NewFieldError("Frame", f.SrcIP, "source %v and destination %v must be two IPv4 or two IPv6 addresses", f.SrcIP, f.DstIP).
			WithFix("give both {SrcIP} and {DstIP} of one family"))
	}
	if f.DstMAC == ([6]byte{}) {
		ps.AddField(session.NewFieldError("DstMAC", "00:00:00:00:00:00", "the peer's MAC address is needed: raw frames carry it").WithFix("give the peer's MAC address"))
	}
	if f.SrcPort == 0 || f.DstPort == 0 {
		ps.AddField(session.NewFieldError("Ports", [2]uint16{f.SrcPort, f.DstPort}, "UDP and TCP port 0 is reserved").WithFix("use ports 1 to 65535"))
	}
	if c.Flows < 1 || c.Flows > MaxFlows || int(f.SrcPort)+c.Flows > 0x10000 || int(f.DstPort)+c.Flows > 0x10000 {
		ps.AddField(session.NewFieldError("Flows", c.Flows, "flows must be 1 to %d, and the ports plus the flows must stay within 65535", MaxFlows))
	}
	if c.FlowsBurst < 1 {
		ps.AddField(session.NewFieldError("FlowsBurst", c.FlowsBurst, "at least one frame per flow burst"))
	}
	if c.VLANPCPInvalid() {
		ps.AddField(session.NewFieldError("VLANPCP", f.VLANPCP, "a VLAN priority is 0 to 7, or 8 for another priority per frame"))
	}
	if msg, fix := EtherTypeProblem(f.EtherType); msg != "" {
		ps.AddField(session.NewFieldError("EtherType", f.EtherType, "%s", msg).WithFix("%s", fix))
	}
	if largest, _ := c.Segments(c.MaxSize()); c.RecvSize != 0 && c.RecvSize < largest {
		ps.AddField(session.NewFieldError("RecvSize", c.RecvSize, "receive buffers smaller than the largest frame (%d bytes)", largest))
	}
	if c.ReplyEvery < 0 || c.ReplyEvery > c.Warmup+c.Iterations && c.Iterations >= session.MinIterations {
		ps.AddField(session.NewFieldError("ReplyEvery", c.ReplyEvery, "a pong every 1 to {Iterations=} frames (0: every frame)").WithValue("Iterations", c.Warmup+c.Iterations))
	}
	if c.MacFwd && (c.Test != session.RawBW || !c.Server) {
		ps.AddField(session.NewFieldError("MacFwd", c.MacFwd, "only raw-bw's server forwards the frames it receives"))
	}
	if c.ReplyEvery > 1 && c.Test != session.RawBurstLat {
		ps.AddField(session.NewFieldError("ReplyEvery", c.ReplyEvery, "only raw-burst-lat's server answers every N frames"))
	}
	if c.BurstSize < 0 || c.BurstSize > c.TxDepth {
		ps.AddField(session.NewFieldError("BurstSize", c.BurstSize, "a burst is 1 to {TxDepth=} frames (0: the tx depth)").WithValue("TxDepth", c.TxDepth))
	}
	switch {
	case c.RateMbps < 0:
		ps.AddField(session.NewFieldError("RateMbps", c.RateMbps, "a rate cannot be negative"))
	case c.BurstSize > 0 && t == session.RawLat:
		ps.AddField(session.NewFieldError("BurstSize", c.BurstSize, "bursts belong to raw-burst-lat and raw-bw's software rate"))
	case c.BurstSize > 0 && t == session.RawBW && (c.RateMbps == 0 || c.HWPacing):
		ps.AddField(session.NewFieldError("BurstSize", c.BurstSize, "raw-bw's bursts space a software rate").WithFix("give {RateMbps} without {HWPacing}"))
	case t == session.RawLat && (c.RateMbps > 0 || c.HWPacing):
		ps.AddField(session.NewFieldError("RateMbps", c.RateMbps, "raw-lat sends one frame at a time: a rate does not apply"))
	}
	if c.HWPacing && c.RateMbps == 0 {
		ps.AddField(session.NewFieldError("HWPacing", true, "hardware pacing needs a rate").WithFix("give {RateMbps}"))
	}
	if r := c.RuleType; r != verbsio.FlowNormal && r != verbsio.FlowSniffer && r != verbsio.FlowAllDefault {
		ps.AddField(session.NewFieldError("RuleType", r, "the server's rule is normal, sniffer or all-default"))
	}
	if c.Multicast {
		switch {
		case t != session.RawBW:
			ps.AddField(session.NewFieldError("Multicast", true, "multicast is one-way traffic: raw-bw only"))
		case !f.DstIP.Is4() || !f.DstIP.IsMulticast():
			ps.AddField(session.NewFieldError("Multicast", f.DstIP, "the destination is not an IPv4 multicast group (224.0.0.0/4)").WithFix("give the group as {DstIP}"))
		case f.DstMAC != MulticastMAC(f.DstIP):
			ps.AddField(session.NewFieldError("Multicast", f.DstMAC, "the destination MAC is not the group's (MulticastMAC)").WithFix("set {DstMAC} to MulticastMAC({DstIP})"))
		}
	}
	if c.CompletionTimestamps && t != session.RawLat {
		ps.AddField(session.NewFieldError("CompletionTimestamps", true, "completion timestamps time round trips: raw-lat only"))
	}
	return ps.Err()
}

// checkPath adds the problems of the send path and the MSS to ps.
func (c *Config) checkPath(ps *session.Problems) {
	t, h := c.Test, c.Frame.HeaderLen()
	switch c.Path {
	case sendpath.Generic, sendpath.Inline:
	case sendpath.Burst:
		if t != session.RawBW && t != session.RawBurstLat {
			ps.AddField(session.NewFieldError("Path", c.Path, "the burst path stages a batch of frames and flushes it once; %s sends one frame at a time", t.Command()).WithFix("use raw-bw or raw-burst-lat"))
		}
	case sendpath.TSO:
		switch {
		case t != session.RawBW:
			ps.AddField(session.NewFieldError("Path", c.Path, "TSO cuts a stream of large sends; %s sends single frames", t.Command()).WithFix("use raw-bw"))
		case c.MSS < 1 || h+c.MSS > MaxFrame:
			ps.AddField(session.NewFieldError("MSS", c.MSS, "a segment's payload is 1 to %d bytes (its %d bytes of headers plus the MSS within %d)", MaxFrame-h, h, MaxFrame))
		case len(c.Sizes) > 1:
			ps.AddField(session.NewFieldError("Sizes", len(c.Sizes), "with TSO every size arrives as segments of one size, which the server cannot tell apart").WithFix("give one size"))
		case c.Frame.EtherType != 0 && c.Frame.EtherType != c.Frame.ipEtherType():
			ps.AddField(session.NewFieldError("EtherType", c.Frame.EtherType, "TSO cuts IP frames; 0x%04x frames are not", c.Frame.EtherType).WithFix("drop the EtherType"))
		case c.MacFwd:
			ps.AddField(session.NewFieldError("MacFwd", true, "the server forwards frames, not TSO sends").WithFix("use another path"))
		}
		for _, s := range c.Sizes {
			if p := s - h; p < c.MSS || c.MSS > 0 && p%c.MSS != 0 || s > MaxTSOFrame {
				k := max(p/max(c.MSS, 1), 1)
				ps.AddField(session.NewFieldError("Sizes", s, "a TSO send is its %d bytes of headers and a whole number of %d-byte segments, at most %d bytes", h, c.MSS, MaxTSOFrame).
					WithFix("use %d (%d segments)", h+k*max(c.MSS, 1), k))
				break
			}
		}
	default:
		ps.AddField(session.NewFieldError("Path", c.Path, "the raw tests send on the generic, burst, inline and tso paths").WithFix("use one of them"))
	}
	if c.MSS != 0 && c.Path != sendpath.TSO {
		ps.AddField(session.NewFieldError("MSS", c.MSS, "an MSS belongs to the tso path").WithFix("use the tso path"))
	}
}

// Segments returns what the server receives of a tso send of size bytes:
// segments of frame bytes, per of them. Other paths: the frame itself.
func (c *Config) Segments(size int) (frame, per int) {
	if c.Path != sendpath.TSO || c.MSS < 1 {
		return size, 1
	}
	h := c.Frame.HeaderLen()
	return h + c.MSS, (size - h) / c.MSS
}

// MulticastMAC is the Ethernet address of IPv4 multicast group ip
// (RFC 1112: 01:00:5e and the group's low 23 bits).
func MulticastMAC(ip netip.Addr) [6]byte {
	a := ip.As4()
	return [6]byte{0x01, 0x00, 0x5e, a[1] & 0x7f, a[2], a[3]}
}

// VLANPCPInvalid reports a VLAN priority outside 0..7 that is not
// VLANPCPRotate.
func (c *Config) VLANPCPInvalid() bool { return c.Frame.VLAN && c.Frame.VLANPCP > VLANPCPRotate }

// Limits of the raw tests.
const (
	MaxFrame = 9600 // perftest's RawEth MTU limit
	// MaxTSOFrame is the largest tso send, headers included: an IP
	// packet's 64 KiB behind the Ethernet header.
	MaxTSOFrame = 14 + 65535
	MaxFlows    = 1024
)

// running reports whether a loop that did i iterations goes on: to
// Warmup+Iterations, or in duration mode until end (a clock.Now time).
func (c *Config) running(i int, end int64) bool {
	if c.Duration > 0 {
		return clock.Now() < end
	}
	return i < c.Warmup+c.Iterations
}

// CQModFor is the CQ moderation raw-bw's client uses for sends of size
// bytes: CQMod, or perftest's rule for 0, capped at TxDepth.
func (c *Config) CQModFor(size int) int { return session.CQModFor(c.CQMod, c.TxDepth, size) }

// replyEvery is ReplyEvery with its default.
func (c *Config) replyEvery() int { return max(c.ReplyEvery, 1) }

func (c *Config) stall() time.Duration { return c.Link.Stall() }

func (c *Config) firstWait() time.Duration {
	if c.FirstWait > 0 {
		return c.FirstWait
	}
	return 10 * c.stall()
}

// EtherTypeProblem says what is wrong with et as a frame's own EtherType
// (FrameSpec.EtherType) and how to fix it; "" when nothing is (0 means
// the IP family's).
func EtherTypeProblem(et uint16) (msg, fix string) {
	switch {
	case et == 0:
	case et < 0x0600:
		return fmt.Sprintf("0x%04x is an 802.3 length, not an EtherType", et), "give 0x0600 or more"
	case et == 0x8100 || et == 0x88a8:
		return fmt.Sprintf("0x%04x is a VLAN tag's TPID", et), "add the tag with the VLAN option instead"
	}
	return "", ""
}
