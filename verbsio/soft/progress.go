package soft

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Background progress (Context.StartProgress). Only the udp fabric needs
// it: on the shm fabric the initiator does all the work. While it runs,
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
	if c.udp == nil || c.bg.on {
		return func() {}
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return func() {}
	}
	c.bg.efd = efd
	c.bg.done = make(chan struct{})
	c.bg.on = true
	go c.serve()
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

func (c *Context) serve() {
	defer close(c.bg.done)
	f := c.udp
	var fds [9]unix.PollFd
	for {
		c.bg.mu.Lock()
		c.udpProgress()
		f.flush()
		wait := 20 * time.Millisecond
		if d := f.nextDeadline(); d >= 0 && d < wait {
			wait = max(d, 10*time.Microsecond)
		}
		fds[0] = unix.PollFd{Fd: int32(c.bg.efd), Events: unix.POLLIN}
		n := 1 + f.pollFDs(fds[1:])
		c.bg.mu.Unlock()
		ts := unix.NsecToTimespec(int64(wait))
		unix.Ppoll(fds[:n], &ts, nil)
		if fds[0].Revents != 0 {
			return
		}
	}
}
