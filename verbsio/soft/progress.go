package soft

import (
	"sync"

	"golang.org/x/sys/unix"
)

// Background progress (Context.StartProgress). Only fabrics that move
// bytes when driven need it (a progressor, as the udp fabric is): on the
// shm fabric the initiator does all the work. While it runs,
// the fast-path entry points of the context take bg.mu; without it they
// take nothing.

type bgProgress struct {
	on   bool // read and written by the owner only
	mu   sync.Mutex
	efd  int
	done chan struct{}
	stop func()
}

// lock and unlock serialize with background progress when it runs.
func (c *Context) lock() {
	if c.bg.on {
		c.bg.mu.Lock()
	}
}

func (c *Context) unlock() {
	if c.bg.on {
		c.bg.mu.Unlock()
	}
}

// StartProgress implements verbsio.Progresser.
func (c *Context) StartProgress() (stop func()) {
	p, ok := c.fab.(progressor)
	if !ok || c.bg.on {
		return func() {}
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return func() {}
	}
	c.bg.efd = efd
	c.bg.done = make(chan struct{})
	c.bg.on = true
	go c.serve(p)
	var once sync.Once
	c.bg.stop = func() {
		once.Do(func() {
			one := [8]byte{1}
			unix.Write(c.bg.efd, one[:])
			<-c.bg.done
			unix.Close(c.bg.efd)
			c.bg.on = false
		})
	}
	return c.bg.stop
}

func (c *Context) serve(p progressor) {
	defer close(c.bg.done)
	var fds [9]unix.PollFd
	for {
		c.bg.mu.Lock()
		n, wait := p.round(fds[1:])
		fds[0] = unix.PollFd{Fd: int32(c.bg.efd), Events: unix.POLLIN}
		n++
		c.bg.mu.Unlock()
		ts := unix.NsecToTimespec(int64(wait))
		unix.Ppoll(fds[:n], &ts, nil)
		if fds[0].Revents != 0 {
			return
		}
	}
}
