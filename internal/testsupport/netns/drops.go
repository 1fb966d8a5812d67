package netns

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Drops are the kernel's drop counters on a pair's wire: what its links
// dropped, received or sent (veth counts a frame its peer's backlog or
// XDP ring refused on the sender's tx_dropped), and what the CPUs'
// backlogs dropped (/proc/net/softnet_stat: every CPU's, not the pair's
// alone, so an upper bound). A test that sees a frame missing tells a
// kernel drop from its own fault by them (a socket's own ring drops are
// its PACKET_STATISTICS, not here).
type Drops struct {
	LinkRX, LinkTX, Backlog uint64
}

// Total is the sum of the counters.
func (d Drops) Total() uint64 { return d.LinkRX + d.LinkTX + d.Backlog }

// Sub is d less an earlier reading o.
func (d Drops) Sub(o Drops) Drops {
	return Drops{d.LinkRX - o.LinkRX, d.LinkTX - o.LinkTX, d.Backlog - o.Backlog}
}

// Drops reads the pair's drop counters: every link's rx_dropped and
// tx_dropped (from /proc/net/dev in its namespace) and the backlogs'.
func (p *Pair) Drops() (Drops, error) {
	var d Drops
	for _, l := range p.links() {
		rx, tx, err := linkDrops(l[0], l[1])
		if err != nil {
			return d, err
		}
		d.LinkRX += rx
		d.LinkTX += tx
	}
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return d, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			n, err := strconv.ParseUint(f[1], 16, 32) // the second column: backlog drops
			if err != nil {
				return d, fmt.Errorf("softnet_stat %q: %w", line, err)
			}
			d.Backlog += n
		}
	}
	return d, nil
}

// linkDrops reads link's rx_dropped and tx_dropped in namespace ns.
func linkDrops(ns, link string) (rx, tx uint64, err error) {
	err = Run(ns, func() error {
		b, err := os.ReadFile("/proc/thread-self/net/dev")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			name, rest, ok := strings.Cut(line, ":")
			if !ok || strings.TrimSpace(name) != link {
				continue
			}
			// Receive: bytes packets errs drop fifo frame compressed
			// multicast; transmit: bytes packets errs drop ...
			f := strings.Fields(rest)
			if len(f) < 12 {
				return fmt.Errorf("/proc/net/dev: %q", line)
			}
			if rx, err = strconv.ParseUint(f[3], 10, 64); err != nil {
				return err
			}
			tx, err = strconv.ParseUint(f[11], 10, 64)
			return err
		}
		return fmt.Errorf("/proc/net/dev of %s has no %s", ns, link)
	})
	return rx, tx, err
}
