package session

import (
	"slices"
	"strings"
	"time"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/verbsio"
)

// Config is what the configurations of every test family share and embed
// (latency.Config, bw.Config): which test, its run shape (message sizes,
// iterations or duration, warm-up), its queues, its send path, its link
// to the peer, and the callbacks of a run. Default gives perftest's
// defaults for a test; Check its rules.
type Config struct {
	Test       Test
	Connection verbsio.QPType // RC, UC or UD, as the test allows
	// Sizes are the message sizes, one run each (perftest -s, or -a).
	Sizes []int
	// All says the sizes come from -a (a perftest peer's sequence has
	// steps between the sizes of -a).
	All bool
	// Iterations per size (per QP in bandwidth tests; perftest -n), at
	// least MinIterations. Ignored in duration mode.
	Iterations int
	// Duration selects duration mode (perftest -D); Margin is the warm-up
	// and cool-down margin (perftest -f). Duration must exceed 2×Margin.
	Duration, Margin time.Duration
	// Warmup iterations (latency) or messages per QP (bandwidth) run
	// before each size and are not measured (iterations mode only).
	Warmup int
	// TxDepth is the send queue depth: the messages outstanding per QP
	// (perftest -t). RxDepth is the receives kept posted per QP by SEND
	// tests (perftest -r).
	TxDepth, RxDepth int
	// Inline is the largest message sent inline (perftest -I); Default
	// sets perftest's choice for the test. READs and atomics never inline.
	Inline int
	// OutReads is the READ/atomic depth (perftest -o); 0 means the
	// device's maximum.
	OutReads int
	// AtomicOp is OpAtomicFetchAdd (default) or OpAtomicCmpSwp (perftest -A).
	AtomicOp verbsio.Opcode
	// Validate makes every message carry a pattern its receiver checks
	// byte by byte (tests/internal/datacheck; each family's documentation
	// says what its tests check). Both sides must agree; the checks add
	// their cost to what is measured.
	Validate bool
	// Path is the send path (package sendpath): how both sides post and
	// where their buffers live. Inline sends every message inline (the
	// inline size is raised to the largest message); DM puts the buffers
	// in device memory and never inlines.
	Path sendpath.Path
	// Segmenter says who cuts messages into packets on a packet fabric;
	// 0 leaves it to the path (Path.QPSegmenter).
	Segmenter verbsio.Segmenter
	// Link is how the test reaches its peer: port, GID, MTU, ACK timeout
	// (perftest -i, -x, -m, -u), the stall timeout and the parameters both
	// sides check.
	Link
	// PassiveWait bounds how long a passive server waits for the client's
	// run of one size to end; 0 means 10×StallTimeout (plus the duration).
	PassiveWait time.Duration

	// OnConnected, if set, is called once the QPs are connected.
	OnConnected func(Info)
	// OnProgress, if set, is called before each size's run.
	OnProgress func(Progress)
	// OnResult, if set, is called with each size's result as it is ready.
	OnResult func(reports.Result)
}

// Default returns perftest's defaults for test t: its default message
// size, iterations, tx depth and inline size, the default rx depth, RC,
// FETCH_AND_ADD, and the GID perftest would pick.
func Default(t Test) Config {
	c := Config{Test: t, Connection: verbsio.QPTypeRC, AtomicOp: verbsio.OpAtomicFetchAdd, RxDepth: DefaultRxDepth,
		Link: Link{GIDIndex: AutoGID}}
	if t.Valid() {
		c.Sizes = []int{t.DefaultSize()}
		c.Iterations, c.TxDepth, c.Inline = t.DefaultIterations(), t.DefaultTxDepth(), t.DefaultInline(verbsio.QPTypeRC)
	}
	return c
}

// Check reports every problem with c that would stop Run, in the order of
// its rules, as Problems of FieldErrors; nil if there is none. A family's
// Check adds its own rules.
func (c *Config) Check() error {
	var ps Problems
	t := c.Test
	if !t.Valid() {
		ps.AddField(NewFieldError("Test", int(t), "not one of rperf's tests"))
		return ps.Err()
	}
	if types := t.Connections(); !slices.Contains(types, c.Connection) {
		names := make([]string, len(types))
		for i, typ := range types {
			names[i] = typ.String()
		}
		ps.AddField(NewFieldError("Connection", c.Connection, "%s runs over %s only; it does not run over %s", t.Command(), strings.Join(names, " or "), c.Connection))
	}
	ps.AddField(checkSizes(t, c.Sizes))
	ps.AddField(c.checkLength())
	ps.Add(CheckTxDepth(c.TxDepth))
	if t.Verb() == Send {
		ps.Add(CheckRxDepth(c.RxDepth))
	}
	if c.Inline < 0 || c.Inline > MaxInline {
		ps.AddField(NewFieldError("Inline", c.Inline, "inline size must be between 0 and %d", MaxInline))
	}
	if c.OutReads != 0 {
		ps.Add(CheckOutReads(c.OutReads))
	}
	if t.Verb() == Atomic && c.AtomicOp != verbsio.OpAtomicFetchAdd && c.AtomicOp != verbsio.OpAtomicCmpSwp {
		ps.AddField(NewFieldError("AtomicOp", c.AtomicOp, "the atomic operation must be FETCH_AND_ADD or CMP_AND_SWAP"))
	}
	ps.AddField(c.checkPath())
	return ps.Err()
}

