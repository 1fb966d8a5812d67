package soft

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/dv"
	"github.com/rperf/rperf/verbsio/soft/internal/afpacket"
	"github.com/rperf/rperf/verbsio/soft/internal/netpkt"
	"github.com/rperf/rperf/verbsio/soft/internal/ring"
	"github.com/rperf/rperf/verbsio/soft/internal/udp"
	"golang.org/x/sys/unix"
)

// The raw fabric: RAW_PACKET QPs on a network device, as a NIC's raw
// Ethernet queues are. A context is bound to one netdev (raw_<netdev>)
// and owns one packet socket receive ring on it, one send socket, one
// with a virtio-net header for the kernel's segmentation, and the port's
// steering table. The application writes whole frames; the engine checks
// their length, computes checksums when asked (SendIPCsum), cuts TSO sends
// and paces QPs. Received frames are steered per frame by the table
// (netpkt.Table.Match) to the QPs whose flows they match; the kernel's
// socket filter, compiled from the union of the rules, keeps the frames
// no rule wants out of the ring. Posting sends; polling receives (CQ.Poll
// and CQ.Wait, or background progress). docs/raw.md has the design and
// the measurements.

// RawPrefix starts the names of raw-fabric devices: "raw_" + netdev.
const RawPrefix = "raw_"

// Raw fabric limits.
const (
	rawMaxTSO    = 256 << 10 // payload bytes of one TSO send
	rawMaxTSOHdr = 256       // header bytes of one TSO send (VXLAN over IPv6 with TCP options fits)
	rawRecvBatch = 256       // frames one progress call takes from the ring at most
	rawTXArena   = 1 << 20   // bytes of frames built by the engine per system call at most
	rawTXFrames  = 256       // frames per system call at most
)

// Device capability bits (IBV_DEVICE_*) of raw devices.
const (
	devCapRawIPCsum           = 1 << 26
	devCapManagedFlowSteering = 1 << 29
)

// rawProfile is what a raw device presents itself as.
type rawProfile uint8

const (
	rawPlain rawProfile = iota // the engine's raw device
	rawMana                    // manadv(7): raw_mana.go
)

// rawCounters are the raw fabric's counters (Context.Counters).
type rawCounters struct {
	txFrames, txBytes, txErrors, txTSO, txTSOKernel,
	rxFrames, rxBytes, rxDelivered, rxSteerDropped, rxUnmatched, rxNoWQE,
	rxTruncated, rxRingDrops, rxCsumOK, rxTSHardware, rxTSSoftware, rxTSRing,
	filterCompiles atomic.Uint64
}

var rawCounterNames = []string{
	"tx_frames", "tx_bytes", "tx_errors", "tx_tso_sends", "tx_tso_kernel",
	"rx_frames", "rx_bytes", "rx_delivered", "rx_steer_dropped", "rx_unmatched", "rx_no_wqe",
	"rx_truncated", "rx_ring_drops", "rx_csum_ok", "rx_ts_hardware", "rx_ts_software", "rx_ts_ring",
	"filter_compiles",
}

// rawNetdev is the device a raw context is bound to.
type rawNetdev struct {
	name  string
	index int
	mtu   int
	up    bool
	mac   [6]byte
	addrs []netip.Addr
}

// rawFabric is raw_<netdev>'s fabric.
type rawFabric struct {
	c         *Context
	dev       rawNetdev
	profile   rawProfile
	queryOnly bool
	io        rawIO      // the port's receive ring, transmit path and qdisc bypass
	netns     *udp.Netns // where the device was opened (the port lock is taken there)
	gids      []verbsio.GIDEntry

	// Who cuts TSO sends when a QP leaves it to the provider: the kernel
	// (GSO through the virtio-net header) where its segments reach the
	// wire as segments, else the engine (netpkt.TSO). segWhy says why.
	segKernel bool
	segWhy    string

	rx    *afpacket.RX
	tx    *afpacket.TX // frames, a batch per sendmmsg (a lone frame: send)
	gsoTX *afpacket.TX // large frames with a virtio-net header for the kernel to cut

	table  *netpkt.Table
	filter rawFilter
	flowMu sync.Mutex // guards the QPs' flow lists

	// Driven under the context's progress lock.
	hits    [64]netpkt.Hit
	rsges   [maxSGEs]ring.SGE
	tagBuf  []byte // a received frame with its stripped tag put back
	frames  [][]byte
	arena   []byte
	txStamp uint64 // the completion clock just before the last frames went to the kernel
	// stampTX: the send CQ of the QP whose doorbell is being rung stamps
	// its completions, so sendBatch reads the clock (else it costs a
	// clock read per frame on the one-frame generic path for nothing).
	stampTX bool
	off     int
	tso     netpkt.TSO
	scratch []byte // a TSO send gathered whole (rawMaxTSOHdr + rawMaxTSO)
	active  []*rawQP
	txErr   error // a send of the current doorbell failed

	cnt rawCounters
}

