package soft

import (
	"github.com/rperf/rperf/verbsio/soft/internal/udp"
)

// Sending on the udp fabric: packets are gathered into GSO groups and
// queued per socket; a doorbell or a progress round flushes them, one
// sendmmsg per socket.

// txGroup is packets of one size to one destination sent as one UDP GSO
// datagram (or one plain datagram when there is only one). Packets are
// gathered, not copied: each is its header and trailer (pad and ICRC) in
// the arena and its payload where it lives, the sender's registered
// memory. The kernel numbers the IPv4 identification of GSO segments 0, 1,
// 2, ... (seen on the wire), so packet i of a group carries the ICRC
// computed with identification i; a lone packet has 0 either way.
type txGroup struct {
	path   *udpPath
	iov0   int // first of the group's pieces in f.iovs
	bytes  int
	seg, n int
	short  bool // the last packet is shorter: the group is complete
	gso    bool // the QP lets the kernel segment (not SegmentEngine)
}

// maxGSOSegs and maxGSOBytes bound one GSO send (UDP_MAX_SEGMENTS; the UDP
// length field).
const (
	maxGSOSegs  = 64
	maxGSOBytes = 65000
	// pktOverhead is the most arena bytes one packet needs: headers up to
	// 64 bytes, pad 3 and ICRC 4.
	pktOverhead = 72
)

// begin starts a packet of size bytes made of at most pieces buffers to
// path, closing the current group when the packet cannot join it, and
// returns the packet's index in its group (its IPv4 identification).
func (f *udpFabric) begin(path *udpPath, size, pieces, arena int, gso bool) int {
	g := &f.grp
	if g.n > 0 && (path.conn != g.path.conn || path.to != g.path.to || size > g.seg || g.short ||
		g.n == maxGSOSegs || g.bytes+size > maxGSOBytes || !f.gso || !gso || !g.gso || len(f.iovs)-g.iov0+pieces > udp.MaxIov) {
		f.closeGroup()
	}
	if f.off+pktOverhead+arena > len(f.arena) || len(f.iovs)+pieces > cap(f.iovs) {
		f.send()
	}
	if g.n == 0 {
		g.path, g.iov0, g.seg, g.gso = path, len(f.iovs), size, gso
	}
	if size < g.seg {
		g.short = true
	}
	g.bytes += size
	id := g.n
	g.n++
	return id
}

// alloc returns n bytes of the arena (headers and trailers; begin has
// made room).
func (f *udpFabric) alloc(n int) []byte {
	b := f.arena[f.off : f.off+n : f.off+n]
	f.off += n
	return b
}

// piece adds a buffer to the packet being built.
func (f *udpFabric) piece(b []byte) {
	if len(b) > 0 {
		f.iovs = append(f.iovs, b)
	}
}

// closeGroup queues the current group.
func (f *udpFabric) closeGroup() {
	g := &f.grp
	if g.n == 0 {
		return
	}
	gso := uint16(0)
	if g.n > 1 {
		gso = uint16(g.seg)
	}
	o := g.path.conn.Queue()
	if o == nil {
		g.path.conn.Flush()
		o = g.path.conn.Queue()
	}
	o.Iov, o.To, o.GSO = f.iovs[g.iov0:len(f.iovs):len(f.iovs)], g.path.to, gso
	f.cnt.sent.Add(uint64(g.n))
	*g = txGroup{}
}

// flush queues the acknowledgements owed, then sends every queued
// datagram (one sendmmsg per socket) and frees the arena.
//
// The acknowledgements go last: a QP's requests and responses of this
// doorbell leave first, and its acknowledgement, shorter than they are,
// closes their GSO group, so one datagram carries both as far as the
// kernel's segmentation (on loopback, to the peer's GRO socket whole): the
// ACK costs the kernel no datagram of its own and is never ahead of a
// request on the peer's critical path.
func (f *udpFabric) flush() {
	f.sendAcks()
	f.send()
}

// send sends every queued datagram and frees the arena.
func (f *udpFabric) send() {
	f.closeGroup()
	for _, c := range f.conns {
		if c != nil && c.Pending() > 0 {
			c.Flush()
		}
	}
	if s := f.senders.Load(); s != nil {
		for _, c := range *s {
			if c.Pending() > 0 {
				c.Flush()
			}
		}
	}
	f.off = 0
	clear(f.iovs)
	f.iovs = f.iovs[:0]
}
