package soft

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Background progress (Context.StartProgress). Only fabrics that move
// bytes when driven need it (a progressor, as the udp fabric is): on the
// shm fabric the initiator does all the work. While it runs,
// the fast-path entry points of the context take bg.mu; without it they
// take nothing.
//
// It has holders: StartProgress's are eager (a passive target: every
// round, all the time); QP1's (the connection manager's MAD port, which
// must hear MADs while the application waits for CM events) is lazy: it
// runs rounds only while the application does not drive the engine
// itself, and otherwise looks once per lazyCheck whether it stopped (the
// application's polls read the sockets then; a round of its own would
// only take their packets and the CPU).

type bgProgress struct {
	on   bool // read and written by the owner only
	mu   sync.Mutex
	efd  int
	done chan struct{}

	// Guarded by mu.
	eager  int  // StartProgress holders
	lazy   int  // lazy holders (QP1)
	driven bool // the application entered the engine since serve last looked
}

// lazyCheck is how often lazy background progress looks whether the
// application still drives the engine.
const lazyCheck = 2 * time.Millisecond

// lock and unlock serialize with background progress when it runs.
func (c *Context) lock() {
	if c.bg.on {
		c.bg.mu.Lock()
		c.bg.driven = true
	}
}

func (c *Context) unlock() {
	if c.bg.on {
		c.bg.mu.Unlock()
	}
}

// StartProgress implements verbsio.Progresser. Each call is a holder of
// its own; progress stops when every holder has stopped (or the context
// closes).
func (c *Context) StartProgress() (stop func()) { return c.holdProgress(true) }

// holdProgress starts background progress, or adds a holder to it, and
// returns the function that releases the hold. It is called by the
// context's owner, like StartProgress.
func (c *Context) holdProgress(eager bool) (release func()) {
	p, ok := c.fab.(progressor)
	if !ok {
		return func() {}
	}
	start := !c.bg.on
	if start {
		efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			return func() {}
		}
		c.bg.efd = efd
		c.bg.done = make(chan struct{})
		c.bg.eager, c.bg.lazy = 0, 0
	}
	c.bg.mu.Lock()
	if eager {
		c.bg.eager++
	} else {
		c.bg.lazy++
	}
	c.bg.mu.Unlock()
	if start {
		c.bg.on = true
		go c.serve(p)
	} else {
		c.wakeServe()
	}
	done := c.bg.done
	var once sync.Once
	return func() {
		once.Do(func() {
			if !c.bg.on || c.bg.done != done {
				return // stopped already (the context closed)
			}
			c.bg.mu.Lock()
			if eager {
				c.bg.eager--
			} else {
				c.bg.lazy--
			}
			last := c.bg.eager+c.bg.lazy == 0
			c.bg.mu.Unlock()
			if last {
				c.stopProgress()
			}
		})
	}
}

// wakeServe makes serve look at its holders again.
func (c *Context) wakeServe() {
	one := [8]byte{1}
	unix.Write(c.bg.efd, one[:])
}

// stopProgress ends background progress whoever holds it.
func (c *Context) stopProgress() {
	if !c.bg.on {
		return
	}
	c.bg.mu.Lock()
	c.bg.eager, c.bg.lazy = 0, 0
	c.bg.mu.Unlock()
	c.wakeServe()
	<-c.bg.done
	unix.Close(c.bg.efd)
	c.bg.on = false
}

// sideRounder is a progressor with work of its own while the application
// drives the engine: inputs the application's progress does not read
// (the udp fabric's sockets of GIDs only QP1 uses).
type sideRounder interface {
	// sideRound is round for those inputs only.
	sideRound(fds []unix.PollFd) (n int, wait time.Duration)
}

func (c *Context) serve(p progressor) {
	defer close(c.bg.done)
	var fds [9]unix.PollFd
	var buf [8]byte
	for {
		c.bg.mu.Lock()
		if c.bg.eager+c.bg.lazy == 0 {
			c.bg.mu.Unlock()
			return
		}
		var n int
		var wait time.Duration
		if c.bg.eager == 0 && c.bg.driven {
			c.bg.driven = false
			wait = lazyCheck
			if s, ok := p.(sideRounder); ok {
				n, wait = s.sideRound(fds[1:])
				wait = min(wait, lazyCheck)
			}
		} else {
			n, wait = p.round(fds[1:])
		}
		fds[0] = unix.PollFd{Fd: int32(c.bg.efd), Events: unix.POLLIN}
		n++
		c.bg.mu.Unlock()
		ts := unix.NsecToTimespec(int64(wait))
		unix.Ppoll(fds[:n], &ts, nil)
		if fds[0].Revents != 0 {
			unix.Read(c.bg.efd, buf[:])
		}
	}
}
