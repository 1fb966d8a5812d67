package verbsio

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Provider is a source of devices: the built-in software engine, the
// hardware provider over libibverbs, ... Providers register with Register.
type Provider interface {
	// Name is the provider's short name, e.g. "soft" or "ibverbs".
	Name() string
	// Devices lists the provider's devices on this machine.
	Devices() ([]DeviceInfo, error)
	// Open opens the named device.
	Open(name string) (ContextImpl, error)
}

// DeviceInfo describes a device before it is opened.
type DeviceInfo struct {
	Name      string // e.g. "shm0", "udp_lo", "mlx5_0"
	Provider  string // the provider's Name
	Fabric    string // for built-in devices: "shm", "udp" or "raw"
	Transport string // "InfiniBand" (for IB and RoCE), "iWARP", "engine"
	NodeGUID  uint64
	Netdev    string // bound network device, if any
	Ports     int
}

// ContextImpl is what a provider implements for an open device.
type ContextImpl interface {
	QueryDevice() (DeviceAttr, error)
	QueryPort(port uint8) (PortAttr, error)
	QueryGIDTable(port uint8) ([]GIDEntry, error)
	AllocPD() (PDImpl, error)
	CreateCQ(attr CQInitAttr) (CQImpl, error)
	// Alloc returns memory suited to registration (for the built-in engine,
	// memory a peer process can reach). Free releases it.
	Alloc(length int) ([]byte, error)
	Free(buf []byte) error
	Close() error
}

// PDImpl is a provider's protection domain.
type PDImpl interface {
	RegMR(buf []byte, access Access) (MRImpl, error)
	CreateQP(attr QPInitAttr) (QPImpl, error)
	CreateSRQ(attr SRQInitAttr) (SRQImpl, error)
	CreateAH(attr AHAttr) (AHImpl, error)
	Dealloc() error
}

// MRImpl is a provider's memory region.
type MRImpl interface {
	LKey() uint32
	RKey() uint32
	Dereg() error
}

// CQImpl is a provider's completion queue.
type CQImpl interface {
	// Poll writes up to len(wcs) completions and returns how many.
	Poll(wcs []WC) (int, error)
	// Wait blocks until the CQ is not empty or timeout passes (ErrTimeout).
	Wait(timeout time.Duration) error
	// Depth is the number of entries granted.
	Depth() int
	Destroy() error
}

// QPImpl is a provider's queue pair.
type QPImpl interface {
	QPN() uint32
	Cap() QPCap
	Modify(attr *QPAttr, mask QPAttrMask) error
	Query() (QPAttr, error)
	PostSend(wrs []SendWR) (int, error)
	PostRecv(wrs []RecvWR) (int, error)
	Destroy() error
}

// SRQImpl is a provider's shared receive queue.
type SRQImpl interface {
	PostRecv(wrs []RecvWR) (int, error)
	Destroy() error
}

// AHImpl is a provider's address handle.
type AHImpl interface {
	Destroy() error
}

var registry struct {
	sync.Mutex
	providers []Provider
}

// Register adds a provider. Registering two providers with the same name
// panics (a programming error at init time).
func Register(p Provider) {
	registry.Lock()
	defer registry.Unlock()
	for _, q := range registry.providers {
		if q.Name() == p.Name() {
			panic("verbsio: provider " + p.Name() + " registered twice")
		}
	}
	registry.providers = append(registry.providers, p)
	sort.SliceStable(registry.providers, func(i, j int) bool {
		return registry.providers[i].Name() < registry.providers[j].Name()
	})
}

// Providers returns the registered providers.
func Providers() []Provider {
	registry.Lock()
	defer registry.Unlock()
	return append([]Provider(nil), registry.providers...)
}

// Device is a device found on this machine (an entry of ibv_get_device_list).
type Device struct {
	DeviceInfo
	provider Provider
}

