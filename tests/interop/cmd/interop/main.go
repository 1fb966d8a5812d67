//go:build linux

// Command interop runs rperf against real Linux Soft-RoCE (rdma_rxe) and
// unmodified perftest, and prints one table of the results (make interop).
//
// This machine's kernel may lack rdma_rxe, so the suite builds a VM from
// Debian 12's packages (the distribution kernel, rdma-core 44, perftest
// 4.5) and boots it under qemu (TCG, one vCPU by default), with rxe0 on its
// NIC. The NIC's host end is a tap on a bridge (br0) inside a private
// network namespace, where rperf runs on the udp fabric device udp_br0.
// rperf built with the ibverbs provider runs inside the VM on rxe0. The VM
// takes its orders over a virtio-serial port, and the host's results
// directory is the VM's /out, so no control traffic crosses the link under
// test.
//
// The matrix (tests/interop/internal/matrix) runs every line in both roles
// against perftest 4.5 and, given -perftest, against the perftest built
// from that source tree (or found as binaries there). Every program has a
// time limit: a side still running when the other has ended gets a grace
// period, then it is killed and the line says so. The table lists each
// line's test, flags, roles, exit codes, PASS or FAIL, and on failure the
// log to read and the first error it holds; the exit status is 1 when any
// line failed.
//
// Usage (as root, from the repository):
//
//	go run ./tests/interop/cmd/interop [-perftest DIR] [-run REGEXP] [-list]
//	go run ./tests/interop/cmd/interop -capture   # perftest-to-perftest pcaps
//	go run ./tests/interop/cmd/interop -bench     # perftest vs rperf on rxe0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/rperf/rperf/tests/interop/internal/image"
	"github.com/rperf/rperf/tests/interop/internal/matrix"
	"github.com/rperf/rperf/tests/interop/internal/vm"
	"github.com/rperf/rperf/tests/oob"
)

type config struct {
	build, results, perftest string
	run                      *regexp.Regexp
	list, capture, bench     bool
	pcap                     bool
	smp, mem                 int
	benchRuns                int
	rperfTimeout, grace      time.Duration
	repo                     string
}

