//go:build linux

package matrix

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/rperf/rperf/tests/interop/internal/vm"
)

// Env is what lines run with.
type Env struct {
	Host vm.Runner // programs in the link's namespace on the host
	VM   vm.Runner // programs in the VM
	// HostRperf is the host's rperf (pure Go, udp fabric); VMRperf the
	// VM's path of rperf built with the ibverbs provider.
	HostRperf, VMRperf string
	// GIDs maps "host" and "vm" to their {gid4} and {gid6} indexes.
	GIDs    map[string]map[string]string
	Results string
	// RperfTimeout is rperf's --timeout on every line.
	RperfTimeout time.Duration
	// Grace is how long one side may still run after the other ended;
	// then it is killed and marked.
	Grace time.Duration
	// Listen bounds the wait for a server to listen.
	Listen time.Duration
	// Capture, when set, starts recording the link for the line whose
	// files start with base (a path relative to the results directory)
	// and returns the function that stops it.
	Capture func(base string) (stop func())
}

// Outcome is a line's result.
type Outcome struct {
	Line
	RperfRC, PeerRC         int
	RperfKilled, PeerKilled bool
	Pass                    bool
	// Reason says why a line failed (or what a passing Disagree line
	// printed).
	Reason string
	// RperfLog and PeerLog are paths relative to the results directory.
	RperfLog, PeerLog string
	Wall              time.Duration
}

// side is one program of a line.
type side struct {
	runner vm.Runner
	argv   []string
	log    string
}

// Run runs one line and judges it.
func (e *Env) Run(ctx context.Context, l Line) Outcome {
	o := Outcome{Line: l, PeerRC: -1, RperfRC: -1}
	// A line may take what rperf itself may take: a passive server waits
	// ten times its --timeout for the client's run.
	limit := max(l.Limit, DefaultLimit, 10*e.RperfTimeout+30*time.Second)
	base := fmt.Sprintf("lines/%03d-%s", l.N, l.Test)
	if e.Capture != nil && !l.Single {
		defer e.Capture(base)()
	}
	rp := side{runner: e.Host, log: base + ".rperf.txt"}
	if l.Setup == VMIbverbs {
		rp.runner = e.VM
	}
	rp.argv = e.rperfArgv(l, l.Flags, !l.RperfServer)
	o.RperfLog = rp.log
	begin := time.Now()
	if l.Single {
		p, err := e.start(rp, limit)
		if err != nil {
			o.Reason = err.Error()
			return o
		}
		r := waitOne(ctx, p, limit)
		o.RperfRC, o.RperfKilled, o.Wall = r.RC, r.Killed, time.Since(begin)
		e.judge(&o)
		return o
	}
	peer := side{runner: e.VM, log: base + ".peer.txt"}
	o.PeerLog = peer.log
	flags := l.Flags
	if l.PeerFlags != "" {
		flags = l.PeerFlags
	}
	if l.Peer.Kind == RperfPeer {
		peer.argv = e.rperfArgv(Line{Case: Case{Test: l.Test}, Setup: VMIbverbs}, flags, l.RperfServer)
	} else {
		peer.argv = e.perftestArgv(l, flags, l.RperfServer)
	}
	srv, cli := peer, rp
	if l.RperfServer {
		srv, cli = rp, peer
	}
	if l.Expect == Refused {
		// Both refuse the flags before they connect: each runs on
		// its own, bounded by the grace period.
		sp, serr := e.start(srv, limit)
		cp, cerr := e.start(cli, limit)
		for _, p := range []vm.Proc{sp, cp} {
			if p != nil {
				waitOne(ctx, p, e.Grace)
			}
		}
		e.record(&o, l, sp, cp)
		o.Wall = time.Since(begin)
		e.judge(&o)
		if err := errors.Join(serr, cerr); err != nil {
			o.Pass, o.Reason = false, err.Error()
		}
		return o
	}
	sp, cp, err := e.RunPairOn(ctx, l.Listener(), srv.runner, srv.argv, srv.log, cli.runner, cli.argv, cli.log, limit)
	e.record(&o, l, sp, cp)
	o.Wall = time.Since(begin)
	e.judge(&o)
	if err != nil {
		// The pair never ran (a server that did not listen): a failure,
		// with rperf's own words when it said why.
		o.Pass = false
		if !strings.HasPrefix(o.Reason, "rperf: ") {
			o.Reason = err.Error()
		}
	}
	return o
}

// RunPair starts a server, waits until it listens on Port, starts the
// client, and waits for both as Run does: the one still running Grace
// after the other ended is killed, both are killed at limit. The logs
// are paths relative to the results directory. A nil Proc did not start.
func (e *Env) RunPair(ctx context.Context, sr vm.Runner, sargv []string, slog string, cr vm.Runner, cargv []string, clog string, limit time.Duration) (srv, cli vm.Proc, err error) {
	return e.RunPairOn(ctx, Listener{Port: Port}, sr, sargv, slog, cr, cargv, clog, limit)
}

