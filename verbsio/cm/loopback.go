package cm

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/verbsio"
)

// Loopback is an in-process network of MAD ports, addressed by GID: what a
// MAD port sends to a GID another port of the same Loopback owns is
// delivered to that port's handler, asynchronously and in order, as a
// network would. It connects the CMs of devices that live in one process
// (shm0 contexts, tests); Filter can drop, inspect or hold MADs.
type Loopback struct {
	mu      sync.Mutex
	ports   map[verbsio.GID]*loopPort
	filter  func(from verbsio.GID, to verbsio.MADAddr, mad []byte) bool
	dropped uint64
}

// NewLoopback returns an empty loopback network.
func NewLoopback() *Loopback {
	return &Loopback{ports: map[verbsio.GID]*loopPort{}}
}

// SetFilter installs f, called with every MAD sent; false drops it. nil
// delivers everything.
func (l *Loopback) SetFilter(f func(from verbsio.GID, to verbsio.MADAddr, mad []byte) bool) {
	l.mu.Lock()
	l.filter = f
	l.mu.Unlock()
}

// Dropped returns how many MADs were dropped: by the filter, for a GID no
// port owns, or because the receiving port's queue was full.
func (l *Loopback) Dropped() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

// loopQueue is how many MADs a port holds for its handler; beyond, MADs
// are dropped like a full receive queue drops them (the CM retries).
const loopQueue = 256

type loopMAD struct {
	to   verbsio.GID
	from verbsio.MADAddr
	mad  [verbsio.MADSize]byte
}

type loopPort struct {
	l       *Loopback
	gids    []verbsio.GID
	port    uint16
	mu      sync.Mutex
	handler func(to verbsio.GID, from verbsio.MADAddr, mad []byte)
	q       chan loopMAD
	done    chan struct{}
	exited  chan struct{}
	closed  bool
}

// Port returns a MAD port that owns gids. port, if not 0, is the UDP
// port its MADs say they come from (MADAddr.Port), as an engine on another
// UDP port would. Owning a GID another open port owns is EADDRINUSE.
func (l *Loopback) Port(port uint16, gids ...verbsio.GID) (verbsio.MADPort, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, g := range gids {
		if l.ports[g] != nil {
			return nil, fmt.Errorf("cm loopback: GID %v already has a MAD port: %w", g, unix.EADDRINUSE)
		}
	}
	p := &loopPort{l: l, gids: gids, port: port, q: make(chan loopMAD, loopQueue),
		done: make(chan struct{}), exited: make(chan struct{})}
	for _, g := range gids {
		l.ports[g] = p
	}
	go p.deliver()
	return p, nil
}

func (p *loopPort) deliver() {
	defer close(p.exited)
	for {
		select {
		case <-p.done:
			return
		case m := <-p.q:
			p.mu.Lock()
			h := p.handler
			if h != nil {
				h(m.to, m.from, m.mad[:])
			}
			p.mu.Unlock()
		}
	}
}

// SendMAD delivers mad to the port that owns to.GID.
func (p *loopPort) SendMAD(from verbsio.GID, to verbsio.MADAddr, mad []byte) error {
	if len(mad) != verbsio.MADSize {
		return fmt.Errorf("cm loopback: a MAD is %d bytes, not %d: %w", verbsio.MADSize, len(mad), unix.EINVAL)
	}
	l := p.l
	l.mu.Lock()
	dst := l.ports[to.GID]
	if p.closed || dst == nil || (l.filter != nil && !l.filter(from, to, mad)) {
		l.dropped++
		l.mu.Unlock()
		return nil
	}
	m := loopMAD{to: to.GID, from: verbsio.MADAddr{GID: from, Port: p.port}}
	copy(m.mad[:], mad)
	select {
	case dst.q <- m:
	default:
		l.dropped++
	}
	l.mu.Unlock()
	return nil
}

// SetMADHandler installs the receive handler.
func (p *loopPort) SetMADHandler(h func(to verbsio.GID, from verbsio.MADAddr, mad []byte)) {
	p.mu.Lock()
	p.handler = h
	p.mu.Unlock()
}

// Close releases the port's GIDs and stops delivery.
func (p *loopPort) Close() error {
	p.l.mu.Lock()
	if p.closed {
		p.l.mu.Unlock()
		return nil
	}
	p.closed = true
	for _, g := range p.gids {
		if p.l.ports[g] == p {
			delete(p.l.ports, g)
		}
	}
	p.l.mu.Unlock()
	close(p.done)
	<-p.exited
	return nil
}
