package faultrelay

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/internal/testsupport/netns"
)

// WireConfig configures a Wire.
type WireConfig struct {
	// AtoB and BtoA are the faults of each direction. Faults.CorruptFrom
	// and CorruptTo are offsets into the UDP payload.
	AtoB, BtoA Faults
	// Seed fixes the random decisions of both directions.
	Seed uint64
	// Ports, when not empty, limits faults to UDP datagrams whose source
	// or destination port is listed (4791 for RoCEv2); other datagrams
	// cross untouched and count as Passed.
	Ports []uint16
	// MaxDatagrams, when positive, caps the UDP datagrams accepted, both
	// directions together; later ones are counted as Discarded and not
	// forwarded. Non-UDP frames always cross.
	MaxDatagrams uint64
	// MaxDuration bounds the wire's life: it closes itself, cutting A from
	// B, when it elapses. Zero means DefaultMaxDuration.
	MaxDuration time.Duration
}

// Wire forwards Ethernet frames between the two links of a middle namespace
// (see netns.Options.Middle), injecting faults into UDP datagrams while
// leaving every header as the sender wrote it. Until a Wire runs, and after
// it closes, A and B cannot reach each other.
type Wire struct {
	runner
	files [2]*os.File // [AtoB]: the link facing A, [BtoA]: the link facing B
	ports map[uint16]bool
}

// NewWire starts forwarding between mid.LinkA and mid.LinkB inside mid.NS.
// mid must not have a bridge (it would forward every frame a second time).
func NewWire(mid *netns.Middle, cfg WireConfig) (*Wire, error) {
	if mid == nil {
		return nil, errors.New("faultrelay: new wire: no middle namespace (create the pair with netns.Options{Middle: true})")
	}
	if mid.Bridge != "" {
		return nil, fmt.Errorf("faultrelay: new wire: middle namespace %s bridges its links already", mid.NS)
	}
	if err := validateFaults("new wire", &cfg.AtoB, &cfg.BtoA, cfg.MaxDuration); err != nil {
		return nil, err
	}
	w := &Wire{}
	w.max = cfg.MaxDatagrams
	if len(cfg.Ports) > 0 {
		w.ports = map[uint16]bool{}
		for _, p := range cfg.Ports {
			w.ports[p] = true
		}
	}
	for d, link := range []string{mid.LinkA, mid.LinkB} {
		f, err := openPacket(mid.NS, link)
		if err != nil {
			w.closeFiles()
			return nil, fmt.Errorf("faultrelay: new wire: %w", err)
		}
		w.files[d] = f
		w.closers = append(w.closers, f)
	}
	for d, f := range []Faults{cfg.AtoB, cfg.BtoA} {
		out := w.files[1-d]
		p := newPipe(cfg.Seed, Direction(d), f, func(b []byte) error {
			_, err := out.Write(b)
			return err
		})
		p.fixChecksum = fixUDPChecksum
		w.pipes[d] = p
	}
	w.start(cfg.MaxDuration, w.serve)
	return w, nil
}

func (w *Wire) closeFiles() {
	for _, f := range w.files {
		if f != nil {
			f.Close()
		}
	}
}

