//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rperf/rperf/tests/interop/internal/matrix"
	"github.com/rperf/rperf/tests/interop/internal/vm"
)

// A bench metric: which column of which test's perftest-format result row,
// and the goal for rperf's median over perftest's (issue 9 item 5).
type metric struct {
	name   string
	test   string // rperf command
	col    int    // 0-based column of the result row
	goal   float64
	higher bool // larger is better (bandwidth)
}

var metrics = []metric{
	{"write-lat t_typical [usec]", "write-lat", 4, 1.10, false},
	{"write-lat t_avg [usec]", "write-lat", 5, 0, false},
	{"write-lat 99% [usec]", "write-lat", 7, 1.5, false},
	{"write-bw BW average [MiB/s]", "write-bw", 3, 0.90, true},
}

// benchKernelArgs boot the bench's VM with the TSC as its clocksource.
// Under TCG the guest kernel does not trust the TSC and picks the HPET,
// which the vDSO cannot read: every clock_gettime is then a system call
// and an emulated HPET read, 1.1-1.7 us in the VM (internal/clock's
// BenchmarkRead, hw's BenchmarkDeviceClock) against 0.11-0.18 us with the
// TSC. rperf stamps each iteration with CLOCK_MONOTONIC; perftest reads
// the TSC itself (rdtsc) and is not affected, so with the HPET the bench
// measured the emulator's clock device rather than rperf. The vCPUs' TSC
// is QEMU's one virtual clock, so it is monotonic across them; both
// programs scale it by the same kernel calibration.
const benchKernelArgs = "clocksource=tsc tsc=reliable"

// benchRperf is where the bench copies the VM's rperf: the guest's /tmp,
// a tmpfs.
const benchRperf = "/tmp/rperf"

// benchArgs are the flags of both programs in the bench; rperf also gets
// the inline size perftest chose (see inlineSize).
var benchArgs = map[string][]string{
	"write-lat": {"-s", "2", "-n", "2000"},
	"write-bw":  {"-s", "65536", "-n", "2000"},
}

