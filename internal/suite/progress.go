package suite

import (
	"fmt"
	"io"
	"time"
)

// progress reports the suite's progress: on a terminal one line redrawn
// in place with the time left, elsewhere (a CI log) one line per run.
type progress struct {
	w        io.Writer
	terminal bool
	total    int
	reps     int
	start    time.Time
	now      func() time.Time
	drawn    bool
}

func (p *progress) label(rec RunRecord) string {
	side := ""
	if rec.Side != "" {
		side = rec.Side + " "
	}
	if rec.Repetition == 0 {
		return fmt.Sprintf("%s%s warm-up", side, rec.Test)
	}
	return fmt.Sprintf("%s%s %d/%d", side, rec.Test, rec.Repetition, p.reps)
}

func (p *progress) starting(i int, rec RunRecord) {
	if p.w == nil || !p.terminal {
		return
	}
	elapsed := p.now().Sub(p.start)
	left := ""
	if i > 0 {
		left = fmt.Sprintf(", about %s left", clockTime(elapsed*time.Duration(p.total-i)/time.Duration(i)))
	}
	fmt.Fprintf(p.w, "\r\033[Krperf suite: run %d of %d: %s (%s elapsed%s)", i+1, p.total, p.label(rec), clockTime(elapsed), left)
	p.drawn = true
}

func (p *progress) done(i int, rec RunRecord, err error) {
	if p.w == nil || p.terminal {
		return
	}
	status := fmt.Sprintf("%.1fs", rec.Seconds)
	if err != nil {
		status = "failed"
	}
	fmt.Fprintf(p.w, "rperf suite: run %d of %d: %s: %s\n", i+1, p.total, p.label(rec), status)
}

func (p *progress) finish() {
	if p.w != nil && p.terminal && p.drawn {
		fmt.Fprintf(p.w, "\r\033[Krperf suite: %d runs in %s\n", p.total, clockTime(p.now().Sub(p.start)))
	}
}

// clockTime prints a duration as m:ss or h:mm:ss.
func clockTime(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
