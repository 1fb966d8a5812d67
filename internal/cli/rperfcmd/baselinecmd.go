package rperfcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/table"
	"github.com/rperf/rperf/tests/baseline"
)

// rperf baseline (package tests/baseline): this machine's limits beside
// the engine's figure for the same work. The engine's figures come from
// rperf's own test commands, run as a user would (--loopback, --json),
// by this executable.

// Defaults of rperf baseline.
const (
	baselineLatIters = 20000 // round trips of every ping-pong, the machine's and the engine's
	baselineBWIters  = 5000  // messages of the stream and the engine's write-bw (perftest's default)
	baselineSamples  = 2000  // samples of each cost, CostBatch operations each
	// baselineUDPTimeout is the engine's ACK timeout exponent on udp_lo
	// (-u): 1.07 s, so that a busy machine that starves a process for
	// half a second (-u 14's 67 ms times 7 retries) does not end the run;
	// a run that loses nothing never waits for it.
	baselineUDPTimeout = 18
	// baselineEngineWait bounds one engine run.
	baselineEngineWait = 5 * time.Minute
)

// baselinePeerFlag is the hidden flag that makes a process a baseline
// peer (tests/baseline.Peer) in the role it names.
const baselinePeerFlag = "baseline-peer"

type baselineCmd struct {
	latIters, bwIters int
	coldRegion        string
	region            int // --cold-region parsed, or baseline.ColdRegion's
	engine            bool
	jsonPath          string
	peer              string
}

