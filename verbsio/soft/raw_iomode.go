package soft

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/afpacket"
	"golang.org/x/sys/unix"
)

// rawIO is how a raw port moves frames (verbsio.OpenOptions.RawIO): the
// receive ring's layout, the transmit path and PACKET_QDISC_BYPASS. The
// zero value is the default: a TPACKET_V2 ring (a lone frame is handed
// over at once: latency) and sendmmsg, through the qdisc.
type rawIO struct {
	rx     afpacket.RingVersion // 0: afpacket.RingV2
	tx     afpacket.TXMode
	bypass bool
}

// rawIOWords are the words of OpenOptions.RawIO, for errors and help.
const rawIOWords = `"v2" or "v3" (receive ring), "sendmmsg", "txring" or "xdp" (transmit), "bypass" or "nobypass" (qdisc bypass), or "default"`

// parseRawIO reads OpenOptions.RawIO: comma-separated words, at most one
// of each group; "" and "default" are the default.
func parseRawIO(s string) (rawIO, error) {
	var io rawIO
	var rxSet, txSet, bypassSet bool
	set := func(seen *bool, w string) error {
		if *seen {
			return fmt.Errorf("raw I/O %q names %q's choice twice: give one receive ring, one transmit path and one bypass setting", s, w)
		}
		*seen = true
		return nil
	}
	for _, w := range strings.Split(s, ",") {
		w = strings.ToLower(strings.TrimSpace(w))
		var err error
		switch w {
		case "", "default":
			continue
		case "v2", "v3":
			err = set(&rxSet, w)
			io.rx = map[string]afpacket.RingVersion{"v2": afpacket.RingV2, "v3": afpacket.RingV3}[w]
		case "sendmmsg", "txring", "xdp":
			err = set(&txSet, w)
			io.tx = map[string]afpacket.TXMode{"sendmmsg": afpacket.TXSendmmsg, "txring": afpacket.TXRing, "xdp": afpacket.TXXDP}[w]
		case "bypass", "nobypass":
			err = set(&bypassSet, w)
			io.bypass = w == "bypass"
		default:
			return rawIO{}, fmt.Errorf("unknown raw I/O word %q in %q: want %s, separated by commas", w, s, rawIOWords)
		}
		if err != nil {
			return rawIO{}, err
		}
	}
	if io.rx == 0 {
		io.rx = afpacket.RingV2
	}
	if io.tx == afpacket.TXXDP && io.bypass {
		return rawIO{}, fmt.Errorf("raw I/O %q: AF_XDP (xdp) sends past the qdisc always; bypass applies to the packet socket paths (sendmmsg, txring)", s)
	}
	return io, nil
}

// String is the choice in OpenOptions.RawIO's words, all three groups.
func (io rawIO) String() string {
	b := "nobypass"
	if io.bypass {
		b = "bypass"
	}
	return fmt.Sprintf("v%d,%s,%s", io.rx, map[afpacket.TXMode]string{afpacket.TXSendmmsg: "sendmmsg", afpacket.TXRing: "txring", afpacket.TXXDP: "xdp"}[io.tx], b)
}

// openRX opens the port's receive ring as io says, slots (V2) of
// frameSize bytes.
func (io rawIO) openRX(name, netdev string, frameSize int) (*afpacket.RX, error) {
	o := afpacket.RXOptions{Version: io.rx, FrameSize: frameSize, Frames: max(256, (4<<20)/frameSize)}
	if io.rx == afpacket.RingV3 {
		// 4 MiB in all, as V2, in small blocks: a block the 1 ms timer
		// retires holds what came in that millisecond, however little, so
		// under sparse traffic the ring holds as many milliseconds as it
		// has blocks while the application does not poll (512 here; 16
		// blocks of 256 KiB dropped most of a 33 ms paced burst, 128 of
		// 32 KiB a third of a 360 ms one).
		o.BlockSize = max(8<<10, 2*frameSize)
		o.Blocks = max(4, (4<<20)/o.BlockSize)
	}
	rx, err := afpacket.OpenRX(netdev, o)
	if err != nil {
		if errors.Is(err, afpacket.ErrNoCapNetRaw) {
			return nil, errNoCapNetRaw(name)
		}
		return nil, verbsio.Errorf("open_device", unix.EIO, "%s: receive ring (TPACKET_V%d): %v", name, io.rx, err)
	}
	return rx, nil
}

// openTX opens the port's send socket as io says; frameSize bounds a
// frame (the ring's slots, AF_XDP's chunks).
func (io rawIO) openTX(name, netdev string, frameSize int) (*afpacket.TX, error) {
	o := afpacket.TXOptions{Mode: io.tx, Batch: rawTXFrames, QdiscBypass: io.bypass}
	switch io.tx {
	case afpacket.TXRing:
		o.FrameSize, o.Frames = frameSize, 2*rawTXFrames
	case afpacket.TXXDP:
		if page := unix.Getpagesize(); frameSize > page {
			return nil, verbsio.Errorf("open_device", unix.EINVAL, "%s: raw I/O xdp: the device's frames (%d-byte slots for its MTU) exceed an AF_XDP chunk (at most the page size, %d): use sendmmsg or txring", name, frameSize, page)
		}
		o.FrameSize = frameSize
	}
	tx, err := afpacket.OpenTX(netdev, o)
	switch {
	case err == nil:
		return tx, nil
	case errors.Is(err, afpacket.ErrNoCapNetRaw):
		return nil, errNoCapNetRaw(name)
	case io.tx == afpacket.TXXDP && errors.Is(err, unix.EBUSY):
		return nil, verbsio.Errorf("open_device", unix.EBUSY, "%s: raw I/O xdp: queue 0 of %s already has an AF_XDP socket (one per queue, from any process: another raw context on this port?): %v; open with sendmmsg or txring", name, netdev, err)
	case io.tx == afpacket.TXXDP:
		return nil, verbsio.Errorf("open_device", unix.Errno(errnoOf(err)), "%s: raw I/O xdp: the kernel or %s's driver refused an AF_XDP socket (copy mode, queue 0): %v; open with sendmmsg or txring, which every device takes", name, netdev, err)
	case io.bypass && errors.Is(err, unix.ENOPROTOOPT):
		return nil, verbsio.Errorf("open_device", unix.ENOPROTOOPT, "%s: raw I/O bypass: the kernel refused PACKET_QDISC_BYPASS: %v; open with nobypass", name, err)
	}
	return nil, verbsio.Errorf("open_device", unix.EIO, "%s: send socket (%s): %v", name, io.tx, err)
}

// RawIO reports how a raw context's port moves frames, in
// OpenOptions.RawIO's words ("v2,sendmmsg,nobypass"). Other contexts
// answer "".
func (c *Context) RawIO() string {
	f, ok := c.fab.(*rawFabric)
	if !ok {
		return ""
	}
	return f.io.String()
}