// openPacket opens an AF_PACKET socket on link inside namespace ns that
// reads every frame the link receives (not the ones it sends) with a
// virtio_net_hdr in front, and writes frames out of the link.
func openPacket(ns, link string) (*os.File, error) {
	var file *os.File
	err := netns.Run(ns, func() error {
		ifc, err := net.InterfaceByName(link)
		if err != nil {
			return err
		}
		// Protocol 0: nothing arrives until bind names the link.
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("socket: %w", err)
		}
		opts := []struct {
			level, opt, val int
			name            string
		}{
			{unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1, "PACKET_VNET_HDR"},
			{unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING"},
			{unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8 << 20, "SO_RCVBUFFORCE"},
			{unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8 << 20, "SO_SNDBUFFORCE"},
		}
		for _, o := range opts {
			if err := unix.SetsockoptInt(fd, o.level, o.opt, o.val); err != nil {
				unix.Close(fd)
				return fmt.Errorf("setsockopt %s: %w", o.name, err)
			}
		}
		sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}
		if err := unix.Bind(fd, sa); err != nil {
			unix.Close(fd)
			return fmt.Errorf("bind: %w", err)
		}
		file = os.NewFile(uintptr(fd), "packet:"+ns+":"+link)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("packet socket on %s in %s: %w", link, ns, err)
	}
	return file, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// serve runs direction d until the wire closes.
func (w *Wire) serve(d Direction) {
	f, p := w.files[d], w.pipes[d]
	rc, err := f.SyscallConn()
	if err != nil {
		p.c.errors.Add(1)
		return
	}
	buf := make([]byte, vnetHdrLen+ethHdrLen+1<<16)
	w.loop(p, f.SetReadDeadline, func() error {
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, rerr = unix.Read(int(fd), buf)
			return rerr != unix.EAGAIN
		})
		if err != nil {
			return err
		}
		if rerr != nil {
			return rerr
		}
		now := time.Now()
		w.handle(p, buf[:n], now)
		p.flush(now)
		return nil
	})
}

// handle passes one frame read from a link (virtio_net_hdr included) to p.
func (w *Wire) handle(p *pipe, raw []byte, now time.Time) {
	if len(raw) < vnetHdrLen+ethHdrLen {
		p.c.errors.Add(1)
		return
	}
	h := parseVnetHdr(raw)
	frame := raw[vnetHdrLen:]
	u, ok := parseUDPFrame(frame)
	if !ok {
		// Not UDP: forwarded as is, with its header, so that the kernel
		// still segments and checksums it as the sender asked.
		p.ingest(now, raw, 0, 0, classOther)
		return
	}
	cl := classFault
	if w.ports != nil && !w.ports[u.srcPort] && !w.ports[u.dstPort] {
		cl = classPass
	}
	if h.gsoType != vnetGSONone {
		if h.gsoType&^vnetGSOECN != vnetGSOUDPL4 {
			p.ingest(now, raw, 0, 0, classOther)
			return
		}
		segs, err := segmentUDP(frame, u, int(h.gsoSize))
		if err != nil {
			p.c.errors.Add(1)
			return
		}
		for _, s := range segs {
			if w.admit(p) {
				su, _ := parseUDPFrame(s[vnetHdrLen:])
				p.ingest(now, s, vnetHdrLen+su.payload, su.end-su.payload, cl)
			}
		}
		return
	}
	if !w.admit(p) {
		return
	}
	if h.flags&vnetNeedsCsum != 0 {
		// The sender left the checksum to offload: complete it here, so
		// that corrupting the payload afterwards breaks it, as it would
		// on a wire.
		setUDPChecksum(frame, u)
	}
	clear(raw[:vnetHdrLen])
	p.ingest(now, raw, vnetHdrLen+u.payload, u.end-u.payload, cl)
}

// fixUDPChecksum recomputes the UDP checksum of a corrupted frame (with its
// virtio_net_hdr in front), leaving an IPv4 "no checksum" 0 alone.
func fixUDPChecksum(b []byte) {
	f := b[vnetHdrLen:]
	u, ok := parseUDPFrame(f)
	if !ok || (!u.v6 && f[u.l4+6] == 0 && f[u.l4+7] == 0) {
		return
	}
	setUDPChecksum(f, u)
}

// SetFaults replaces the faults of direction d from the next datagram on;
// the MaxFaults budget starts afresh and the random stream continues.
func (w *Wire) SetFaults(d Direction, f Faults) error { return w.setFaults("set faults", d, f) }

// Stats returns a snapshot of both directions' counters.
func (w *Wire) Stats() Stats { return w.stats() }

// Done is closed when the wire has stopped, by Close or by MaxDuration.
func (w *Wire) Done() <-chan struct{} { return w.done }

// Close stops forwarding, which cuts A from B, closes the sockets and waits
// for the goroutines. Frames still delayed or held are dropped. It is safe
// to call more than once.
func (w *Wire) Close() error { return w.close() }
