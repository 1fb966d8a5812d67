package main_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/testsupport/faultrelay"
	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/reports"
)

// The udp fabric end to end: every command with --validate over udp_lo
// (--loopback), between two network namespaces joined by a veth (IPv4 and
// IPv6), and through a wire that drops, duplicates, reorders and corrupts
// RoCEv2 datagrams.

// udpArgs are each command's arguments for the udp runs: few iterations,
// sizes of a few packets, --validate.
func udpArgs(c string) []string {
	args := []string{c, "--validate", "-n", "200"}
	switch c {
	case "send-lat", "write-lat", "read-lat":
		args = append(args, "-s", "3000")
	case "send-bw", "write-bw", "read-bw":
		args = append(args, "-s", "8192", "-t", "32")
	}
	return args
}

// udpSize is the message size of udpArgs(c).
func udpSize(c string) int64 {
	switch {
	case strings.HasPrefix(c, "atomic"):
		return 8
	case strings.HasSuffix(c, "-lat"):
		return 3000
	}
	return 8192
}

// passiveLat reports whether c's server measures nothing (and reports no
// result).
func passiveLat(c string) bool { return c == "read-lat" || c == "atomic-lat" }

// readUDPDoc reads and checks the document of a validated udp-fabric run
// on device and returns it.
func readUDPDoc(t *testing.T, path, c, device string, results int) *reports.Document {
	t.Helper()
	doc, err := reports.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	e := doc.Env
	if e.Provider != "soft" || e.Fabric != "udp" || e.Device != device || e.MTU < 256 || e.Extra["validate"] != "true" || e.Extra["gid"] == "" {
		t.Errorf("%s: env %+v", path, e)
	}
	for _, k := range []string{"sent_pkts", "rcvd_pkts", "retransmitted", "rewinds", "duplicate_request", "icrc_errors", "out_of_seq_request", "timeouts"} {
		if _, ok := e.EngineCounters[k]; !ok {
			t.Errorf("%s: engine_counters has no %q: %v", path, k, e.EngineCounters)
		}
	}
	if e.EngineCounters["sent_pkts"] == 0 || e.EngineCounters["rcvd_pkts"] == 0 {
		t.Errorf("%s: engine_counters %v", path, e.EngineCounters)
	}
	if len(doc.Results) != results {
		t.Fatalf("%s: %d results, want %d", path, len(doc.Results), results)
	}
	for _, r := range doc.Results {
		if r.Test != testName(c) || r.Bytes != udpSize(c) || r.Iterations <= 0 {
			t.Errorf("%s: result %s %d B %d iterations", path, r.Test, r.Bytes, r.Iterations)
		}
	}
	return doc
}

// runCmd runs cmd, an rperf command line, to completion (at most a
// minute).
func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not finish within a minute; stderr:\n%s", cmd.Args, errb.String())
	}
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	return r
}

// TestUDPLoopback runs every command over udp_lo with --loopback (client
// and server on free or distinct UDP ports) and --validate.
func TestUDPLoopback(t *testing.T) {
	for _, c := range commands {
		t.Run(c, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "r.json")
			r := rperf(t, append(udpArgs(c), "-d", "udp_lo", "--loopback", "--json", out)...)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
			}
			for _, want := range []string{"Device         : udp_lo", "Transport type : InfiniBand (soft, udp fabric)",
				"GID index       : 0 (::ffff:127.0.0.1, RoCE v2)", "Data validation : ON", " engine udp_lo (UDP port "} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("no %q in:\n%s", want, r.stdout)
				}
			}
			doc := readUDPDoc(t, out, c, "udp_lo", 1)
			if doc.Env.Extra["gid"] != "::ffff:127.0.0.1" {
				t.Errorf("gid %q", doc.Env.Extra["gid"])
			}
		})
	}
}

// freeUDPPort returns a UDP port that is free on 127.0.0.1 right now.
func freeUDPPort(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return strconv.Itoa(c.LocalAddr().(*net.UDPAddr).Port)
}