// RunPairOn is RunPair with the server listening on ln (an rdma_cm port
// for -R and rping).
func (e *Env) RunPairOn(ctx context.Context, ln Listener, sr vm.Runner, sargv []string, slog string, cr vm.Runner, cargv []string, clog string, limit time.Duration) (srv, cli vm.Proc, err error) {
	begin := time.Now()
	sp, err := e.start(side{runner: sr, argv: sargv, log: slog}, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("server (%s): %w", sr.Name(), err)
	}
	if err := sp.WaitListen(ln.Port, ln.CM, e.Listen); err != nil {
		sp.Kill()
		<-sp.Done()
		return sp, nil, fmt.Errorf("the server (%s) did not listen: %w", sr.Name(), err)
	}
	cp, err := e.start(side{runner: cr, argv: cargv, log: clog}, limit)
	if err != nil {
		sp.Kill()
		<-sp.Done()
		return sp, nil, fmt.Errorf("client (%s): %w", cr.Name(), err)
	}
	e.waitPair(ctx, sp, cp, limit-time.Since(begin))
	return sp, cp, nil
}

// record copies both programs' results into o.
func (e *Env) record(o *Outcome, l Line, srv, cli vm.Proc) {
	set := func(p vm.Proc, isRperf bool) {
		if p == nil {
			return
		}
		r := p.Result()
		if isRperf {
			o.RperfRC, o.RperfKilled = r.RC, r.Killed
		} else {
			o.PeerRC, o.PeerKilled = r.RC, r.Killed
		}
	}
	set(srv, l.RperfServer)
	set(cli, !l.RperfServer)
}

// waitPair waits for both programs: when one ends, the other gets Grace,
// then it is killed; both are killed at the line's limit.
func (e *Env) waitPair(ctx context.Context, a, b vm.Proc, limit time.Duration) {
	hard := time.NewTimer(limit)
	defer hard.Stop()
	killAll := func() {
		a.Kill()
		b.Kill()
	}
	select {
	case <-a.Done():
	case <-b.Done():
	case <-hard.C:
		killAll()
	case <-ctx.Done():
		killAll()
	}
	grace := time.NewTimer(e.Grace)
	defer grace.Stop()
	for _, p := range []vm.Proc{a, b} {
		select {
		case <-p.Done():
		case <-grace.C:
			killAll()
		case <-hard.C:
			killAll()
		case <-ctx.Done():
			killAll()
		}
		<-p.Done()
	}
}

func waitOne(ctx context.Context, p vm.Proc, limit time.Duration) vm.Result {
	select {
	case <-p.Done():
	case <-time.After(limit):
		p.Kill()
	case <-ctx.Done():
		p.Kill()
	}
	<-p.Done()
	return p.Result()
}

// start writes the command line at the top of the side's log and starts
// it.
func (e *Env) start(s side, limit time.Duration) (vm.Proc, error) {
	path := filepath.Join(e.Results, s.log)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte("# "+s.runner.Name()+": "+strings.Join(s.argv, " ")+"\n"), 0o644); err != nil {
		return nil, err
	}
	return s.runner.Start(s.argv, s.log, limit)
}

// serverAddr is where a client of line l connects.
func serverAddr(l Line, rperfIsClient bool) string {
	if l.Setup == HostUDP && !rperfIsClient {
		return vm.HostAddr // the peer in the VM connects to rperf on the host
	}
	return vm.VMAddr
}

// rperfArgv is rperf's command line for l; client says whether it
// connects.
func (e *Env) rperfArgv(l Line, flags string, client bool) []string {
	bin, dev, where := e.HostRperf, "udp_"+vm.Bridge, "host"
	if l.Setup == VMIbverbs {
		bin, dev, where = e.VMRperf, "rxe0", "vm"
	}
	argv := []string{bin, l.Test, "-d", dev}
	argv = append(argv, e.expand(flags, where)...)
	argv = append(argv, strings.Fields(l.RperfFlags)...)
	argv = append(argv, "--timeout", e.RperfTimeout.String())
	if l.Test == "rping" {
		return append(argv, rpingRole(l, client, true)...)
	}
	switch {
	case l.Single:
		argv = append(argv, "--loopback")
	case client:
		argv = append(argv, serverAddr(l, true))
	}
	return argv
}

// rpingRole is an rping side's role and address: a server listens on its
// own address, a client connects to the server's.
func rpingRole(l Line, client, rperf bool) []string {
	if client {
		return []string{"-c", "-a", serverAddr(l, rperf)}
	}
	own := vm.VMAddr
	if rperf && l.Setup == HostUDP {
		own = vm.HostAddr
	}
	return []string{"-s", "-a", own}
}

// perftestArgv is the perftest (or rping) peer's command line for l.
func (e *Env) perftestArgv(l Line, flags string, client bool) []string {
	if l.Peer.Kind == RpingPeer {
		return append(append([]string{l.Peer.Dir + "/" + l.Program()}, e.expand(flags, "vm")...), rpingRole(l, client, false)...)
	}
	argv := []string{l.Peer.Dir + "/" + l.Program(), "-d", "rxe0", "-F"}
	argv = append(argv, e.expand(flags, "vm")...)
	if client {
		argv = append(argv, serverAddr(l, false))
	}
	return argv
}