// rawFilter keeps the kernel's socket filter in step with the table:
// CreateFlow widens it at once (every frame passes, the table decides),
// progress narrows it again to the table's exact union at its next round,
// so a batch of insertions costs one compilation.
type rawFilter struct {
	gen      atomic.Uint64 // bumped by every table change
	mu       sync.Mutex    // serializes installing a filter
	compiled uint64        // the generation installed (under mu)
	wide     bool          // the pass-everything filter is installed (under mu)
	mode     atomic.Uint32 // netpkt.FilterMode installed, for reports
}

func rawDeviceName(netdev string) string { return RawPrefix + netdev }

// rawNetdevs lists the devices of the calling thread's namespace that are
// up and have an Ethernet address: one raw device each.
func rawNetdevs() []rawNetdev {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []rawNetdev
	for _, ifc := range ifs {
		if d, ok := rawNetdevOf(ifc); ok && d.up {
			out = append(out, d)
		}
	}
	return out
}

func rawNetdevOf(ifc net.Interface) (rawNetdev, bool) {
	if len(ifc.HardwareAddr) != 6 || ifc.Flags&net.FlagLoopback != 0 {
		return rawNetdev{}, false
	}
	d := rawNetdev{name: ifc.Name, index: ifc.Index, mtu: ifc.MTU, up: ifc.Flags&net.FlagUp != 0}
	copy(d.mac[:], ifc.HardwareAddr)
	if addrs, err := ifc.Addrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
					d.addrs = append(d.addrs, ip.Unmap())
				}
			}
		}
	}
	return d, true
}

func rawInfo(d rawNetdev) verbsio.DeviceInfo {
	return verbsio.DeviceInfo{Name: rawDeviceName(d.name), Provider: ProviderName, Fabric: "raw", Transport: "InfiniBand",
		NodeGUID: guidOf(udp.Netdev{HW: d.mac[:]}), Netdev: d.name, Ports: 1}
}

func rawDevices() []verbsio.DeviceInfo {
	var out []verbsio.DeviceInfo
	for _, d := range rawNetdevs() {
		out = append(out, rawInfo(d))
	}
	return out
}

// errNoCapNetRaw is opening a raw device without CAP_NET_RAW: one line
// naming the capability.
func errNoCapNetRaw(name string) error {
	return verbsio.Errorf("open_device", unix.EPERM, "%s: %v", name, afpacket.ErrNoCapNetRaw)
}

func openRaw(name string, o verbsio.OpenOptions) (*Context, error) {
	netdev := strings.TrimPrefix(name, RawPrefix)
	ifc, err := net.InterfaceByName(netdev)
	if err != nil {
		return nil, verbsio.Errorf("open_device", unix.ENODEV, "network device %s: %v (rdiag devices lists the devices)", netdev, err)
	}
	dev, ok := rawNetdevOf(*ifc)
	if !ok {
		return nil, verbsio.Errorf("open_device", unix.ENODEV, "network device %s has no Ethernet address: raw devices need an Ethernet netdev", netdev)
	}
	var profile rawProfile
	switch o.RawProfile {
	case "":
	case "mana":
		profile = rawMana
	default:
		return nil, verbsio.Errorf("open_device", unix.EINVAL, "unknown raw profile %q: want \"\" (the engine's raw device) or \"mana\"", o.RawProfile)
	}
	io, err := parseRawIO(o.RawIO)
	if err != nil {
		return nil, verbsio.Errorf("open_device", unix.EINVAL, "%s: %v", name, err)
	}
	c, err := newContext(rawInfo(dev))
	if err != nil {
		return nil, err
	}
	f := &rawFabric{c: c, dev: dev, profile: profile, queryOnly: o.QueryOnly, io: io, table: netpkt.NewTable()}
	for i, a := range dev.addrs {
		f.gids = append(f.gids, verbsio.GIDEntry{Index: i, GID: verbsio.GIDFromAddr(a), Type: verbsio.GIDTypeRoCEv2, Netdev: dev.name})
	}
	f.segKernel, f.segWhy = rawSegmenter(dev.name)
	if io.tx == afpacket.TXXDP && f.segKernel {
		// Kernel GSO goes through a packet socket beside AF_XDP's: a QP
		// may still ask for it (SegmentKernel), but by default the
		// engine cuts, so that every frame goes out through AF_XDP.
		f.segKernel, f.segWhy = false, "engine: AF_XDP sends have no GSO (raw I/O xdp); without xdp, "+f.segWhy
	}
	if !o.QueryOnly {
		if err := f.openIO(); err != nil {
			c.Close()
			return nil, err
		}
	}
	c.fab = f
	return c, nil
}