// checkLength checks how long the test runs: in iterations mode at least
// MinIterations, in duration mode a duration longer than its two margins
// and no warm-up.
func (c *Config) checkLength() *FieldError {
	switch {
	case c.Duration < 0:
		return NewFieldError("Duration", c.Duration, "the duration cannot be negative")
	case c.Margin < 0:
		return NewFieldError("Margin", c.Margin, "the margin cannot be negative")
	case c.Duration > 0 && c.Duration <= 2*c.Margin:
		return NewFieldError("Duration", c.Duration, "{Duration=} {Margin=}: the duration must be longer than twice the margin").
			WithValue("Margin", c.Margin).WithFix("use a longer {Duration} or a smaller {Margin}")
	case c.Duration == 0 && c.Iterations < MinIterations:
		return NewFieldError("Iterations", c.Iterations, "at least %d iterations are needed", MinIterations)
	case c.Warmup < 0:
		return NewFieldError("Warmup", c.Warmup, "the warm-up cannot be negative")
	case c.Duration > 0 && c.Warmup > 0:
		return NewFieldError("Warmup", c.Warmup, "{Warmup} and {Duration} conflict: a warm-up applies to iterations mode; duration mode warms up during its margin ({Margin})").
			WithFix("drop {Warmup}")
	}
	return nil
}

// checkPath checks that the send path applies to the test and to data
// validation.
func (c *Config) checkPath() *FieldError {
	if err := sendpath.Applies(c.Path, c.Test.PathTest(c.Connection)); err != nil {
		return NewFieldError("Path", c.Path, "{Path=} does not apply to %s: %v", c.Test.Command(), err)
	}
	switch {
	case c.Validate && c.Path == sendpath.DM:
		return NewFieldError("Path", c.Path, "{Path=} and {Validate} conflict: data validation reads the buffers as host memory, and the dm path keeps them in device memory").
			WithFix("validate on another path")
	case c.Validate && c.Path == sendpath.Burst:
		return NewFieldError("Path", c.Path, "{Path=} and {Validate} conflict: data validation finds each receive's buffer from its work request ID, which RecvBurst does not set").
			WithFix("validate on another path")
	}
	return nil
}

// MaxSize is the largest of the message sizes (0 without any).
func (c *Config) MaxSize() int {
	if len(c.Sizes) == 0 {
		return 0
	}
	return slices.Max(c.Sizes)
}

// InlineSize is the inline size the QPs ask for: none for READs and
// atomics, else as the path has it (sendpath.Path.InlineSize).
func (c *Config) InlineSize() int {
	if v := c.Test.Verb(); v == Read || v == Atomic {
		return 0
	}
	return c.Path.InlineSize(c.Inline, c.MaxSize())
}

// SendsInline reports whether messages of size go inline: as perftest,
// when the size is at most the inline size the test asked for
// (InlineSize), not what the device granted (rxe rounds a request of 0 up
// to 16 bytes and more), and so never for READs and atomics: inline data
// on either has no local buffer for the response, and rxe fails it with
// LOC_PROT_ERR.
func (c *Config) SendsInline(size int) bool {
	return size <= c.InlineSize()
}

// Spec is the session the test needs, for one QP; a family adjusts the
// rest (Family.Shape).
func (c *Config) Spec() Spec {
	return Spec{
		Verb: c.Test.Verb(), Type: c.Connection, QPs: 1, MaxSize: c.MaxSize(),
		TxDepth: c.TxDepth, RxDepth: c.RxDepth, Inline: c.InlineSize(), OutReads: c.OutReads,
		Link: c.Link, Path: c.Path, Segmenter: c.Segmenter,
		Program: c.Test.Program(), Sizes: c.Sizes, All: c.All, Duration: c.Duration > 0,
	}
}