var placeholder = regexp.MustCompile(`\{(gid4|gid6)\}`)

// expand splits flags and replaces the GID placeholders with where's
// indexes.
func (e *Env) expand(flags, where string) []string {
	flags = placeholder.ReplaceAllStringFunc(flags, func(m string) string {
		if v, ok := e.GIDs[where][m[1:len(m)-1]]; ok {
			return v
		}
		return m // left visible: the program will refuse it
	})
	return strings.Fields(flags)
}

// judge decides o.Pass and o.Reason.
func (e *Env) judge(o *Outcome) {
	rlog := e.read(o.RperfLog)
	plog := e.read(o.PeerLog)
	rerr := firstMatch(rlog, rperfError)
	switch o.Expect {
	case Pass:
		o.Pass = o.RperfRC == 0 && !o.RperfKilled && (o.Single || o.PeerRC == 0 && !o.PeerKilled)
	case Unsupported:
		o.Pass = o.RperfRC == 4 && !o.RperfKilled && rerr != ""
	case Refused:
		o.Pass = o.RperfRC != 0 && !o.RperfKilled && rerr != "" && o.PeerRC != 0 && !o.PeerKilled
	case Disagree:
		o.Pass = o.RperfRC != 0 && !o.RperfKilled && rerr != ""
		if o.Peer.Kind == RperfPeer {
			perr := firstMatch(plog, rperfError)
			o.Pass = o.Pass && o.PeerRC != 0 && !o.PeerKilled &&
				strings.Contains(rerr, "peers disagree") && strings.Contains(perr, "peers disagree")
		}
	}
	switch {
	case rerr != "":
		o.Reason = rerr
	case o.RperfKilled:
		o.Reason = "rperf killed: it did not end by itself"
	case o.PeerKilled:
		o.Reason = "peer killed: it did not end by itself"
	}
	if perr := firstMatch(plog, perftestError); perr != "" && o.Reason == "" {
		o.Reason = "peer: " + perr
	}
	if o.Pass && o.Expect == Pass {
		o.Reason = ""
	}
	if o.Pass && o.Expect == Refused {
		o.Reason = "perftest: \"" + o.Why + "\"; " + rerr
	}
}

var (
	rperfError    = regexp.MustCompile(`^rperf: `)
	perftestError = regexp.MustCompile(`(?i)couldn't|failed|unable|error|mismatch`)
)

func (e *Env) read(rel string) []string {
	if rel == "" {
		return nil
	}
	f, err := os.Open(filepath.Join(e.Results, rel))
	if err != nil {
		return nil
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

func firstMatch(lines []string, re *regexp.Regexp) string {
	for _, s := range lines {
		if strings.HasPrefix(s, "# ") {
			continue // the command line
		}
		if re.MatchString(s) {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// WriteTable prints the outcomes as one table.
func WriteTable(w io.Writer, outs []Outcome) {
	fmt.Fprintf(w, "%-4s %-10s %-34s %-8s %-15s %-13s %-11s %-6s %6s  %s\n",
		"#", "TEST", "FLAGS", "RPERF", "PEER", "ROLES", "RC rperf/pe", "RESULT", "TIME", "LOG / REASON")
	for _, o := range outs {
		fmt.Fprintln(w, Row(o))
	}
}

// Describe is a line's first columns: number, test, flags, where rperf
// runs, peer and roles (what -run matches).
func Describe(l Line) string {
	flags := l.Flags
	if l.PeerFlags != "" {
		flags += " | peer: " + l.PeerFlags
	}
	peer := l.Peer.Name
	if l.Single {
		peer = "-"
	}
	return fmt.Sprintf("%-4d %-10s %-34s %-8s %-15s %-13s", l.N, l.Test, truncate(flags, 34), rperfWhere(l.Setup), peer, l.Roles())
}

// Row is one table row.
func Row(o Outcome) string {
	rc := func(code int, killed bool) string {
		s := fmt.Sprint(code)
		if killed {
			s += "k"
		}
		return s
	}
	rcs := rc(o.RperfRC, o.RperfKilled)
	if !o.Single {
		rcs += "/" + rc(o.PeerRC, o.PeerKilled)
	}
	res := "PASS"
	switch {
	case !o.Pass:
		res = "FAIL"
	case o.Expect == Refused:
		res = "REFUSED" // as expected: perftest refuses it too
	}
	tail := ""
	if !o.Pass {
		tail = o.RperfLog
		if o.Reason != "" {
			tail += "  " + truncate(o.Reason, 140)
		}
	} else if o.Expect != Pass && o.Reason != "" {
		tail = truncate(o.Reason, 140)
	}
	return fmt.Sprintf("%s %-11s %-7s %5.1fs  %s", Describe(o.Line), rcs, res, o.Wall.Seconds(), tail)
}

// rperfWhere names where rperf runs: "host" (udp_br0) or "vm" (rxe0).
func rperfWhere(s Setup) string {
	if s == HostUDP {
		return "host"
	}
	return "vm"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
