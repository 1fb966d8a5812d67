package session

import (
	"context"
	"fmt"
	"time"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/verbsio"
)

// A session against perftest follows the peer's own out-of-band sequence
// (oob.Release.Sequence): the program's key exchanges, barriers, reports
// and close, in perftest's order and counts for the release the peer
// announced. Between two rperfs the session keeps rperf's own sequence
// (the package documentation), which both sides run alike.

// Reporter is what a bandwidth family adds to its Measurer to run
// perftest's report exchanges (oob.StepReport) where the peer's sequence
// has them.
type Reporter interface {
	// LocalReport is this side's report of message size size (0: the
	// last size run), as it goes to the peer.
	LocalReport(size int) oob.BWReport
	// PeerReport turns the exchange into this side's result, if it has
	// one there (a bidirectional side adds the peer's figures to its own;
	// a passive server takes the client's).
	PeerReport(size int, local, remote oob.BWReport) (res reports.Result, ok bool, err error)
}

// Preparer is what a family adds to its Measurer when a run needs
// preparing before the peer may start it: Prepare(i, size) is called
// before the exchanges that lead to run number i.
type Preparer interface {
	Prepare(i, size int) error
}

// script is the peer's sequence and how far the session has walked it.
type script struct {
	seq    oob.Sequence
	pos    int
	keyed  bool // a key message went out: barriers repeat QP 0's
	closed bool // the sequence's close was exchanged (or it has none)
}

// Scripted reports whether the session follows a perftest peer's own
// sequence: the families then leave the exchanges around their runs to
// Run.
func (s *Session) Scripted() bool { return s.script != nil }

// Sequence returns the perftest sequence the session follows, if it does.
func (s *Session) Sequence() (oob.Sequence, bool) {
	if s.script == nil {
		return oob.Sequence{}, false
	}
	return s.script.seq, true
}

// planScript chooses the peer's sequence after the handshake: only for a
// perftest peer (not rperf) of a test perftest has, with or without -R
// (perftest -R runs the same exchanges over its rdma_cm channel).
func (s *Session) planScript() error {
	sp := &s.Spec
	if s.Peer.Rperf || sp.Program == "" {
		return nil // between rperfs, rperf's own
	}
	o := oob.SequenceOptions{
		Server: s.Server, PeerVersion: oob.Version, QPs: sp.QPs, All: sp.All, Duplex: sp.Duplex,
		Duration: sp.Duration, MTU: oob.MTU(s.MTU), Conn: oob.ConnType(sp.Type.String()),
	}
	for _, n := range sp.Sizes {
		o.Sizes = append(o.Sizes, uint64(n))
	}
	if s.Peer.Version == "" {
		o.NoVersionExchange = true
	}
	rel := oob.ReleaseFor(s.Peer.Version)
	seq, err := rel.Sequence(sp.Program, o)
	if err != nil {
		return fmt.Errorf("the peer runs perftest %s: %w", s.Peer.Version, err)
	}
	sc := &script{seq: seq}
	// The opening (versions, sys-data, MTU) was the handshake's.
	for sc.pos < len(seq.Steps) && opening(seq.Steps[sc.pos].Kind) {
		sc.pos++
	}
	s.script = sc
	if s.cm != nil && s.Server && oob.ServerDisconnectsFirst(s.Peer.Version) {
		s.cm.SetDisconnectFirst() // at the close, as the peer expects
	}
	return nil
}

// opening reports whether k is one of the opening steps Conn.Handshake
// runs.
func opening(k oob.StepKind) bool {
	switch k {
	case oob.StepVersion, oob.StepSysData, oob.StepMTU, oob.StepNegotiate, oob.StepParams:
		return true
	}
	return false
}

// walkOpen runs the sequence up to and including the connection of the
// QPs (connect is called there).
func (s *Session) walkOpen(ctx context.Context, connect func() error) error {
	sc := s.script
	for sc.pos < len(sc.seq.Steps) {
		st := sc.seq.Steps[sc.pos]
		sc.pos++
		if st.Kind == oob.StepConnect {
			return connect()
		}
		if err := s.exchange(ctx, st, 0); err != nil {
			return err
		}
	}
	return fmt.Errorf("the %s sequence has no connect step", sc.seq.Program)
}

