package verbsio

import "golang.org/x/sys/unix"

// MADSize is the size of a management datagram (MAD), the payload of every
// packet to or from QP1.
const MADSize = 256

// RoCEv2Port is the UDP port QP1 (like every RoCEv2 QP) receives on.
const RoCEv2Port = 4791

// MADAddr addresses QP1, the general services QP, of a device port: where
// the connection manager sends its MADs.
type MADAddr struct {
	// GID is the port's GID; on RoCEv2 the IP address (IPv4-mapped for
	// IPv4) the MAD is sent to or came from.
	GID GID
	// Port is the UDP port QP1 receives on, for fabrics that carry MADs
	// over UDP; 0 means RoCEv2's 4791. A fabric sets it on received MADs
	// when the sender's QP1 listens on another port (two engines on one
	// host), and reads it when sending.
	Port uint16
}

// MADPort is QP1 of one device port as a connection manager uses it: it
// sends and receives 256-byte MADs. The fabric does the transport: on
// RoCEv2 a MAD travels as a UD SEND_ONLY to QP1 (DETH Q_Key 0x80010000,
// source QP 1, P_Key 0xffff) in a UDP datagram to port 4791.
type MADPort interface {
	// SendMAD sends one MAD (MADSize bytes) from the local GID from to QP1
	// at to. It does not wait for the network and keeps no reference to
	// mad; a MAD the fabric cannot queue is dropped (the CM retries).
	SendMAD(from GID, to MADAddr, mad []byte) error
	// SetMADHandler installs the function called with every MAD that
	// arrives at QP1: to is the local GID it was sent to, from its sender.
	// Calls come one at a time from a goroutine of the fabric and must
	// not block; mad is valid only during the call. nil stops delivery.
	SetMADHandler(h func(to GID, from MADAddr, mad []byte))
	// Close releases QP1; the handler is not called after Close returns.
	Close() error
}

// MADProvider is implemented by contexts that give a connection manager
// their ports' QP1.
type MADProvider interface {
	// OpenMADPort opens QP1 of port (numbered from 1). A port's QP1 is
	// opened once at a time: EBUSY until the MADPort is closed.
	OpenMADPort(port uint8) (MADPort, error)
}

// OpenMADPort opens QP1 of port for MADs (the connection manager's
// transport). Providers that do not expose QP1 return an *Error with
// EOPNOTSUPP.
func (c *Context) OpenMADPort(port uint8) (MADPort, error) {
	p, ok := c.impl.(MADProvider)
	if !ok {
		return nil, Errorf("open_mad_port", unix.EOPNOTSUPP,
			"device %s does not give access to QP1 (management datagrams); connection management needs a provider that does", c.Device.Name)
	}
	return p.OpenMADPort(port)
}
