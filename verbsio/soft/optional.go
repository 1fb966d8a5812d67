package soft

import "github.com/rperf/rperf/verbsio"

// The engine's answers to verbsio's optional questions about a context
// (verbsio/fabric.go). Counters, the third, is in udpctx.go.

var (
	_ verbsio.PollDriver    = (*Context)(nil)
	_ verbsio.UDPBinder     = (*Context)(nil)
	_ verbsio.CounterSource = (*Context)(nil)
)

// PollDriven implements verbsio.PollDriver: the udp fabric's engine runs
// when the application posts or polls (or under StartProgress); on the
// shm fabric the initiator does all the work itself.
func (c *Context) PollDriven() bool { return c.info.Fabric == "udp" }

// UDPPort implements verbsio.UDPBinder: the UDP port a udp-fabric context
// bound (the port's LID, or RoCEPort for LID 0), 0 on the shm fabric.
func (c *Context) UDPPort() int {
	if c.info.Fabric != "udp" {
		return 0
	}
	pa, err := c.QueryPort(1)
	if err != nil {
		return 0
	}
	if pa.LID == 0 {
		return RoCEPort
	}
	return int(pa.LID)
}