// runBench runs perftest and rperf (ibverbs) alternately on rxe0 in the
// VM, client and server both there, three times each, and prints each
// metric's runs, medians and the ratio of the medians against its goal.
func (c *config) runBench(ctx context.Context, env *matrix.Env, logf func(string, ...any)) (int, error) {
	reps := c.benchRuns
	cs, _, err := runOut(ctx, env.VM, env.Results, []string{"/bin/sh", "-c", "cat /sys/devices/system/clocksource/clocksource0/current_clocksource"}, "bench/clocksource.txt", 30*time.Second)
	if err != nil {
		return 1, err
	}
	cs = strings.TrimSpace(cs)
	logf("bench: the VM's clocksource is %s", cs)
	// perftest runs from the guest's initramfs, in memory; rperf from the
	// 9p share, where every first touch of a page of its 19 MB program is
	// a major fault served by the host through virtio under TCG: 12-77 of
	// them per process landed inside the 2,000 measured iterations
	// (/proc/self/stat before and after the loop), each a stall of the
	// ping-pong. The bench runs a copy in the guest's tmpfs, as perftest.
	if _, res, err := runOut(ctx, env.VM, env.Results, []string{"/bin/cp", env.VMRperf, benchRperf}, "bench/copy-rperf.txt", 2*time.Minute); err != nil || res.RC != 0 {
		return 1, fmt.Errorf("bench: copy rperf into the VM's memory (%s): rc %d, %v; see bench/copy-rperf.txt", benchRperf, res.RC, err)
	}
	vmRperf := benchRperf
	vals := map[string]map[string][]float64{} // metric -> program -> values
	for _, m := range metrics {
		vals[m.name] = map[string][]float64{}
	}
	for rep := 1; rep <= reps; rep++ {
		for _, test := range []string{"write-lat", "write-bw"} {
			inline := -1 // the inline size perftest chose in this round
			for _, prog := range []string{"perftest", "rperf"} {
				var argv []string
				if prog == "perftest" {
					argv = append([]string{"/usr/bin/ib_" + strings.ReplaceAll(test, "-", "_"), "-d", "rxe0", "-F"}, benchArgs[test]...)
				} else {
					argv = append([]string{vmRperf, test, "-d", "rxe0", "--timeout", "60s"}, benchArgs[test]...)
					argv = append(argv, "-I", strconv.Itoa(inline))
				}
				base := fmt.Sprintf("bench/%d-%s-%s", rep, test, prog)
				srv, cli, err := env.RunPair(ctx, env.VM, argv, base+".server.txt", env.VM, append(argv, vm.VMAddr), base+".client.txt", 5*time.Minute)
				if err != nil || srv.Result().RC != 0 || cli.Result().RC != 0 {
					return 1, fmt.Errorf("bench %s %s run %d failed (%v); see %s", prog, test, rep, err, base)
				}
				row, err := resultRow(filepath.Join(env.Results, base+".client.txt"))
				if err != nil {
					return 1, err
				}
				if prog == "perftest" {
					if inline, err = inlineSize(filepath.Join(env.Results, base+".client.txt")); err != nil {
						return 1, err
					}
				}
				for _, m := range metrics {
					if m.test == test && m.col < len(row) {
						vals[m.name][prog] = append(vals[m.name][prog], row[m.col])
					}
				}
				logf("bench %d %s %s: %v", rep, test, prog, row)
				logf("bench %d %s %s: server %v; client %v", rep, test, prog, srv.Result().Usage, cli.Result().Usage)
			}
		}
	}
	resent, err := c.retransmissions(ctx, env, reps, logf)
	if err != nil {
		return 1, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "interop-bench: perftest %s vs rperf (ibverbs) on rxe0, both sides in the VM (%d vCPU, TCG, clocksource %s), alternating, %d runs each\n", "6.06", c.smp, cs, reps)
	fmt.Fprintf(&b, "%-28s %-40s %-40s %7s  %s\n", "METRIC", "PERFTEST (runs; median)", "RPERF (runs; median)", "RATIO", "GOAL")
	for _, m := range metrics {
		p, r := vals[m.name]["perftest"], vals[m.name]["rperf"]
		ratio := median(r) / median(p)
		goal := "-"
		if m.goal > 0 {
			verdict := "met"
			if m.higher && ratio < m.goal || !m.higher && ratio > m.goal {
				verdict = "NOT met"
			}
			op := "<="
			if m.higher {
				op = ">="
			}
			goal = fmt.Sprintf("%s %.2fx: %s", op, m.goal, verdict)
		}
		fmt.Fprintf(&b, "%-28s %-40s %-40s %6.2fx  %s\n", m.name, runs(p), runs(r), ratio, goal)
	}
	fmt.Fprintf(&b, "\nrperf on the host (udp_br0) as client against perftest's server on rxe0 (a slow peer under TCG), %d runs each:\n", reps)
	fmt.Fprintf(&b, "%-44s %-40s  %s\n", "RUN", "RETRANSMITTED/SENT [%] (runs; median)", "GOAL")
	for _, r := range slowPeerRuns {
		v := resent[r.name]
		verdict := "met"
		if median(v) >= r.goal {
			verdict = "NOT met"
		}
		fmt.Fprintf(&b, "%-44s %-40s  < %.0f%%: %s\n", r.name, runs(v), r.goal, verdict)
	}
	os.WriteFile(filepath.Join(env.Results, "bench.txt"), []byte(b.String()), 0o644)
	fmt.Print(b.String())
	return 0, nil
}

// A slow-peer run: rperf on the host's udp fabric as client against
// perftest's server on rxe0, whose Soft-RoCE under TCG drops what
// overflows the VM's queues (issue 9 item 6).
type slowPeerRun struct {
	name string
	test string
	args []string
	goal float64 // retransmitted packets, percent of those sent
	// responses is, for READs, the response packets the data needs:
	// their wire cost is the responses, so the share reported is of the
	// responses received that were not needed (asked for again, or
	// answered twice), not of the requests.
	responses uint64
}

var slowPeerRuns = []slowPeerRun{
	{"write-bw -s 65536 -n 1000", "write-bw", []string{"-s", "65536", "-n", "1000"}, 5, 0},
	{"send-bw -s 65536 -n 1000", "send-bw", []string{"-s", "65536", "-n", "1000"}, 5, 0},
	{"read-bw -s 65536 -n 500 (responses)", "read-bw", []string{"-s", "65536", "-n", "500"}, 5, 500 * 65536 / 1024},
}

