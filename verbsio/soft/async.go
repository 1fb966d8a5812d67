package soft

import (
	"sync"
	"sync/atomic"

	"github.com/rperf/rperf/verbsio"
)

// Asynchronous events (verbsio.AsyncEventSource): the engine posts them
// from wherever it notices them — a received packet, a poll — without
// blocking and without calling anyone; a goroutine of the context, started
// by the first subscriber, hands them to the subscribers with no engine
// lock held. Nothing is queued while nobody listens.

// asyncQueue is how many events wait for the subscribers; beyond, events
// are dropped and counted (asyncEvents.dropped).
const asyncQueue = 256

type asyncEvents struct {
	on      atomic.Bool // a subscriber listens: post queues
	dropped atomic.Uint64

	mu     sync.Mutex // guards the rest
	subs   []*asyncSub
	q      chan verbsio.AsyncEvent
	done   chan struct{}
	exited chan struct{}
}

type asyncSub struct {
	mu     sync.Mutex // held while f runs
	f      func(verbsio.AsyncEvent)
	cancel bool
}

// post queues e for the subscribers. It never blocks: on the receive path
// it is one load while nobody listens.
func (a *asyncEvents) post(e verbsio.AsyncEvent) {
	if !a.on.Load() {
		return
	}
	a.mu.Lock()
	q := a.q
	a.mu.Unlock()
	if q == nil {
		return
	}
	select {
	case q <- e:
	default:
		a.dropped.Add(1)
	}
}

// SubscribeAsyncEvents implements verbsio.AsyncEventSource.
func (c *Context) SubscribeAsyncEvents(f func(verbsio.AsyncEvent)) (cancel func()) {
	a := &c.async
	s := &asyncSub{f: f}
	a.mu.Lock()
	if a.q == nil {
		a.q = make(chan verbsio.AsyncEvent, asyncQueue)
		a.done = make(chan struct{})
		a.exited = make(chan struct{})
		go a.deliver(a.q, a.done, a.exited)
	}
	a.subs = append(a.subs, s)
	a.on.Store(true)
	a.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.cancel = true
			s.mu.Unlock()
			a.mu.Lock()
			for i, x := range a.subs {
				if x == s {
					a.subs = append(a.subs[:i], a.subs[i+1:]...)
					break
				}
			}
			a.on.Store(len(a.subs) > 0)
			a.mu.Unlock()
		})
	}
}

func (a *asyncEvents) deliver(q chan verbsio.AsyncEvent, done, exited chan struct{}) {
	defer close(exited)
	for {
		select {
		case <-done:
			return
		case e := <-q:
			a.mu.Lock()
			subs := append([]*asyncSub(nil), a.subs...)
			a.mu.Unlock()
			for _, s := range subs {
				s.mu.Lock()
				if !s.cancel {
					s.f(e)
				}
				s.mu.Unlock()
			}
		}
	}
}

// close stops the delivery goroutine (the context closes).
func (a *asyncEvents) close() {
	a.mu.Lock()
	done, exited := a.done, a.exited
	a.q, a.done, a.exited, a.subs = nil, nil, nil, nil
	a.on.Store(false)
	a.mu.Unlock()
	if done != nil {
		close(done)
		<-exited
	}
}
