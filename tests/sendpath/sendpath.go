// Package sendpath names the send paths rperf's tests compare, says which
// applies to which test and what each needs of a device (docs/rperf.md,
// "Send paths"):
//
//   - generic: QP.PostSend with a chain of work requests, CQ.Poll;
//   - burst: the qp_burst family (SendPending for each SEND of a batch,
//     one SendFlush), receives reposted with RecvBurst, and the sender's
//     completions counted with the cq_poll family's PollCount;
//   - inline: every message inline (payload copied into the WQE);
//   - dm: the message buffers in device memory (set up by the session);
//   - tso: the kernel cuts messages into packets (UDP GSO), where a
//     comparison has every other path's engine cut them, one datagram per
//     packet (alone, the other paths leave it to the provider);
//   - dv: direct verbs, WQEs written into the QP's send ring and one
//     doorbell per batch, completions read from the CQ's ring.
//
// In a comparison every path differs from generic in that one respect,
// so that a ratio to generic measures it alone. The session posts by them
// (session.Session.OpenPath: a Sender, Completions and a Receiver per
// path, none of which allocates, locks or logs per operation).
package sendpath

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rperf/rperf/verbsio"
)

// Path is a send path.
type Path uint8

// The send paths, in the order tables list them.
const (
	Generic Path = iota
	Burst
	Inline
	DM
	TSO
	DV
)

var names = [...]string{"generic", "burst", "inline", "dm", "tso", "dv"}

// All lists every path.
var All = []Path{Generic, Burst, Inline, DM, TSO, DV}

// String returns the path's name, as DeviceAttr.SendPaths and the reports
// spell it.
func (p Path) String() string {
	if int(p) < len(names) {
		return names[p]
	}
	return fmt.Sprintf("Path(%d)", p)
}

// Parse returns the path named s (case-insensitive).
func Parse(s string) (Path, error) {
	for i, n := range names {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Path(i), nil
		}
	}
	return 0, fmt.Errorf("%q is not a send path; use %s", s, strings.Join(names[:], ", "))
}

// Test is what Applies needs to know of a test.
type Test struct {
	// Op is the operation the test posts: OpSend, OpRDMAWrite,
	// OpRDMARead or an atomic.
	Op        verbsio.Opcode
	Bandwidth bool // a bandwidth test (else latency)
	Type      verbsio.QPType
}

// Applies returns nil if path p applies to test t, else an error saying
// why not, in the test's terms.
func Applies(p Path, t Test) error {
	rw := t.Op == verbsio.OpSend || t.Op == verbsio.OpRDMAWrite
	switch p {
	case Generic, DM:
		return nil
	case Burst:
		if t.Op != verbsio.OpSend {
			return errors.New("the qp_burst family posts SENDs only: use it with send-lat or send-bw")
		}
		if t.Type != verbsio.QPTypeRC && t.Type != verbsio.QPTypeUC {
			return fmt.Errorf("the qp_burst family binds to RC and UC QPs, not %s", t.Type)
		}
	case Inline:
		if !rw {
			return errors.New("only SENDs and RDMA WRITEs carry inline data: use it with the send and write tests")
		}
	case TSO:
		if !rw || !t.Bandwidth {
			return errors.New("segmentation matters for streams of large messages: use it with send-bw or write-bw")
		}
	case DV:
		if !rw {
			return errors.New("rperf writes SEND and RDMA WRITE WQEs: use it with the send and write tests")
		}
		if t.Type == verbsio.QPTypeUD {
			return errors.New("a dv WQE addresses a UD peer by the provider's address handle number, which rperf does not use: run it over RC or UC")
		}
	default:
		return fmt.Errorf("unknown send path %d", p)
	}
	return nil
}

// Supported returns the paths the device offers (DeviceAttr.SendPaths),
// in the order of All. A device that lists none offers generic.
func Supported(attr verbsio.DeviceAttr) []Path {
	var ps []Path
	for _, p := range All {
		if slices.Contains(attr.SendPaths, p.String()) {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		ps = []Path{Generic}
	}
	return ps
}

// Names joins paths' names with ", ".
func Names(ps []Path) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// CheckDevice returns an error if the device does not offer p; it names
// the paths the device offers.
func CheckDevice(p Path, attr verbsio.DeviceAttr, dev string) error {
	sup := Supported(attr)
	if slices.Contains(sup, p) {
		return nil
	}
	return fmt.Errorf("%s does not support the %s send path; it supports %s", dev, p, Names(sup))
}

// CheckOn checks, before a session opens on dev, that dev offers path p
// (CheckDevice) and sends inline the inline bytes the QPs will ask for
// (on the inline path, every message). The generic path asks nothing of
// the device.
func CheckOn(dev *verbsio.Context, p Path, inline int) error {
	if p == Generic {
		return nil
	}
	attr, err := dev.QueryDevice()
	if err != nil {
		return err
	}
	if err := CheckDevice(p, attr, dev.Device.Name); err != nil {
		return err
	}
	if inline > attr.MaxInlineData {
		return fmt.Errorf("the inline path sends every message inline: %d bytes is more than %s's max_inline_data %d", inline, dev.Device.Name, attr.MaxInlineData)
	}
	return nil
}

// InlineSize is the inline size the QPs of a test on path p ask for,
// given the test's own (inline) and its largest message: none on the dm
// path, every message on the inline path.
func (p Path) InlineSize(inline, maxSize int) int {
	switch p {
	case DM:
		return 0
	case Inline:
		return max(inline, maxSize)
	}
	return inline
}

// QPSegmenter is the segmenter the QPs of a test on path p ask for: seg
// where the test sets one, else the path's own (Segmenter).
func (p Path) QPSegmenter(seg verbsio.Segmenter) verbsio.Segmenter {
	if seg != verbsio.SegmentDefault {
		return seg
	}
	return p.Segmenter()
}

// Segmenter is the segmenter a QP of path p asks for by itself: the
// kernel for tso, the provider's choice for every other path. A
// comparison asks the engine for the others (see Config.Segmenter in
// tests/latency and tests/bw), so that only tso differs from generic in
// who cuts the packets.
func (p Path) Segmenter() verbsio.Segmenter {
	if p == TSO {
		return verbsio.SegmentKernel
	}
	return verbsio.SegmentDefault
}

// SegmenterName says who cut the packets of a QP that asked for seg on a
// device of the built-in engine's packet fabrics: "kernel" or "engine",
// and for the provider's choice which one that was (the kernel where the
// device offers TSO, DeviceAttr.TSO); "" where no segmenter applies (the
// shm fabric moves no packets; hardware segments as it does).
func SegmenterName(seg verbsio.Segmenter, d verbsio.DeviceInfo, attr verbsio.DeviceAttr) string {
	if !d.Segments() {
		return ""
	}
	if seg != verbsio.SegmentDefault {
		return seg.String()
	}
	if attr.TSO.MaxTSO > 0 {
		return "kernel (the provider's default)"
	}
	return "engine (the provider's default)"
}
