package faultrelay

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// runner is what Relay and Wire share: the two pipes, the datagram cap, the
// goroutines serving each direction and their shutdown.
type runner struct {
	pipes [2]*pipe

	accepted atomic.Uint64
	max      uint64

	closers   []io.Closer // closed first by Close, to end the reads
	stopping  atomic.Bool // set by Close before it closes closers
	wg        sync.WaitGroup
	mu        sync.Mutex // guards timer
	timer     *time.Timer
	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
}

// validateFaults checks both directions' faults; op prefixes the error.
func validateFaults(op string, atob, btoa *Faults, life time.Duration) error {
	for _, f := range []struct {
		d Direction
		f *Faults
	}{{AtoB, atob}, {BtoA, btoa}} {
		if err := f.f.validate(); err != nil {
			return fmt.Errorf("faultrelay: %s: %s faults: %w", op, f.d, err)
		}
	}
	if life < 0 {
		return fmt.Errorf("faultrelay: %s: negative max duration %v", op, life)
	}
	return nil
}

// start runs serve for each direction and arms the life timer.
func (r *runner) start(life time.Duration, serve func(Direction)) {
	r.done = make(chan struct{})
	for d := range r.pipes {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			serve(Direction(d))
		}()
	}
	if life == 0 {
		life = DefaultMaxDuration
	}
	r.mu.Lock()
	r.timer = time.AfterFunc(life, func() { r.close() })
	r.mu.Unlock()
}

// admit counts one datagram against the cap; false means discard it.
func (r *runner) admit(p *pipe) bool {
	if r.max > 0 && r.accepted.Add(1) > r.max {
		p.c.received.Add(1)
		p.c.discarded.Add(1)
		return false
	}
	return true
}

func (r *runner) setFaults(op string, d Direction, f Faults) error {
	if d != AtoB && d != BtoA {
		return fmt.Errorf("faultrelay: %s: unknown direction %d", op, d)
	}
	if err := f.validate(); err != nil {
		return fmt.Errorf("faultrelay: %s %s: %w", op, d, err)
	}
	r.pipes[d].setFaults(f)
	return nil
}

func (r *runner) stats() Stats {
	return Stats{AtoB: r.pipes[AtoB].c.snapshot(), BtoA: r.pipes[BtoA].c.snapshot()}
}

func (r *runner) close() error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		if r.timer != nil {
			r.timer.Stop()
		}
		r.mu.Unlock()
		r.stopping.Store(true)
		var errs []error
		for _, c := range r.closers {
			if err := c.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		r.wg.Wait()
		close(r.done)
		if err := errors.Join(errs...); err != nil {
			r.closeErr = fmt.Errorf("faultrelay: close: %w", err)
		}
	})
	return r.closeErr
}

// loop calls read until the forwarder closes, flushing p whenever a queued
// or held datagram falls due. read handles one datagram or frame and returns
// the read error, if any.
func (r *runner) loop(p *pipe, setDeadline func(time.Time) error, read func() error) {
	for {
		setDeadline(p.deadline()) // zero: no deadline
		err := read()
		switch {
		case err == nil:
		case r.stopping.Load(), errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrClosed):
			// Closed: a raw read on a closed file reports an error of
			// its own, hence the flag.
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			p.flush(time.Now())
		default:
			// A transient receive error (such as an ICMP error queued on
			// the socket): count it, and pause so a persistent one cannot
			// spin.
			p.c.errors.Add(1)
			time.Sleep(time.Millisecond)
		}
	}
}
