package rperfcmd

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/tests/session"
)

// progress shows, on a terminal only, which size a long run (-a, -D) is
// at, on stderr, erased before each result line.
type progress struct {
	w       io.Writer
	enabled bool
	mu      sync.Mutex
	shown   bool
	done    chan struct{}
	wg      sync.WaitGroup
}

// newProgress returns the display of a run on stderr: shown on a terminal
// only, not by --loopback's server process, and for a test command only
// when its run is long (-a, -D); long says the run always is (the
// comparisons, the sweep).
func newProgress(stderr io.Writer, o *options, long bool) *progress {
	p := &progress{w: stderr}
	f, ok := stderr.(*os.File)
	p.enabled = ok && cli.IsTerminal(f) && (long || o.all || o.changed("duration")) && !o.loopbackServer
	return p
}

// start announces a run; in duration mode it keeps a countdown going.
func (p *progress) start(pr session.Progress) {
	if !p.enabled {
		return
	}
	p.stopTicker()
	label := fmt.Sprintf(" [%d/%d] %d bytes", pr.Index+1, pr.Count, pr.Bytes)
	p.show(label + " ...")
	if pr.Duration <= 0 {
		return
	}
	p.done = make(chan struct{})
	p.wg.Add(1)
	go func(done chan struct{}, begin time.Time) {
		defer p.wg.Done()
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				el := now.Sub(begin).Truncate(time.Second)
				p.show(fmt.Sprintf("%s: %v of %v", label, min(el, pr.Duration), pr.Duration))
			}
		}
	}(p.done, time.Now())
}

func (p *progress) show(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\033[K%s", s)
	p.shown = true
}

// clear erases the progress line, if one is shown.
func (p *progress) clear() {
	if !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

func (p *progress) stopTicker() {
	if p.done != nil {
		close(p.done)
		p.wg.Wait()
		p.done = nil
	}
}

// stop ends the display.
func (p *progress) stop() {
	if !p.enabled {
		return
	}
	p.stopTicker()
	p.clear()
}