// exchange runs one of the sequence's exchanges but reports and runs.
func (s *Session) exchange(ctx context.Context, st oob.Step, wait time.Duration) error {
	sc := s.script
	switch st.Kind {
	case oob.StepKey:
		if st.QP >= len(s.Local) {
			return fmt.Errorf("the %s sequence exchanges the key of QP %d of %d", sc.seq.Program, st.QP, len(s.Local))
		}
		return s.Serve(func() error {
			d, err := s.Conn.ExchangeKeys(ctx, s.Local[st.QP])
			if err == nil && !s.remoteSet[st.QP] {
				s.Remote[st.QP], s.remoteSet[st.QP] = d, true
			}
			sc.keyed = true
			return err
		})
	case oob.StepBarrier:
		if !sc.keyed {
			// write_lat, read_lat and atomic_lat synchronise on QP 0's
			// key before any key was exchanged.
			sc.keyed = true
			return s.Serve(func() error { _, err := s.Conn.ExchangeKeys(ctx, s.Local[0]); return err })
		}
		return s.Barrier(ctx, wait)
	case oob.StepClose:
		sc.closed = true
		done := sc.pos < len(sc.seq.Steps) && sc.seq.Steps[sc.pos].Kind == oob.StepDone
		err := s.Serve(func() error { return s.Conn.FinishWait(ctx, wait, done) })
		if err != nil && s.Spec.Verb == Send && s.Spec.Type == verbsio.QPTypeUC && !s.Server {
			// A perftest server counts every SEND before it closes; UC
			// resends nothing, so one message lost on the way keeps it
			// waiting (it gives up after 60-120 s, if ever).
			err = fmt.Errorf("%w; over UC a message lost on the way is not resent and perftest's receiver waits for every one: pace this side with --rate_limit (packet pacing) below what the receiver takes", err)
		}
		return err
	case oob.StepDone:
		return nil // the close wrote it
	}
	return fmt.Errorf("the %s sequence has a %s step where none is expected", sc.seq.Program, st.Kind)
}

// walk runs the rest of the sequence after the connection: the runs
// (Measurer.Measure) with the exchanges between them, and the close.
func walk(ctx context.Context, s *Session, c *Config, m Measurer) ([]reports.Result, error) {
	sc := s.script
	e := newEmitter(c, m)
	prep, _ := m.(Preparer)
	rep, _ := m.(Reporter)
	passive := c.PassiveWait
	if passive <= 0 {
		passive = 10 * c.Stall()
	}
	passive += c.Duration
	i, prepared, last := 0, -1, 0
	for sc.pos < len(sc.seq.Steps) {
		st := sc.seq.Steps[sc.pos]
		sc.pos++
		if prep != nil && i < len(c.Sizes) && prepared < i {
			if err := prep.Prepare(i, c.Sizes[i]); err != nil {
				return e.results, err
			}
			prepared = i
		}
		var wait time.Duration
		if st.PeerRuns {
			wait = passive
		}
		switch st.Kind {
		case oob.StepRun:
			if i >= len(c.Sizes) {
				return e.results, fmt.Errorf("the %s sequence runs more sizes than the %d given", sc.seq.Program, len(c.Sizes))
			}
			size := c.Sizes[i]
			if c.OnProgress != nil {
				c.OnProgress(Progress{Index: i, Count: len(c.Sizes), Bytes: size, Duration: c.Duration})
			}
			res, ok, err := m.Measure(ctx, i, size)
			if err != nil {
				return e.results, err
			}
			if ok {
				e.emit(res)
			}
			last = size
			i++
		case oob.StepReport:
			if rep == nil {
				return e.results, fmt.Errorf("the %s sequence exchanges a bandwidth report, which this test does not make", sc.seq.Program)
			}
			size := int(st.Size)
			if size == 0 {
				size = last
			}
			local := rep.LocalReport(size)
			var remote oob.BWReport
			err := s.Serve(func() error {
				var err error
				remote, err = s.Conn.ExchangeBWReport(ctx, local)
				return err
			})
			if err != nil {
				return e.results, err
			}
			res, ok, err := rep.PeerReport(size, local, remote)
			if err != nil {
				return e.results, err
			}
			if ok {
				e.emit(res)
			}
		default:
			if err := s.exchange(ctx, st, wait); err != nil {
				return e.results, err
			}
		}
	}
	if !sc.closed {
		// A sequence without a close (write_lat): the peer's program
		// exits when its last operation completed. The client's last
		// RDMA WRITE needs the server's acknowledgement, so the server
		// serves until the client has closed the connection.
		sc.closed = true
		if s.Server {
			s.disconnectFirst()
			if err := s.Serve(func() error { return s.Conn.AwaitClose(ctx, c.Stall()) }); err != nil {
				return e.results, err
			}
		}
	}
	return e.results, nil
}

// disconnectFirst sends the test QPs' DREQs now, on the server of an
// rdma_cm run whose perftest client waits for them before it closes
// anything (oob.ServerDisconnectsFirst): otherwise each side would wait
// for the other's close.
func (s *Session) disconnectFirst() {
	if s.cm != nil && s.Server && s.script != nil && oob.ServerDisconnectsFirst(s.Peer.Version) {
		s.cm.DisconnectQPs()
	}
}
