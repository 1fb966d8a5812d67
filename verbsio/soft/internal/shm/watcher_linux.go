package shm

import (
	"sync"

	"golang.org/x/sys/unix"
)

// Watcher waits, in one goroutine blocked in poll(2), for watched processes
// to exit, and marks them dead. It costs nothing on the fast path, which
// only loads Proc.Dead.
type Watcher struct {
	mu      sync.Mutex
	procs   map[*Proc]func()
	efd     int
	done    chan struct{}
	started bool
	closed  bool
}

// NewWatcher returns a watcher; its goroutine starts with the first Watch.
func NewWatcher() *Watcher { return &Watcher{procs: map[*Proc]func(){}, efd: -1} }

// Watch starts watching p; onExit runs (in the watcher's goroutine) once
// when p exits. Processes without a pidfd (and this process) are not watched.
func (w *Watcher) Watch(p *Proc, onExit func()) error {
	if p.self || p.pidfd < 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	if !w.started {
		efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			return err
		}
		w.efd = efd
		w.done = make(chan struct{})
		w.started = true
		go w.loop()
	}
	w.procs[p] = onExit
	w.kick()
	return nil
}

// Unwatch stops watching p.
func (w *Watcher) Unwatch(p *Proc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.procs[p]; ok {
		delete(w.procs, p)
		w.kick()
	}
}

func (w *Watcher) kick() {
	if w.efd >= 0 {
		var one = [8]byte{1}
		unix.Write(w.efd, one[:])
	}
}

// Close stops the goroutine and waits for it to return.
func (w *Watcher) Close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	started := w.started
	w.kick()
	w.mu.Unlock()
	if started {
		<-w.done
		unix.Close(w.efd)
	}
}

func (w *Watcher) loop() {
	defer close(w.done)
	var buf [8]byte
	for {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return
		}
		fds := make([]unix.PollFd, 0, len(w.procs)+1)
		procs := make([]*Proc, 0, len(w.procs))
		fds = append(fds, unix.PollFd{Fd: int32(w.efd), Events: unix.POLLIN})
		for p := range w.procs {
			fds = append(fds, unix.PollFd{Fd: int32(p.pidfd), Events: unix.POLLIN})
			procs = append(procs, p)
		}
		w.mu.Unlock()
		n, err := unix.Poll(fds, -1)
		if err != nil || n == 0 {
			continue
		}
		if fds[0].Revents != 0 {
			unix.Read(w.efd, buf[:])
		}
		for i, p := range procs {
			if fds[i+1].Revents == 0 {
				continue
			}
			// A descriptor closed after Unwatch reports POLLNVAL: only a
			// process still watched counts as exited.
			w.mu.Lock()
			fn, ok := w.procs[p]
			delete(w.procs, p)
			w.mu.Unlock()
			if ok && fds[i+1].Revents&unix.POLLNVAL == 0 {
				p.MarkDead()
				if fn != nil {
					fn()
				}
			}
		}
	}
}