// retransmissions runs each slow-peer run reps times and returns, per
// run, the percentage of the packets rperf's engine sent that were
// retransmissions (its counter line after the table).
func (c *config) retransmissions(ctx context.Context, env *matrix.Env, reps int, logf func(string, ...any)) (map[string][]float64, error) {
	out := map[string][]float64{}
	for rep := 1; rep <= reps; rep++ {
		for i, r := range slowPeerRuns {
			peer := append([]string{"/usr/bin/ib_" + strings.ReplaceAll(r.test, "-", "_"), "-d", "rxe0", "-F"}, r.args...)
			rperf := append([]string{env.HostRperf, r.test, "-d", "udp_" + vm.Bridge, "--timeout", "60s"}, r.args...)
			base := fmt.Sprintf("bench/%d-slowpeer-%d-%s", rep, i, r.test)
			srv, cli, err := env.RunPair(ctx, env.VM, peer, base+".peer.txt", env.Host, append(rperf, vm.VMAddr), base+".rperf.txt", 5*time.Minute)
			if err != nil || srv.Result().RC != 0 || cli.Result().RC != 0 {
				return nil, fmt.Errorf("bench: rperf %s against perftest run %d failed (%v); see %s", r.name, rep, err, base)
			}
			ec, err := engineCounters(filepath.Join(env.Results, base+".rperf.txt"))
			if err != nil {
				return nil, err
			}
			pct := 100 * float64(ec.resent) / float64(max(ec.sent, 1))
			if r.responses > 0 {
				pct = 100 * float64(ec.received-min(ec.received, r.responses)) / float64(max(ec.received, 1))
			}
			out[r.name] = append(out[r.name], pct)
			logf("bench %d slow peer %s: sent %d, received %d, retransmitted %d (%.2f%%)", rep, r.name, ec.sent, ec.received, ec.resent, pct)
		}
	}
	return out, nil
}

// counters are the packet counts of rperf's engine line.
type counters struct{ sent, received, resent uint64 }

// engineCounters reads the sent, received and retransmitted packets from
// rperf's engine line (" engine udp_br0 (...) packets: sent N, received
// R, retransmitted M, ...").
func engineCounters(path string) (counters, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return counters{}, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		_, rest, ok := strings.Cut(line, " packets: ")
		if !ok || !strings.HasPrefix(strings.TrimSpace(line), "engine ") {
			continue
		}
		var c counters
		var have int
		for _, part := range strings.Split(rest, ", ") {
			f := strings.Fields(part)
			if len(f) != 2 {
				continue
			}
			v, perr := strconv.ParseUint(f[1], 10, 64)
			if perr != nil {
				continue
			}
			switch f[0] {
			case "sent":
				c.sent, have = v, have|1
			case "retransmitted":
				c.resent, have = v, have|2
			case "received":
				c.received, have = v, have|4
			}
		}
		if have == 7 {
			return c, nil
		}
	}
	return counters{}, fmt.Errorf("%s: no engine counter line (sent, received, retransmitted)", path)
}

// resultRow returns the numbers of the first result row after perftest's
// "#bytes" header in a program's output (rperf prints perftest's table
// first).
func resultRow(path string) ([]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	header := false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "#bytes" {
			header = true
			continue
		}
		if !header || len(f) < 4 {
			continue
		}
		var row []float64
		for _, s := range f {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				break
			}
			row = append(row, v)
		}
		if len(row) >= 4 {
			return row, nil
		}
	}
	return nil, fmt.Errorf("%s: no result row after a #bytes header", path)
}

// inlineSize reads the "Max inline data : N[B]" line of perftest's
// banner: the inline size it asked for. perftest chooses it per device (on
// a device it does not know, such as rxe, none: 0), rperf per test (220
// bytes for write_lat), so the bench runs rperf with perftest's choice
// (-I): the two programs must do the same work. (rperf's banner prints
// what the device granted instead, which rxe rounds up to 16 bytes for a
// request of 0; rperf sets the inline flag only on messages up to -I.)
func inlineSize(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		_, rest, ok := strings.Cut(line, "Max inline data")
		if !ok {
			continue
		}
		v := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
		v, _, _ = strings.Cut(v, "[")
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("%s: no \"Max inline data\" line in the banner", path)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func runs(v []float64) string {
	var parts []string
	for _, x := range v {
		parts = append(parts, strconv.FormatFloat(x, 'g', 4, 64))
	}
	return strings.Join(parts, " ") + "; " + strconv.FormatFloat(median(v), 'g', 4, 64)
}