func main() {
	var c config
	var run string
	flag.StringVar(&c.build, "build", "/tmp/interop-build", "build and download cache (not in the repository)")
	flag.StringVar(&c.results, "results", "", "results directory (default /tmp/interop-results/<time>)")
	flag.StringVar(&c.perftest, "perftest", "", "upstream perftest: a source tree to build, or a directory holding its ib_* binaries; run as an extra peer")
	flag.StringVar(&run, "run", "", "run only the lines whose row matches this regular expression (see -list)")
	flag.BoolVar(&c.list, "list", false, "list the matrix's lines and exit")
	flag.BoolVar(&c.capture, "capture", false, "instead of the matrix: capture each perftest release's TCP exchange against itself, for tests/oob's testdata")
	flag.BoolVar(&c.bench, "bench", false, "instead of the matrix: perftest against rperf (ibverbs) on rxe0, alternating, three runs each (-bench-runs)")
	flag.IntVar(&c.benchRuns, "bench-runs", 3, "with -bench: runs of each program and of each slow-peer run")
	flag.BoolVar(&c.pcap, "pcap", false, "record each line's link traffic (out-of-band TCP and RoCEv2, first 256 bytes of each packet) in lines/NNN-TEST.pcap")
	flag.IntVar(&c.smp, "smp", 1, "the VM's vCPUs (TCG; the host's cores are shared)")
	flag.IntVar(&c.mem, "mem", 1024, "the VM's memory in MiB")
	flag.DurationVar(&c.rperfTimeout, "rperf-timeout", 15*time.Second, "rperf's --timeout on every line")
	flag.DurationVar(&c.grace, "grace", 10*time.Second, "how long one side may run on after the other ended, before it is killed")
	flag.Parse()
	if c.benchRuns < 1 {
		fatal(fmt.Errorf("-bench-runs %d: give 1 or more", c.benchRuns))
	}
	if run != "" {
		re, err := regexp.Compile(run)
		if err != nil {
			fatal(fmt.Errorf("-run: %w", err))
		}
		c.run = re
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := c.main(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "interop:", err)
	os.Exit(2)
}

func (c *config) main(ctx context.Context) (int, error) {
	begin := time.Now()
	peers := []matrix.Peer{{Name: "perftest " + oob.Perftest45.Version, Kind: matrix.PerftestPeer, Dir: "/usr/bin"}}
	if c.perftest != "" {
		peers = append(peers, matrix.Peer{Name: "perftest up", Kind: matrix.PerftestPeer, Dir: "/opt/interop/perftest"})
	}
	if c.list {
		for _, l := range c.select_(matrix.Build(peers)) {
			fmt.Println(matrix.Describe(l))
		}
		return 0, nil
	}
	if os.Geteuid() != 0 {
		return 2, errors.New("run as root: the suite creates a network namespace, a tap device and downloads packages with apt-get")
	}
	if err := checkTools(); err != nil {
		return 2, err
	}
	repo, err := repoRoot()
	if err != nil {
		return 2, err
	}
	c.repo = repo
	if c.results == "" {
		c.results = filepath.Join("/tmp/interop-results", time.Now().Format("20060102-150405"))
	}
	for _, d := range []string{c.build, c.results} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 2, err
		}
	}
	logf := progress(c.results)
	logf("results in %s", c.results)

	b, err := c.buildAll(ctx, logf)
	if err != nil {
		return 2, err
	}
	if c.perftest != "" {
		v, err := c.upstreamPerftest(ctx, b.share, logf)
		if err != nil {
			return 2, err
		}
		peers[1].Name = "perftest " + v
	}
	img, err := image.Build(ctx, c.build, logWriter(logf))
	if err != nil {
		return 2, err
	}
	os.WriteFile(filepath.Join(c.results, "package-versions.txt"), []byte(strings.Join(img.Versions, "\n")+"\n"), 0o644)

	link, err := vm.NewLink()
	if err != nil {
		return 2, err
	}
	defer link.Close()
	boot := time.Now()
	bootCfg := vm.Config{
		Image: img, Link: link, Results: c.results, Share: b.share, Dir: c.build,
		SMP: c.smp, MemMB: c.mem, Boot: 180 * time.Second, Limit: 6 * time.Hour,
	}
	if c.bench {
		bootCfg.Append = benchKernelArgs
	}
	v, err := vm.Boot(ctx, bootCfg)
	if err != nil {
		return 2, err
	}
	defer func() { v.Shutdown(30 * time.Second) }()
	logf("VM up (kernel %s) in %.1fs", v.Kernel, time.Since(boot).Seconds())

	out, _, err := runOut(ctx, v, c.results, []string{"/usr/bin/ib_write_lat", "--version"}, "devinfo/perftest-version.txt", 30*time.Second)
	if m := versionLine.FindStringSubmatch(out); m == nil || m[1] != oob.Perftest45.Version {
		return 2, fmt.Errorf("the VM's Debian perftest announces %q, not %s: the matrix's expectations are for %s (%v)", out, oob.Perftest45.Version, oob.Perftest45.Name, err)
	}

	env := &matrix.Env{
		Host: &vm.HostRunner{Link: link, Results: c.results}, VM: v,
		HostRperf: b.hostRperf, VMRperf: "/opt/interop/bin/rperf",
		Results: c.results, RperfTimeout: c.rperfTimeout, Grace: c.grace, Listen: 30 * time.Second,
	}
	switch {
	case c.capture:
		return c.captures(ctx, env, link, peers, logf)
	case c.bench:
		return c.runBench(ctx, env, logf)
	}

	if c.pcap {
		filter := fmt.Sprintf("tcp port %d or udp port 4791", matrix.Port)
		env.Capture = func(base string) func() {
			stop, err := startTcpdump(link, filepath.Join(c.results, base+".pcap"), filepath.Join(c.results, base+".tcpdump.txt"), filter, 256)
			if err != nil {
				logf("%s: no capture: %v", base, err)
				return func() {}
			}
			return stop
		}
	}
	info, infoOK := c.devinfo(ctx, env, b, logf)
	env.GIDs, err = gidIndexes(ctx, env, b)
	if err != nil {
		return 2, err
	}
	logf("GID indexes: %v", env.GIDs)

	lines := c.select_(matrix.Build(peers))
	for _, hc := range matrix.HostCases() {
		if hc.ServerOnly != "" {
			logf("not in the matrix with rperf as client: %s %s (%s)", hc.Test, hc.Flags, hc.ServerOnly)
		}
	}
	var outs []matrix.Outcome
	failed, crashes := 0, 0
	if !infoOK {
		failed++
	}
	for i, l := range lines {
		if ctx.Err() != nil {
			break
		}
		o := env.Run(ctx, l)
		if v.Dead() {
			// The guest kernel died under this line (rxe has crashed in
			// softirq context here): say so, and go on with a new VM.
			crashes++
			why := v.Panic()
			if why == "" {
				why = "its agent went away"
			}
			o.Pass = false
			o.Reason = fmt.Sprintf("the VM died during this line: %s (%s); the suite booted a new one", why, filepath.Base(v.Console))
			v.Kill()
			bootCfg.Console = fmt.Sprintf("console-%d.log", crashes)
			nv, err := vm.Boot(ctx, bootCfg)
			if err != nil {
				outs = append(outs, o)
				failed++
				logf("[%d/%d] %s", i+1, len(lines), matrix.Row(o))
				logf("no new VM: %v", err)
				break
			}
			v, env.VM = nv, nv
		}
		outs = append(outs, o)
		if !o.Pass {
			failed++
		}
		logf("[%d/%d] %s", i+1, len(lines), matrix.Row(o))
	}
	var table strings.Builder
	fmt.Fprintf(&table, "interop: rperf %s against %s; VM %s, %d vCPU, TCG\n", b.commit, peerNames(peers), v.Kernel, c.smp)
	matrix.WriteTable(&table, outs)
	fmt.Fprintf(&table, "%s\n", info)
	if crashes > 0 {
		fmt.Fprintf(&table, "the VM died %d times (its console logs: console-N.log); a new VM ran the lines after\n", crashes)
	}
	fmt.Fprintf(&table, "%d lines and devinfo: %d passed, %d failed; %d not run; wall time %s; results in %s\n",
		len(outs), len(outs)+1-failed, failed, len(lines)-len(outs), time.Since(begin).Round(time.Second), c.results)
	os.WriteFile(filepath.Join(c.results, "table.txt"), []byte(table.String()), 0o644)
	fmt.Print(table.String())
	if failed > 0 || len(outs) < len(lines) {
		return 1, nil
	}
	return 0, nil
}

func (c *config) select_(ls []matrix.Line) []matrix.Line {
	if c.run == nil {
		return ls
	}
	var out []matrix.Line
	for _, l := range ls {
		if c.run.MatchString(matrix.Describe(l)) {
			out = append(out, l)
		}
	}
	return out
}

func peerNames(ps []matrix.Peer) string {
	var n []string
	for _, p := range ps {
		n = append(n, p.Name)
	}
	return strings.Join(n, " and ")
}

// progress returns a logger writing timestamped lines to stderr and to
// progress.log in the results directory.
func progress(results string) func(string, ...any) {
	f, _ := os.Create(filepath.Join(results, "progress.log"))
	start := time.Now()
	return func(format string, args ...any) {
		line := fmt.Sprintf("[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
		os.Stderr.WriteString(line)
		if f != nil {
			f.WriteString(line)
		}
	}
}

type logWriterFunc func(string, ...any)

func (f logWriterFunc) Write(b []byte) (int, error) {
	f("%s", strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func logWriter(f func(string, ...any)) io.Writer { return logWriterFunc(f) }