// rawSoftwareDrivers are drivers whose devices hand a GSO frame on whole
// (to a peer namespace, a bridge port, a tap, a VM's host) instead of
// cutting it before a wire.
var rawSoftwareDrivers = map[string]bool{
	"veth": true, "bridge": true, "tun": true, "virtio_net": true, "vxlan": true, "geneve": true,
	"macvlan": true, "macvtap": true, "ipvlan": true, "dummy": true, "bonding": true, "team": true,
	"openvswitch": true, "vrf": true, "netkit": true,
}

// rawSegmenter decides who cuts a TSO send on the device by default. The
// kernel's GSO is 2-3 times faster than cutting in the engine
// (docs/raw.md), but it is faithful only where the segments are made
// before the frames leave the host: by a NIC with TSO, or by the kernel in
// software when the device's checksum offload is off. A virtual device
// with offloads on (veth, the default) hands the whole 64 KiB frame to
// its peer, whose raw QP would receive it unsegmented.
func rawSegmenter(netdev string) (kernel bool, why string) {
	drv, err := afpacket.Driver(netdev)
	if err != nil {
		drv = "unknown"
	}
	csum, err1 := afpacket.Feature(netdev, afpacket.OffloadTxCsum)
	tso, err2 := afpacket.Feature(netdev, afpacket.OffloadTSO)
	switch {
	case err1 == nil && !csum:
		return true, fmt.Sprintf("kernel: %s's transmit checksum offload is off, so the kernel cuts GSO sends into segments in software before the device", netdev)
	case rawSoftwareDrivers[drv] || err1 != nil || err2 != nil:
		return false, fmt.Sprintf("engine: %s (driver %s) would hand kernel GSO frames on unsegmented (turn its tx checksumming off for kernel segmentation)", netdev, drv)
	case tso:
		return true, fmt.Sprintf("kernel: %s (driver %s) segments in hardware (TSO)", netdev, drv)
	}
	return true, fmt.Sprintf("kernel: %s (driver %s) has no TSO, so the kernel cuts segments in software before it", netdev, drv)
}

// openIO opens the port's sockets (in the calling thread's namespace) and
// the fabric's buffers.
func (f *rawFabric) openIO() error {
	name := f.c.info.Name
	frameSize := 2048
	for frameSize < f.dev.mtu+netpkt.EthLen+2*netpkt.VLANLen+128 {
		frameSize *= 2
	}
	var err error
	if f.rx, err = f.io.openRX(name, f.dev.name, frameSize); err != nil {
		return err
	}
	if f.tx, err = f.io.openTX(name, f.dev.name, frameSize); err != nil {
		f.closeIO()
		return err
	}
	// The GSO socket goes through the qdisc layer even with bypass: past
	// it, the kernel refused every GSO send on veth with ENOBUFS.
	if f.gsoTX, err = afpacket.OpenTX(f.dev.name, afpacket.TXOptions{Mode: afpacket.TXSendmmsg, VnetHdr: true}); err != nil {
		f.closeIO()
		return verbsio.Errorf("open_device", unix.EIO, "%s: GSO socket: %v", name, err)
	}
	if f.netns, err = udp.CurrentNetns(); err != nil {
		f.closeIO()
		return verbsio.Errorf("open_device", unix.EIO, "%s: %v", name, err)
	}
	f.tagBuf = make([]byte, frameSize+netpkt.VLANLen)
	f.frames = make([][]byte, 0, rawTXFrames)
	f.arena = make([]byte, rawTXArena)
	f.scratch = make([]byte, rawMaxTSOHdr+rawMaxTSO)
	return nil
}

func (f *rawFabric) closeIO() {
	if f.rx != nil {
		f.rx.Close()
	}
	if f.tx != nil {
		f.tx.Close()
	}
	if f.gsoTX != nil {
		f.gsoTX.Close()
	}
	if f.netns != nil {
		f.netns.Close()
	}
}

var (
	_ fabric     = (*rawFabric)(nil)
	_ progressor = (*rawFabric)(nil)
)

func (f *rawFabric) gidTable() []verbsio.GIDEntry { return append([]verbsio.GIDEntry(nil), f.gids...) }

// checkQP takes RAW_PACKET QPs only: a raw device carries frames, not an
// RDMA transport.
func (f *rawFabric) checkQP(attr *verbsio.QPInitAttr) error {
	if f.profile == rawMana {
		return f.manaCheckQP(attr)
	}
	switch {
	case attr.Type != verbsio.QPTypeRawPacket:
		return &verbsio.UnsupportedError{Feature: attr.Type.String() + " QPs on " + f.c.info.Name, Provider: ProviderName,
			Reason: "a raw device carries RAW_PACKET QPs only", Fix: "use udp_" + f.dev.name + " for RDMA transports over this netdev"}
	case f.queryOnly:
		return verbsio.Errorf("create_qp", unix.EPERM, "%s was opened for queries only (OpenOptions.QueryOnly); open it without", f.c.info.Name)
	}
	return nil
}