// Devices lists the devices of every registered provider. A provider that
// fails to list is reported in the error while the others' devices are
// still returned.
func Devices() ([]*Device, error) {
	ps := Providers()
	if len(ps) == 0 {
		return nil, fmt.Errorf("verbsio: no providers registered; import github.com/rperf/rperf/verbsio/soft for the built-in engine")
	}
	var out []*Device
	var errs []string
	for _, p := range ps {
		infos, err := p.Devices()
		if err != nil {
			errs = append(errs, p.Name()+": "+err.Error())
		}
		for _, in := range infos {
			out = append(out, &Device{DeviceInfo: in, provider: p})
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("list devices: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// LookupDevice finds a device by name.
func LookupDevice(name string) (*Device, error) {
	devs, err := Devices()
	for _, d := range devs {
		if d.Name == name {
			return d, nil
		}
	}
	names := make([]string, 0, len(devs))
	for _, d := range devs {
		names = append(names, d.Name)
	}
	msg := fmt.Sprintf("no RDMA device named %q", name)
	if len(names) > 0 {
		msg += "; devices here: " + strings.Join(names, ", ") + " (rdiag devices lists them)"
	}
	if err != nil {
		msg += " (" + err.Error() + ")"
	}
	return nil, &Error{Op: "open_device", Errno: 19 /* ENODEV */, Detail: msg}
}

// Open opens the named device.
func Open(name string) (*Context, error) {
	d, err := LookupDevice(name)
	if err != nil {
		return nil, err
	}
	return d.Open()
}

// Open opens the device and returns its context.
func (d *Device) Open() (*Context, error) {
	impl, err := d.provider.Open(d.Name)
	if err != nil {
		return nil, err
	}
	return &Context{Device: d.DeviceInfo, impl: impl}, nil
}

// OpenOptions are settings for opening a device that a provider may
// honour. The built-in engine's udp fabric uses UDPPort.
type OpenOptions struct {
	// UDPPort is the UDP port a udp-fabric context binds: 0 means the
	// RoCEv2 port 4791, -1 any free port. A context that does not use
	// 4791 reports its port as its LID, and peers put it in their address
	// vector's DLID (perftest's key exchange carries the LID), so several
	// engines can run on one host.
	UDPPort int
	// QueryOnly opens the device to query it (QueryDevice, QueryPort, the
	// GID table) without taking resources a test would need, such as the
	// udp fabric's UDP port; objects that move data cannot be created.
	// rdiag opens devices this way, so it works beside a running test.
	QueryOnly bool
	// RawProfile makes a raw-fabric device (raw_<netdev>) behave as
	// another device: "" is the engine's own raw device, "mana" is
	// Microsoft's MANA as manadv(7) describes it (RAW_PACKET QPs only,
	// queue memory from the application's allocator, one raw QP per
	// port across processes: EBUSY). docs/raw.md describes both.
	RawProfile string
	// RawIO chooses how a raw-fabric context's port moves frames: a
	// comma-separated list of "v2" (a TPACKET_V2 receive ring, one slot
	// per frame: the default, for latency) or "v3" (TPACKET_V3 blocks:
	// fewer wake-ups, but a lone frame waits for its block's 1 ms timer),
	// "sendmmsg" (the default: a batch per sendmmsg(2)), "txring" (a
	// TPACKET_V2 TX ring) or "xdp" (an AF_XDP socket in copy mode on
	// queue 0; receive stays on the packet ring, and the kernel's GSO
	// is not used by default since AF_XDP has none), and "bypass" or
	// "nobypass" (PACKET_QDISC_BYPASS on the packet sockets; off by
	// default). "" or "default" is v2,sendmmsg,nobypass. docs/raw.md
	// has the measurements behind the default.
	RawIO string
}

// OptionsOpener is implemented by providers that take OpenOptions.
type OptionsOpener interface {
	OpenWith(name string, o OpenOptions) (ContextImpl, error)
}

// OpenWith opens the named device with options; providers that take none
// ignore them.
func OpenWith(name string, o OpenOptions) (*Context, error) {
	d, err := LookupDevice(name)
	if err != nil {
		return nil, err
	}
	var impl ContextImpl
	if oo, ok := d.provider.(OptionsOpener); ok {
		impl, err = oo.OpenWith(d.Name, o)
	} else {
		impl, err = d.provider.Open(d.Name)
	}
	if err != nil {
		return nil, err
	}
	return &Context{Device: d.DeviceInfo, impl: impl}, nil
}