// TestUDPPorts: two processes on one host, each on its own UDP port (the
// server on a chosen one, the client on any free one), find each other
// through the LIDs of the key exchange; a port in use is named, with the
// flag that fixes it.
func TestUDPPorts(t *testing.T) {
	port := freeUDPPort(t)
	srv, tcp := server(t, "write-lat", "-d", "udp_lo", "--udp-port", port, "-n", "100", "--validate")
	cli := rperf(t, "write-lat", "127.0.0.1", "-p", tcp, "-d", "udp_lo", "--udp-port", "0", "-n", "100", "--validate")
	if cli.code != 0 {
		t.Fatalf("client exit %d; stderr: %s", cli.code, cli.stderr)
	}
	if code := srv.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("server exit %d; stderr: %s", code, srv.errb.String())
	}
	if !strings.Contains(srv.stdout(), " UDP port        : "+port+"\n") || !strings.Contains(srv.stdout(), " engine udp_lo (UDP port "+port+") packets: sent ") {
		t.Errorf("the server does not show its UDP port %s:\n%s", port, srv.stdout())
	}
	// The client announces its port as its LID; the server's is in the
	// remote address.
	lid := fmt.Sprintf("remote address: LID %#04x ", mustAtoi(t, port))
	if !strings.Contains(cli.stdout, lid) {
		t.Errorf("no %q in the client's output:\n%s", lid, cli.stdout)
	}

	busy, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	p := strconv.Itoa(busy.LocalAddr().(*net.UDPAddr).Port)
	r := rperf(t, "write-lat", "-d", "udp_lo", "--udp-port", p, "-p", "0")
	want := "rperf: -d udp_lo: UDP port " + p + " is already in use on this host (another rperf or engine, or a kernel rxe device); give this side another with --udp-port N, or --udp-port 0 for any free port\n"
	if r.code != 1 || r.stderr != want {
		t.Errorf("port in use: exit %d, stderr %q, want %q", r.code, r.stderr, want)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// nsRun runs one command between namespaces: the server in b, the client
// in a connecting to host, both with extra arguments; it checks both
// documents and returns them (the server's is nil for a passive latency
// server's empty one).
func nsRun(t *testing.T, pair *netns.Pair, c, host string, extra ...string) (cli, srv *reports.Document) {
	t.Helper()
	dir := t.TempDir()
	args := append(udpArgs(c), extra...)
	srvArgs := append(append([]string(nil), args...), "-d", "udp_"+pair.B.Link, "-p", "0", "--json", filepath.Join(dir, "server.json"))
	sp := startCmd(t, netns.Command(pair.B.NS, rperfBin, srvArgs...))
	port := sp.waitLine(t, portLine, 30*time.Second)[1]
	cliArgs := append(append([]string(nil), args...), "-d", "udp_"+pair.A.Link, host, "-p", port, "--json", filepath.Join(dir, "client.json"))
	r := runCmd(t, netns.Command(pair.A.NS, rperfBin, cliArgs...))
	code := sp.wait(t, 30*time.Second)
	if r.code != 0 || code != 0 {
		t.Fatalf("client exit %d, stderr %s; server exit %d, stderr %s", r.code, r.stderr, code, sp.errb.String())
	}
	cli = readUDPDoc(t, filepath.Join(dir, "client.json"), c, "udp_"+pair.A.Link, 1)
	n := 1
	if passiveLat(c) {
		n = 0
	}
	srv = readUDPDoc(t, filepath.Join(dir, "server.json"), c, "udp_"+pair.B.Link, n)
	return cli, srv
}

// TestUDPNamespaces runs every command with client and server in two
// network namespaces joined by a veth, over IPv4 (the GIDs perftest
// picks) and, for some, over IPv6 (--ipv6).
func TestUDPNamespaces(t *testing.T) {
	pair := netns.Setup(t, netns.Options{})
	for _, c := range commands {
		t.Run("IPv4/"+c, func(t *testing.T) {
			cli, srv := nsRun(t, pair, c, pair.B.Addr4.Addr().String())
			if g := cli.Env.Extra["gid"]; g != "::ffff:"+pair.A.Addr4.Addr().String() {
				t.Errorf("client GID %s, want A's IPv4 address", g)
			}
			if g := srv.Env.Extra["gid"]; g != "::ffff:"+pair.B.Addr4.Addr().String() {
				t.Errorf("server GID %s, want B's IPv4 address", g)
			}
		})
	}
	for _, c := range []string{"write-lat", "send-bw", "read-bw"} {
		t.Run("IPv6/"+c, func(t *testing.T) {
			cli, srv := nsRun(t, pair, c, pair.B.Addr6.Addr().String(), "--ipv6")
			if g := cli.Env.Extra["gid"]; g != pair.A.Addr6.Addr().String() {
				t.Errorf("client GID %s, want A's IPv6 address %s", g, pair.A.Addr6.Addr())
			}
			if g := srv.Env.Extra["gid"]; g != pair.B.Addr6.Addr().String() {
				t.Errorf("server GID %s, want B's IPv6 address %s", g, pair.B.Addr6.Addr())
			}
		})
	}
}

// TestUDPFaultyWire runs every command through a wire that drops,
// duplicates, reorders and corrupts the RoCEv2 datagrams each way
// (corruption past the BTH with the UDP checksum fixed, so that only the
// ICRC can catch it), with a QP timeout of 134 ms: every run completes with
// its data verified, the engines retransmit, and their ICRC checks catch
// the corrupted datagrams. The wire's faults are seeded; what they hit
// depends on timing.
//
// The bandwidth tests get 10% of each fault. The latency tests get 10%
// duplicates and reorders but 5% drops and corruptions: a ping-pong has
// one packet in flight each way, so only the retransmission timer
// repairs a loss, and an attempt (request and acknowledgement) fails
// with probability 1-(1-d-c)^2. RC gives a message retry_cnt+1 = 8
// attempts (7 is the most verbs allows), so at 10% drop and 10% corrupt
// (an attempt fails 34% of the time) a message fails with probability
// 0.34^8 = 1.9e-4, and some 1600 messages of four latency runs fail
// together about one run in four, as the protocol says they must; at 5%
// each it is 0.19^8 = 1.6e-6, once in 400 runs.
func TestUDPFaultyWire(t *testing.T) {
	pair := netns.Setup(t, netns.Options{Middle: true})
	var retrans, icrc, corrupted uint64
	for i, c := range commands {
		t.Run(c, func(t *testing.T) {
			// A held datagram waits 2 ms for a successor: in a ping-pong
			// none comes, and the default 20 ms would slow every run.
			faults := faultrelay.Faults{Drop: 0.10, Duplicate: 0.10, Reorder: 0.10, Corrupt: 0.10,
				CorruptFrom: 12, FixChecksum: true, MaxFaults: 400, ReorderTimeout: 2 * time.Millisecond}
			if strings.HasSuffix(c, "-lat") {
				faults.Drop, faults.Corrupt = 0.05, 0.05
			}
			w, err := faultrelay.NewWire(pair.Mid, faultrelay.WireConfig{Seed: uint64(100 + i), Ports: []uint16{4791},
				AtoB: faults, BtoA: faults, MaxDuration: 3 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			go func() {
				select {
				case <-w.Done():
					if ctx.Err() == nil {
						t.Errorf("the wire closed before the run ended (MaxDuration)")
					}
				case <-ctx.Done():
				}
			}()
			// -u 15 (134 ms, 1.07 s for the 8 tries): the wire is a
			// user-space forwarder that competes for this machine's two
			// CPUs with two busy-polling processes and whatever else
			// runs, and a process can be off the CPUs for 0.3-0.4 s at a
			// time at load 10. With -u 12 (134 ms for all 8 tries) both
			// sides of a latency run often ran out of retries
			// (RETRY_EXC_ERR) under load: 3 of 4 runs at load 6, 2 of 3
			// with four CPU hogs; -u 14 (537 ms) still lost 1 of 3 with
			// the hogs. Every loss a ping-pong suffers costs a timeout,
			// so the latency runs take longer (some 60-80 s in all at
			// load 11-17, 25-35 s unloaded).
			extra := []string{"-u", "15", "--timeout", "20s"}
			cli, srv := nsRun(t, pair, c, pair.B.Addr4.Addr().String(), extra...)
			st := w.Stats()
			cc, sc := cli.Env.EngineCounters, srv.Env.EngineCounters
			t.Logf("wire A->B: dropped %d duplicated %d reordered %d corrupted %d of %d; B->A: dropped %d duplicated %d reordered %d corrupted %d of %d",
				st.AtoB.Dropped, st.AtoB.Duplicated, st.AtoB.Reordered, st.AtoB.Corrupted, st.AtoB.Received,
				st.BtoA.Dropped, st.BtoA.Duplicated, st.BtoA.Reordered, st.BtoA.Corrupted, st.BtoA.Received)
			t.Logf("client (A): %s", counterSummary(cc))
			t.Logf("server (B): %s", counterSummary(sc))
			if st.AtoB.Dropped+st.BtoA.Dropped == 0 || st.AtoB.Corrupted+st.BtoA.Corrupted == 0 {
				t.Errorf("the wire injected too few faults to test anything: %+v", st)
			}
			// What was corrupted on the way to a side reached its engine
			// (no drop after a corruption), which must have refused it.
			if st.AtoB.Corrupted > 0 && sc["icrc_errors"] == 0 || st.BtoA.Corrupted > 0 && cc["icrc_errors"] == 0 {
				t.Errorf("corrupted datagrams (A->B %d, B->A %d) but ICRC errors server %d, client %d",
					st.AtoB.Corrupted, st.BtoA.Corrupted, sc["icrc_errors"], cc["icrc_errors"])
			}
			retrans += cc["retransmitted"] + sc["retransmitted"]
			icrc += cc["icrc_errors"] + sc["icrc_errors"]
			corrupted += st.AtoB.Corrupted + st.BtoA.Corrupted
		})
	}
	t.Logf("all commands: %d retransmitted, %d ICRC errors for %d corrupted datagrams", retrans, icrc, corrupted)
	if retrans == 0 || icrc == 0 {
		t.Errorf("retransmitted %d, ICRC errors %d: the faults went unnoticed", retrans, icrc)
	}
	// Every corrupted datagram reaches an engine (some twice, duplicated)
	// and is refused there, but for the few still in flight when a
	// process exits.
	if icrc < corrupted*9/10 {
		t.Errorf("%d ICRC errors for %d corrupted datagrams: the ICRC check missed some", icrc, corrupted)
	}
}

func counterSummary(c map[string]uint64) string {
	var parts []string
	for _, k := range []string{"sent_pkts", "rcvd_pkts", "retransmitted", "rewinds", "duplicate_request", "icrc_errors", "out_of_seq_request", "timeouts", "nak_sent", "nak_rcvd"} {
		parts = append(parts, fmt.Sprintf("%s %d", k, c[k]))
	}
	return strings.Join(parts, ", ")
}