func (f *rawFabric) newQP(q *qp) qpTransport {
	return &rawQP{q: q, f: f, tso: make([]rawTSOHdr, q.sq.Depth()), sent: make([]uint32, q.sq.Depth())}
}

func (f *rawFabric) newAH(*ah, verbsio.AHAttr) error {
	return verbsio.Errorf("create_ah", unix.EOPNOTSUPP, "%s carries RAW_PACKET QPs, which take no address handles (the frame holds the addresses)", f.c.info.Name)
}

// queueMemory: nothing of a raw context is mapped by a peer.
func (f *rawFabric) queueMemory() dv.Resource { return dv.ResSendQueue | dv.ResRecvQueue | dv.ResCQ }

func (f *rawFabric) close() { f.closeIO() }

// rawActiveMTU is the largest IB MTU that fits the netdev's, as mlx5
// reports a raw Ethernet port's active MTU.
func rawActiveMTU(mtu int) verbsio.MTU {
	best := verbsio.MTU256
	for m := verbsio.MTU256; m <= verbsio.MTU4096; m++ {
		if m.Bytes() <= mtu {
			best = m
		}
	}
	return best
}

func (f *rawFabric) portAttr() verbsio.PortAttr {
	state, phys := verbsio.PortActive, uint8(5)
	if !f.dev.up {
		state, phys = verbsio.PortDown, 3
	}
	return verbsio.PortAttr{State: state, MaxMTU: verbsio.MTU4096, ActiveMTU: rawActiveMTU(f.dev.mtu), GIDTblLen: len(f.gids),
		MaxMsgSize: rawMaxTSO, PkeyTblLen: 1, MaxVLNum: 1, PhysState: phys, LinkLayer: verbsio.LinkLayerEthernet,
		Netdev: f.dev.name, PortCapFlags: 1 << 16}
}

func (f *rawFabric) deviceAttr() verbsio.DeviceAttr {
	a := engineDeviceAttr()
	a.NodeGUID = f.c.info.NodeGUID
	a.SysImageGUID = a.NodeGUID
	a.MaxMsgSize = rawMaxTSO
	a.DeviceCapFlags |= devCapRawIPCsum | devCapManagedFlowSteering
	a.Ext.DeviceCapFlagsEx = a.DeviceCapFlags
	a.Ext.MaxRawEthyQP = maxQP
	a.RawPacketCaps = verbsio.RawCapIPCsum
	raw := []verbsio.QPType{verbsio.QPTypeRawPacket}
	a.TSO = verbsio.TSOCaps{MaxTSO: rawMaxTSO, SupportedQP: raw}
	a.PacketPacing.SupportedQP = raw
	a.FlowSteering = netpkt.Caps
	a.SendPaths = []string{"generic", "burst", "inline", "dm", "tso", "dv"}
	if f.profile == rawMana {
		f.manaAttr(&a)
	}
	return a
}

// counters are the fabric's counters and the ring's kernel drops.
func (f *rawFabric) counters() map[string]uint64 {
	vals := []*atomic.Uint64{&f.cnt.txFrames, &f.cnt.txBytes, &f.cnt.txErrors, &f.cnt.txTSO, &f.cnt.txTSOKernel,
		&f.cnt.rxFrames, &f.cnt.rxBytes, &f.cnt.rxDelivered, &f.cnt.rxSteerDropped, &f.cnt.rxUnmatched, &f.cnt.rxNoWQE,
		&f.cnt.rxTruncated, &f.cnt.rxRingDrops, &f.cnt.rxCsumOK, &f.cnt.rxTSHardware, &f.cnt.rxTSSoftware, &f.cnt.rxTSRing,
		&f.cnt.filterCompiles}
	if f.rx != nil {
		if _, drops, err := f.rx.Stats(); err == nil {
			f.cnt.rxRingDrops.Add(uint64(drops))
		}
	}
	m := make(map[string]uint64, len(vals)+2)
	for i, v := range vals {
		m[rawCounterNames[i]] = v.Load()
	}
	m["rules"] = uint64(f.table.Len())
	m["filter_mode_"+netpkt.FilterMode(f.filter.mode.Load()).String()] = 1
	return m
}

// Segmentation reports who cuts a raw context's TSO sends by default
// ("kernel" or "engine") and why (docs/raw.md). It is for reports and
// tests; other contexts answer "", "".
func (c *Context) Segmentation() (who, why string) {
	f, ok := c.fab.(*rawFabric)
	if !ok {
		return "", ""
	}
	who, _, _ = strings.Cut(f.segWhy, ":")
	return who, f.segWhy
}