func newBaselineCommand() *cobra.Command {
	c := &baselineCmd{}
	cmd := &cobra.Command{
		Use:   "baseline",
		Short: "this machine's limits (UDP and shared-memory ping-pongs, a GSO+GRO stream, memmove, system call, clock) beside the engine's figure for the same work",
		Long: `Measures what this machine can do at all for the work the built-in engine's
tests do, with rperf's clock and statistics, and prints each figure beside
the engine's for the same work, with their ratio (engine / machine):

  UDP ping-pong 64 B     two processes busy polling non-blocking sockets on
                         loopback (recvfrom with MSG_DONTWAIT); one-way p50
                         against send-lat and write-lat on udp_lo
  UDP stream 64 KiB      GSO sends of the engine's 4112-byte packets to a GRO
                         receiver in another process; against write-bw on udp_lo
  shm ping-pong 8 B      two processes spinning on a flag in shared memory;
                         against write-lat on shm0
  memmove 64 KiB, 1 MiB  Go's copy, warm and cache-cold; against write-bw on shm0
  system call            getppid, through Go's Syscall and RawSyscall
  clock read             rperf's clock (the cost every sample carries)

The engine's figures are rperf's own commands with --loopback (a second
rperf process), e.g. rperf send-lat --loopback -d udp_lo -s 64 -n 20000
-u 18 (a long ACK timeout, so that a busy machine does not end the run).
Latency ratios are of p50 one-way latency (above 1: the engine is slower);
bandwidth ratios are of bandwidth (below 1: the engine moves less).
--json writes one rperf/v1 document with every record: the machine's
(tests baseline_*) and the engine's, each engine record carrying the
machine record it is compared with (baseline) and the ratio
(ratio_to_baseline).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.peer != "" {
				return c.runPeer()
			}
			return c.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.IntVarP(&c.latIters, "iters", "n", baselineLatIters, "round trips of every ping-pong, the machine's and the engine's")
	fs.IntVar(&c.bwIters, "bw-iters", baselineBWIters, "64 KiB messages of the UDP stream and of the engine's write-bw runs; copies of each memmove (at most 20000)")
	fs.StringVar(&c.coldRegion, "cold-region", "",
		"bytes of each of the two regions cache-cold copies move through (K, M, G suffixes; default: twice the largest cache sysfs lists, 64M to 512M)")
	fs.BoolVar(&c.engine, "engine", true, "run the engine's tests beside the machine's (--engine=false: the machine only)")
	fs.StringVar(&c.jsonPath, "json", "", "write every record as an rperf/v1 JSON document to FILE (- for stdout, instead of the table)")
	fs.StringVar(&c.peer, baselinePeerFlag, "", "")
	fs.MarkHidden(baselinePeerFlag)
	return cmd
}

// runPeer is the second process of a ping-pong or a stream.
func (c *baselineCmd) runPeer() error {
	return baseline.Peer(c.peer, os.NewFile(3, "baseline"), os.Stdin, os.Stdout)
}

// item is one line of the comparison: the machine's measurement and the
// engine's commands for the same work.
type item struct {
	what    string
	machine func() (reports.Result, error)
	engine  [][]string // rperf's arguments, without --loopback and --json
	unit    string     // "us" (p50 one-way) or "MiB/s"
}

func (c *baselineCmd) items(launch baseline.Launcher) []item {
	n, bw, udpTimeout := strconv.Itoa(c.latIters), strconv.Itoa(c.bwIters), strconv.Itoa(baselineUDPTimeout)
	region := c.region
	copies := min(c.bwIters, reports.PeakIterationLimit) // as many as the engine's write-bw moves
	stream := baseline.Stream{MessageBytes: 64 << 10, Messages: c.bwIters, SegmentPayload: 4096, SegmentOverhead: baseline.StreamSegmentOverhead}
	shmBW := func(size int) [][]string {
		return [][]string{{"write-bw", "-d", "shm0", "-s", strconv.Itoa(size), "-n", bw}}
	}
	return []item{
		{"UDP ping-pong 64 B", func() (reports.Result, error) { return baseline.UDPPingPong(launch, 64, c.latIters) },
			[][]string{{"send-lat", "-d", "udp_lo", "-s", "64", "-n", n, "-u", udpTimeout}, {"write-lat", "-d", "udp_lo", "-s", "64", "-n", n, "-u", udpTimeout}}, "us"},
		{"UDP stream 64 KiB, GSO+GRO", func() (reports.Result, error) { return streamTries(launch, stream) },
			[][]string{{"write-bw", "-d", "udp_lo", "-s", "65536", "-n", bw, "-u", udpTimeout}}, "MiB/s"},
		{"shm ping-pong 8 B", func() (reports.Result, error) { return baseline.SHMPingPong(launch, 8, c.latIters) },
			[][]string{{"write-lat", "-d", "shm0", "-s", "8", "-n", n}}, "us"},
		{"memmove 64 KiB warm", func() (reports.Result, error) { return baseline.Memmove(64<<10, copies, 0) }, shmBW(64 << 10), "MiB/s"},
		{"memmove 64 KiB cold", func() (reports.Result, error) { return baseline.Memmove(64<<10, copies, region) }, shmBW(64 << 10), "MiB/s"},
		{"memmove 1 MiB warm", func() (reports.Result, error) { return baseline.Memmove(1<<20, copies, 0) }, shmBW(1 << 20), "MiB/s"},
		{"memmove 1 MiB cold", func() (reports.Result, error) { return baseline.Memmove(1<<20, copies, region) }, shmBW(1 << 20), "MiB/s"},
		{"system call (Syscall)", func() (reports.Result, error) { return baseline.Syscall(baselineSamples, false) }, nil, "us"},
		{"system call (RawSyscall)", func() (reports.Result, error) { return baseline.Syscall(baselineSamples, true) }, nil, "us"},
		{"clock read", func() (reports.Result, error) { return baseline.ClockRead(baselineSamples) }, nil, "us"},
	}
}

func (c *baselineCmd) run(ctx context.Context, stdout, stderr io.Writer) (err error) {
	if c.latIters < 1 || c.bwIters < 2 {
		return cli.Usagef("-n %d, --bw-iters %d: give at least 1 round trip and 2 messages", c.latIters, c.bwIters)
	}
	if c.region, _ = baseline.ColdRegion(); c.coldRegion != "" {
		n, err := parseSize(c.coldRegion)
		if err != nil || n < 2<<20 {
			return cli.Usagef("--cold-region %s: give at least 2M (two of the largest copies, 1 MiB)", c.coldRegion)
		}
		c.region = n
	}
	jf, err := createOutput(c.jsonPath, "--json")
	if err != nil {
		return err
	}
	if jf != nil {
		defer jf.Close()
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("baseline: cannot find the rperf executable to start its peers: %w", err)
	}
	launch := func(role string) *exec.Cmd { return exec.Command(exe, "baseline", "--"+baselinePeerFlag+"="+role) }
	env := reports.GatherEnv(reports.System{})
	env.SendPath = "baseline"
	tmp, err := os.MkdirTemp("", "rperf-baseline-")
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	defer os.RemoveAll(tmp)

	var rows []baselineRow
	var records []reports.Result
	var failed []string
	engineRuns := map[string]reports.Result{} // one run per command line
	engineErrs := map[string]error{}
	for _, it := range c.items(launch) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("baseline: interrupted before %s: %w", it.what, err)
		}
		fmt.Fprintf(stderr, "baseline: %s ...\n", it.what)
		m, err := it.machine()
		if err != nil {
			return fmt.Errorf("baseline: %s: %w", it.what, err)
		}
		records = append(records, m)
		row := baselineRow{what: it.what, unit: it.unit, machine: m}
		for _, args := range it.engine {
			if !c.engine {
				break
			}
			key := strings.Join(args, " ")
			e, ok := engineRuns[key]
			err := engineErrs[key]
			if !ok && err == nil {
				fmt.Fprintf(stderr, "baseline: rperf %s --loopback ...\n", key)
				if e, err = engineRun(ctx, exe, tmp, args); err != nil {
					engineErrs[key] = err
					failed = append(failed, err.Error())
				} else {
					engineRuns[key] = e
				}
			}
			en := baselineEngine{cmd: "rperf " + key, err: err}
			if err == nil {
				e.Device = args[2]
				ratio, err := ratioTo(m, e)
				if err != nil {
					return fmt.Errorf("baseline: %s: %w", it.what, err)
				}
				e.Baseline, e.RatioToBaseline = m.Test, &ratio
				e.Merit, _, _, _ = reports.MeritOf(e)
				records = append(records, e)
				en.res = e
			}
			row.engine = append(row.engine, en)
		}
		rows = append(rows, row)
	}
	if len(failed) > 0 {
		defer func() {
			if err == nil {
				err = fmt.Errorf("baseline: %d of the engine's runs failed: %s", len(failed), strings.Join(failed, "; "))
			}
		}()
	}
	if c.jsonPath == "-" {
		return writeBaselineDoc(env, records, stdout)
	}
	if err := writeBaseline(stdout, rows, env); err != nil {
		return err
	}
	if jf != nil {
		if err := writeBaselineDoc(env, records, jf); err != nil {
			return fmt.Errorf("--json %s: %w", c.jsonPath, err)
		}
		return jf.Close()
	}
	return nil
}

// streamTries measures the stream up to three times while the kernel
// drops too much of it to time (seen on a machine busy with other UDP
// traffic: a whole stream lost in the loopback backlog).
func streamTries(launch baseline.Launcher, s baseline.Stream) (reports.Result, error) {
	var r reports.Result
	var err error
	for try := 0; try < 3; try++ {
		if r, err = baseline.UDPStream(launch, s); !errors.Is(err, baseline.ErrDropped) {
			break
		}
	}
	return r, err
}

// ratioTo is the engine record's figure of merit over the machine's:
// p50 latency for latency records (above 1: slower), bandwidth for
// bandwidth records (below 1: less). Two bandwidth records of the same
// message size have the ratio of their message rates, which MeritOf
// gives; of different sizes, the bandwidth is compared.
func ratioTo(machine, engine reports.Result) (float64, error) {
	_, mv, _, err := reports.MeritOf(machine)
	if err != nil {
		return 0, err
	}
	_, ev, _, err := reports.MeritOf(engine)
	if err != nil {
		return 0, err
	}
	if (machine.Bandwidth == nil) != (engine.Bandwidth == nil) {
		return 0, fmt.Errorf("%s and %s: a latency and a bandwidth record cannot be compared", machine.Test, engine.Test)
	}
	if machine.Bandwidth != nil && machine.Bytes != engine.Bytes {
		mv, ev = machine.BWAvgMiBps, engine.BWAvgMiBps
	}
	if mv <= 0 {
		return 0, fmt.Errorf("%s: figure of merit %v: nothing to divide by", machine.Test, mv)
	}
	return ev / mv, nil
}

// engineRun runs rperf with args and --loopback, and returns the one
// record of its --json document.
func engineRun(ctx context.Context, exe, dir string, args []string) (reports.Result, error) {
	file := filepath.Join(dir, strings.Join(args, "_")+".json")
	ctx, cancel := context.WithTimeout(ctx, baselineEngineWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, append(append([]string(nil), args...), "--loopback", "--json", file)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	errb := &tailBuffer{max: 4096}
	cmd.Stderr = errb
	if err := cmd.Run(); err != nil {
		msg := serverMessage(errb, err)
		if msg == "" {
			msg = err.Error()
		}
		return reports.Result{}, fmt.Errorf("rperf %s --loopback: %s", strings.Join(args, " "), msg)
	}
	doc, err := reports.ReadFile(file)
	if err != nil {
		return reports.Result{}, err
	}
	if len(doc.Results) != 1 {
		return reports.Result{}, fmt.Errorf("rperf %s --loopback: %d records; want 1", strings.Join(args, " "), len(doc.Results))
	}
	return doc.Results[0], nil
}

// baselineRow is one line of the table.
type baselineRow struct {
	what    string
	unit    string
	machine reports.Result
	engine  []baselineEngine
}

type baselineEngine struct {
	cmd string
	res reports.Result
	err error // the run failed: no res
}

// figure is a record's figure in unit: p50 one-way in us, or average
// bandwidth in MiB/s.
func figure(r reports.Result, unit string) string {
	if unit == "MiB/s" {
		return strconv.FormatFloat(r.BWAvgMiBps, 'f', 0, 64) + " MiB/s"
	}
	us := r.Percentiles[reports.PercentileKey(50)]
	if us < 1 {
		return strconv.FormatFloat(us*1000, 'f', 1, 64) + " ns"
	}
	return strconv.FormatFloat(us, 'f', 3, 64) + " us"
}

// writeBaseline prints the comparison table.
func writeBaseline(w io.Writer, rows []baselineRow, env reports.Env) error {
	e := &errPrinter{w: w}
	e.banner("rperf baseline: this machine's limits beside the engine's figure for the same work")
	e.printf(" latency: p50 one-way; bandwidth: average MiB/s; ratio: engine / machine\n")
	e.printf(" %-27s %-13s %-13s %-8s %s\n", "work", "machine", "engine", "ratio", "engine's command (--loopback)")
	for _, r := range rows {
		m := figure(r.machine, r.unit)
		if len(r.engine) == 0 {
			e.printf(" %-27s %-13s\n", r.what, m)
			continue
		}
		for i, en := range r.engine {
			what := r.what
			if i > 0 {
				what, m = "", ""
			}
			if en.err != nil {
				e.printf(" %-27s %-13s %-13s %-8s %s\n", what, m, "failed", "-", en.cmd+" (see below)")
				continue
			}
			e.printf(" %-27s %-13s %-13s %-8s %s\n", what, m, figure(en.res, r.unit),
				strconv.FormatFloat(*en.res.RatioToBaseline, 'f', 2, 64)+"x", en.cmd)
		}
		if r.machine.Bandwidth != nil && r.machine.LostMessages > 0 {
			e.printf(" %-27s (the kernel dropped %d of the stream's messages; the rate is of what arrived)\n", "", r.machine.LostMessages)
		}
	}
	e.printf(" clock: %s, cost %.1f ns per read\n", env.Clock.Name, env.Clock.CostNs)
	e.printf("%s\n", table.ResultLine)
	return e.err
}

func writeBaselineDoc(env reports.Env, records []reports.Result, w io.Writer) error {
	doc := reports.NewDocument(env)
	doc.Results = append(doc.Results, records...)
	return doc.Write(w)
}
