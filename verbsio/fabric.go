package verbsio

import "strings"

// What a consumer may ask about a device's transport without knowing its
// provider: whether its engine runs only when polled, its counters, the
// UDP port it bound, and how the built-in engine names its devices.
// Providers answer by implementing the optional interfaces below on their
// ContextImpl (as Progresser, DMProvider and Interfacer are); a context
// that implements none answers as hardware does: it progresses by itself,
// keeps no counters here and binds no UDP port.

// udpDevicePrefix starts the names of the built-in engine's udp-fabric
// devices: "udp_" + the network device.
const udpDevicePrefix = "udp_"

// UDPNetdev returns the network device a device of the built-in engine's
// udp fabric is named after ("udp_eth0": "eth0") and true, or "" and false
// for any other name. Such a device binds a UDP port of this host
// (OpenOptions.UDPPort); the name alone says so, before it is opened.
func UDPNetdev(device string) (netdev string, ok bool) {
	if !strings.HasPrefix(device, udpDevicePrefix) || len(device) == len(udpDevicePrefix) {
		return "", false
	}
	return device[len(udpDevicePrefix):], true
}

// Segments reports whether messages to and from the device are cut into
// packets on a network device of this host, where QPInitAttr.Segmenter
// chooses who cuts them (the engine or the kernel): the built-in engine's
// udp and raw fabrics. The shm fabric moves no packets, and hardware
// segments as it does.
func (d DeviceInfo) Segments() bool { return d.Fabric == "udp" || d.Fabric == "raw" }

// PollDriver is implemented by contexts whose engine runs only when the
// application calls into it (posting, polling a CQ), such as the built-in
// udp fabric's.
type PollDriver interface {
	PollDriven() bool
}

// PollDriven reports whether the context's engine runs only when it is
// polled: a loop that waits on memory rather than on a CQ must poll now
// and then so that the peer's packets are processed, and a side that
// waits outside the verbs (on the out-of-band connection) should run
// StartProgress meanwhile. It is false for engines that progress by
// themselves: hardware, and the shm fabric, whose initiator does all the
// work.
func (c *Context) PollDriven() bool {
	p, ok := c.impl.(PollDriver)
	return ok && p.PollDriven()
}

// CounterSource is implemented by contexts whose engine counts its
// transport's events (packets sent and received, retransmissions, ...).
type CounterSource interface {
	Counters() map[string]uint64
}

// Counters returns the engine's transport counters by name, or nil when
// the context keeps none (hardware publishes its counters in sysfs).
func (c *Context) Counters() map[string]uint64 {
	if s, ok := c.impl.(CounterSource); ok {
		return s.Counters()
	}
	return nil
}

// UDPBinder is implemented by contexts that carry their traffic over a
// UDP socket of this host, such as the built-in udp fabric's.
type UDPBinder interface {
	UDPPort() int
}

// UDPPort returns the UDP port the context bound (RoCEv2Port, mad.go,
// unless OpenOptions.UDPPort chose another), or 0 when it binds none.
func (c *Context) UDPPort() int {
	if b, ok := c.impl.(UDPBinder); ok {
		return b.UDPPort()
	}
	return 0
}
