package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rperf/rperf/reports"
)

// The tests run the real binary, built once by TestMain, with client and
// server as separate processes over the built-in shm0 device.

var rperfBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rperf-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rperfBin = filepath.Join(dir, "rperf")
	build := exec.Command("go", "build", "-o", rperfBin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build rperf:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is a finished rperf process.
type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// rperf runs the binary to completion (at most a minute).
func rperf(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, rperfBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("rperf %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("rperf %v did not finish within a minute; stderr:\n%s", args, r.stderr)
	}
	return r
}

// proc is a running rperf process whose stdout is read line by line.
type proc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    strings.Builder
	errb   bytes.Buffer
	lines  chan string
	exited chan struct{}
	code   int
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	return startCmd(t, exec.Command(rperfBin, args...))
}

// startCmd starts cmd, an rperf command line (run in a namespace, say).
func startCmd(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, lines: make(chan string, 1000), exited: make(chan struct{})}
	p.cmd.Stderr = &p.errb
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		err := p.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// waitLine waits for a stdout line matching re and returns its submatches.
func (p *proc) waitLine(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l := <-p.lines:
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-p.exited:
			t.Fatalf("rperf exited (%d) before printing %q; stderr: %s", p.code, re, p.errb.String())
		case <-deadline:
			t.Fatalf("no line matching %q within %v", re, within)
		}
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(within):
		t.Fatalf("rperf %v still running after %v", p.cmd.Args[1:], within)
	}
	return -1
}

func (p *proc) stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

var portLine = regexp.MustCompile(`Waiting for a client on TCP port (\d+)`)

// server starts a server on an ephemeral port and returns it and the port.
func server(t *testing.T, args ...string) (*proc, string) {
	t.Helper()
	p := start(t, append(args, "-p", "0")...)
	m := p.waitLine(t, portLine, 30*time.Second)
	return p, m[1]
}

// readDoc parses and checks an rperf/v1 document: the schema, the env,
// and one record per size of the test.
func readDoc(t *testing.T, path, test string, sizes []int64) *reports.Document {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatalf("%s is not valid JSON: %v", path, err)
	}
	doc, err := reports.Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	e := doc.Env
	if doc.Schema != "rperf/v1" || e.Host == "" || e.Kernel == "" || e.CPUModel == "" || e.GoVersion == "" || e.RperfVersion == "" ||
		e.Provider != "soft" || e.Fabric != "shm" || e.Device != "shm0" || e.MTU != 4096 || e.SendPath == "" ||
		e.Clock.Name == "" || e.Clock.ResolutionNs <= 0 || e.Clock.CostNs <= 0 {
		t.Errorf("%s: env incomplete: %+v", path, e)
	}
	if len(doc.Results) != len(sizes) {
		t.Fatalf("%s: %d results, want %d", path, len(doc.Results), len(sizes))
	}
	for i, r := range doc.Results {
		if r.Test != test || r.Bytes != sizes[i] || r.Iterations <= 0 || (r.Mode != reports.ModeIterations && r.Mode != reports.ModeDuration) {
			t.Errorf("%s: record %d: test %q bytes %d iterations %d mode %q", path, i, r.Test, r.Bytes, r.Iterations, r.Mode)
		}
		rec := generic["results"].([]any)[i].(map[string]any)
		if strings.HasSuffix(test, "_lat") {
			for _, f := range []string{"t_min_us", "t_max_us", "t_typical_us", "t_avg_us", "t_stdev_us", "p99_us", "p999_us",
				"true_max_us", "mean_us", "stdev_us", "percentiles", "hdr"} {
				if _, ok := rec[f]; !ok {
					t.Errorf("%s: record %d has no %q", path, i, f)
				}
			}
			if r.Latency == nil || r.Percentiles["99.99"] <= 0 || r.TrueMaxUs < r.MeanUs {
				t.Errorf("%s: record %d: latency %+v", path, i, r.Latency)
				continue
			}
			h, err := reports.DecodeHDR(r.HDR)
			if err != nil || h.TotalCount() != r.Samples {
				t.Errorf("%s: record %d: hdr %v, %d samples in it, want %d", path, i, err, h.TotalCount(), r.Samples)
			}
		} else {
			for _, f := range []string{"bw_peak_gbps", "bw_avg_gbps", "bw_avg_mibps", "msg_rate_mpps"} {
				if _, ok := rec[f]; !ok {
					t.Errorf("%s: record %d has no %q", path, i, f)
				}
			}
			if r.Bandwidth == nil || r.BWAvgMiBps <= 0 || r.MsgRateMpps <= 0 {
				t.Errorf("%s: record %d: bandwidth %+v", path, i, r.Bandwidth)
			}
		}
	}
	return doc
}

var commands = []string{"send-lat", "write-lat", "read-lat", "atomic-lat", "send-bw", "write-bw", "read-bw", "atomic-bw"}

func testName(cmd string) string { return strings.ReplaceAll(cmd, "-", "_") }

func TestLoopbackEveryCommand(t *testing.T) {
	for _, c := range commands {
		t.Run(c, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "r.json")
			r := rperf(t, c, "--loopback", "-n", "100", "--json", out)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
			}
			if r.stderr != "" {
				t.Errorf("stderr not empty when it is not a terminal: %q", r.stderr)
			}
			header := " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
			if strings.HasSuffix(c, "-bw") {
				header = " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
			}
			if !strings.Contains(r.stdout, header+"\n") {
				t.Errorf("no perftest header in:\n%s", r.stdout)
			}
			if strings.HasSuffix(c, "-lat") && !strings.Contains(r.stdout, "rperf true statistics") {
				t.Errorf("no true statistics in:\n%s", r.stdout)
			}
			if !strings.Contains(r.stdout, " clock: monotonic") {
				t.Errorf("no clock line in:\n%s", r.stdout)
			}
			size := int64(2)
			switch {
			case strings.HasPrefix(c, "atomic"):
				size = 8
			case strings.HasSuffix(c, "-bw"):
				size = 65536
			}
			readDoc(t, out, testName(c), []int64{size})
		})
	}
}

// TestServerAndClient runs each command as two processes started
// separately, with -a over a few sizes (and -b for bandwidth), and checks
// both sides' documents.
func TestServerAndClient(t *testing.T) {
	for _, c := range commands {
		t.Run(c, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{c, "-n", "50"}
			var sizes []int64
			switch {
			case strings.HasPrefix(c, "atomic"):
				sizes = []int64{8}
			case strings.HasSuffix(c, "-lat"):
				args = append(args, "-a", "--max-size", "32")
				sizes = []int64{2, 4, 8, 16, 32}
			default:
				args = append(args, "-a", "--max-size", "4K", "-q", "2")
				for s := int64(2); s <= 4096; s *= 2 {
					sizes = append(sizes, s)
				}
			}
			srv, port := server(t, append(args, "--json", filepath.Join(dir, "server.json"))...)
			cli := rperf(t, append(args, "127.0.0.1", "-p", port, "--json", filepath.Join(dir, "client.json"))...)
			if cli.code != 0 {
				t.Fatalf("client exit %d; stderr: %s", cli.code, cli.stderr)
			}
			if code := srv.wait(t, 30*time.Second); code != 0 {
				t.Fatalf("server exit %d; stderr: %s", code, srv.errb.String())
			}
			readDoc(t, filepath.Join(dir, "client.json"), testName(c), sizes)
			passiveLat := c == "read-lat" || c == "atomic-lat"
			if passiveLat {
				if !strings.Contains(srv.stdout(), "This side is passive") {
					t.Errorf("passive server output:\n%s", srv.stdout())
				}
				return
			}
			doc := readDoc(t, filepath.Join(dir, "server.json"), testName(c), sizes)
			if doc.Env.Extra["role"] != "server" {
				t.Errorf("server document's role: %q", doc.Env.Extra["role"])
			}
		})
	}
}

func TestBidirectionalAndOptions(t *testing.T) {
	cases := [][]string{
		{"write-bw", "-b", "-q", "3", "-n", "200", "-s", "4K", "--report_gbits"},
		{"send-bw", "-b", "-c", "UD", "-s", "1024", "-n", "200", "-r", "64"},
		{"send-bw", "-c", "UC", "-l", "4", "-t", "16", "-n", "200"},
		{"read-bw", "-o", "4", "-Q", "8", "-N", "-n", "200"},
		{"atomic-bw", "-A", "CMP_AND_SWAP", "-n", "200"},
		{"atomic-lat", "-A", "CMP_AND_SWAP", "-n", "100"},
		{"send-lat", "-c", "UD", "-s", "4096", "-n", "100"},
		{"write-lat", "-c", "UC", "-I", "0", "-n", "100", "--warmup", "50", "--percentiles", "50,99.999"},
		{"write-lat", "-s", "64K", "-n", "20", "-F", "-u", "16", "-m", "1024"},
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "r.json")
			r := rperf(t, append(args, "--loopback", "--json", out)...)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
			}
			doc, err := reports.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(doc.Results) != 1 {
				t.Fatalf("%d results", len(doc.Results))
			}
			res := doc.Results[0]
			if strings.Contains(strings.Join(args, " "), "--percentiles") {
				if _, ok := res.Percentiles["99.999"]; !ok || len(res.Percentiles) != 2 {
					t.Errorf("percentiles %v, want 50 and 99.999", res.Percentiles)
				}
			}
			if strings.Contains(strings.Join(args, " "), "--report_gbits") && !strings.Contains(r.stdout, "BW average[Gb/sec]") {
				t.Errorf("no Gb/s header:\n%s", r.stdout)
			}
			if strings.Contains(strings.Join(args, " "), "-m 1024") && doc.Env.MTU != 1024 {
				t.Errorf("mtu %d, want 1024", doc.Env.MTU)
			}
		})
	}
}

func TestDurationMode(t *testing.T) {
	for _, c := range []string{"write-lat", "read-lat", "send-bw", "write-bw"} {
		t.Run(c, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "r.json")
			r := rperf(t, c, "--loopback", "-D", "2", "-f", "0", "--json", out)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
			}
			doc, err := reports.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			res := doc.Results[0]
			if res.Mode != reports.ModeDuration || res.Iterations < 100 || res.ElapsedNs < int64(1900*time.Millisecond) {
				t.Errorf("mode %s iterations %d elapsed %v", res.Mode, res.Iterations, time.Duration(res.ElapsedNs))
			}
			if res.Latency != nil {
				// Full statistics in duration mode too.
				if res.Samples != res.Iterations-1 || res.HDR == "" || res.Percentiles["99.99"] <= 0 || res.TPSAverage <= 0 {
					t.Errorf("duration latency: samples %d, iterations %d, percentiles %v, tps %v", res.Samples, res.Iterations, res.Percentiles, res.TPSAverage)
				}
				if !strings.Contains(r.stdout, "t_avg[usec]    tps average") {
					t.Errorf("no perftest duration header:\n%s", r.stdout)
				}
			}
		})
	}
}

func TestJSONAndHGRMToStdout(t *testing.T) {
	r := rperf(t, "write-lat", "--loopback", "-n", "50", "--json", "-")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
	}
	if _, err := reports.Read(strings.NewReader(r.stdout)); err != nil {
		t.Errorf("stdout is not only the document: %v\n%s", err, r.stdout)
	}
	if !strings.Contains(r.stderr, "#bytes") {
		t.Errorf("the table should go to stderr with --json -:\n%s", r.stderr)
	}

	dir := t.TempDir()
	r = rperf(t, "send-lat", "--loopback", "-n", "50", "-a", "--max-size", "4", "--hgrm", filepath.Join(dir, "lat.hgrm"))
	if r.code != 0 {
		t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
	}
	for _, name := range []string{"lat-2.hgrm", "lat-4.hgrm"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		// HdrHistogram's percentile distribution: header, rows, summary.
		if !strings.Contains(string(b), "       Value     Percentile TotalCount 1/(1-Percentile)") || !strings.Contains(string(b), "#[Mean") {
			t.Errorf("%s is not .hgrm text:\n%s", name, b)
		}
	}
}

// TestBadInput checks that wrong or conflicting flags end in exit code 2
// with a one-line error that names the problem, and a pointer to --help.
func TestBadInput(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"write-lat", "-s", "0", "--loopback"}, 2, "-s 0: message size must be between 1 and 1073741824 (shm0's max_msg_sz)"},
		{[]string{"write-lat", "-s", "2G", "--loopback"}, 2, "max_msg_sz"},
		{[]string{"write-lat", "-s", "abc"}, 2, "not a size"},
		{[]string{"write-lat", "-q", "4"}, 2, "-q 4 applies to bandwidth tests only"},
		{[]string{"write-lat", "-b"}, 2, "-b applies to bandwidth tests only"},
		{[]string{"send-bw", "-A", "CMP_AND_SWAP"}, 2, "-A CMP_AND_SWAP applies to atomic tests only"},
		{[]string{"read-lat", "-I", "64"}, 2, "-I 64 applies to send and write tests only"},
		{[]string{"write-bw", "-r", "64"}, 2, "-r 64 applies to the send tests only"},
		{[]string{"write-lat", "-o", "4"}, 2, "-o 4 applies to read and atomic tests only"},
		{[]string{"atomic-bw", "-s", "64"}, 2, "atomic operations always move 8 bytes"},
		{[]string{"atomic-lat", "-a"}, 2, "atomic operations always move 8 bytes"},
		{[]string{"write-lat", "-c", "UD"}, 2, "-c UD: write-lat runs over RC or UC only"},
		{[]string{"read-bw", "-c", "UC"}, 2, "read-bw runs over RC only"},
		{[]string{"write-lat", "-c", "XRC"}, 2, "XRC is not supported"},
		{[]string{"write-lat", "-c", "FOO"}, 2, "not a connection type"},
		{[]string{"send-lat", "-c", "UD", "-s", "8192", "--loopback"}, 2, "a UD message must fit in the path MTU (4096 bytes)"},
		{[]string{"write-lat", "-n", "3"}, 2, "at least 5 iterations"},
		{[]string{"write-lat", "-n", "100", "-D", "5"}, 2, "-n and -D conflict"},
		{[]string{"write-lat", "-f", "1"}, 2, "add -D"},
		{[]string{"write-lat", "-D", "4", "-f", "2"}, 2, "longer than twice the margin"},
		{[]string{"write-lat", "-D", "5", "--warmup", "5"}, 2, "--warmup and -D conflict"},
		{[]string{"write-lat", "-a", "-s", "64"}, 2, "-a and -s conflict"},
		{[]string{"write-lat", "--max-size", "64"}, 2, "--max-size limits -a"},
		{[]string{"write-bw", "-l", "200"}, 2, "-l 200: the post list cannot be longer than the tx depth"},
		{[]string{"write-bw", "-l", "4", "-Q", "8"}, 2, "-Q and -l conflict"},
		{[]string{"write-bw", "-Q", "0"}, 2, "CQ moderation must be between 1 and 1024"},
		{[]string{"write-bw", "-t", "0"}, 2, "tx depth must be between 1 and 15000"},
		{[]string{"write-bw", "-t", "20000"}, 2, "tx depth must be between 1 and 15000"},
		{[]string{"write-bw", "-q", "0"}, 2, "number of QPs must be between 1 and 16384"},
		{[]string{"write-lat", "-I", "5000"}, 2, "inline size must be between 0 and 1024"},
		{[]string{"write-lat", "-u", "40"}, 2, "between 0 and 31"},
		{[]string{"write-lat", "-m", "1000"}, 2, "the MTU must be 256, 512, 1024, 2048 or 4096"},
		{[]string{"atomic-lat", "-A", "XOR"}, 2, "use CMP_AND_SWAP or FETCH_AND_ADD"},
		{[]string{"write-lat", "--percentiles", "50,101"}, 2, "not a percentile"},
		{[]string{"write-bw", "--hgrm", "x.hgrm"}, 2, "--hgrm x.hgrm applies to latency tests only"},
		{[]string{"write-lat", "--json", "-", "--hgrm", "-"}, 2, "both want stdout"},
		{[]string{"write-lat", "--json", "/nonexistent/dir/r.json", "--loopback"}, 2, "cannot create the file"},
		{[]string{"write-lat", "--hgrm", "/nonexistent/dir/l.hgrm", "--loopback"}, 2, "--hgrm /nonexistent/dir/l.hgrm: cannot create the file (no such file or directory); give a writable path"},
		{[]string{"send-lat", "--hgrm", "/nonexistent/dir/l.hgrm", "-a", "--max-size", "4", "--loopback"}, 2, "--hgrm /nonexistent/dir/l-2.hgrm: cannot create the file"},
		{[]string{"write-lat", "--loopback", "somehost"}, 2, "--loopback runs the server itself"},
		{[]string{"write-lat", "a", "b"}, 2, "too many arguments"},
		{[]string{"write-lat", "somehost", "-p", "0"}, 2, "-p 0: a client needs the server's port"},
		{[]string{"write-lat", "--timeout", "0s"}, 2, "--timeout 0s: must be positive"},
		{[]string{"write-lat", "-x", "3", "--loopback"}, 2, "-x 3: port 1 of shm0 has one GID, index 0"},
		{[]string{"write-lat", "-Z", "3"}, 2, "unknown shorthand flag"},
		{[]string{"write-lat", "--nope"}, 2, "unknown flag"},
		{[]string{"fly"}, 2, "unknown command"},
		{[]string{"write-lat", "-d", "mlx5_0", "--loopback"}, 4, `-d mlx5_0: open_device: no RDMA device named "mlx5_0"`},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			r := rperf(t, c.args...)
			if r.code != c.code {
				t.Errorf("exit %d, want %d; stderr: %s", r.code, c.code, r.stderr)
			}
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			if !strings.HasPrefix(lines[0], "rperf: ") || !strings.Contains(lines[0], c.want) {
				t.Errorf("first stderr line %q does not contain %q", lines[0], c.want)
			}
			wantLines := 1
			if c.code == 2 {
				wantLines = 2 // the pointer to --help
			}
			if len(lines) != wantLines || strings.Contains(r.stderr, "goroutine ") {
				t.Errorf("stderr has %d lines, want %d:\n%s", len(lines), wantLines, r.stderr)
			}
			if r.took > 20*time.Second {
				t.Errorf("took %v", r.took)
			}
		})
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

func TestServerNotListening(t *testing.T) {
	r := rperf(t, "write-lat", "127.0.0.1", "-p", freePort(t), "--timeout", "1s")
	if r.code != 1 || !strings.Contains(r.stderr, "connection refused (is the server running? start it first, or check -p)") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if r.took > 10*time.Second {
		t.Errorf("took %v to give up", r.took)
	}
}

func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	for _, args := range [][]string{{"write-lat", "-p", port}, {"write-lat", "--loopback", "-p", port}} {
		r := rperf(t, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "TCP port "+port+" is already in use") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}

func TestMismatchedPeers(t *testing.T) {
	cases := []struct{ server, client []string }{
		{[]string{"write-lat", "-s", "64"}, []string{"write-lat", "-s", "128"}},
		{[]string{"write-bw", "-q", "2"}, []string{"write-bw", "-q", "4"}},
		{[]string{"write-lat"}, []string{"send-lat"}},
		{[]string{"write-bw", "-D", "5"}, []string{"write-bw"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.server, " ")+" vs "+strings.Join(c.client, " "), func(t *testing.T) {
			srv, port := server(t, c.server...)
			cli := rperf(t, append(c.client, "127.0.0.1", "-p", port)...)
			code := srv.wait(t, 20*time.Second)
			if cli.code != 2 || code != 2 {
				t.Errorf("exit codes client %d server %d, want 2", cli.code, code)
			}
			for side, msg := range map[string]string{"client": cli.stderr, "server": srv.errb.String()} {
				if !strings.Contains(msg, "peers disagree: client runs ") || !strings.Contains(msg, "start both with the same flags") {
					t.Errorf("%s: %q", side, msg)
				}
			}
		})
	}
}

// TestPeerDiesMidRun kills one side in the middle of a long run; the other
// must exit non-zero, promptly, with a one-line error.
func TestPeerDiesMidRun(t *testing.T) {
	started := regexp.MustCompile(`^ #bytes`)
	for _, c := range []string{"write-lat", "send-lat", "read-lat", "write-bw", "send-bw"} {
		for _, victim := range []string{"server", "client"} {
			t.Run(c+"/"+victim+" killed", func(t *testing.T) {
				args := []string{c, "-D", "60", "-f", "1"}
				srv, port := server(t, args...)
				cli := start(t, append(args, "127.0.0.1", "-p", port)...)
				cli.waitLine(t, started, 30*time.Second)
				time.Sleep(300 * time.Millisecond) // into the run
				dead, survivor := srv, cli
				if victim == "client" {
					dead, survivor = cli, srv
				}
				dead.cmd.Process.Signal(syscall.SIGKILL)
				t0 := time.Now()
				code := survivor.wait(t, 15*time.Second)
				msg := survivor.errb.String()
				if code != 1 || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "rperf: ") || !strings.Contains(msg, "peer") {
					t.Errorf("survivor exit %d after %v, stderr %q", code, time.Since(t0), msg)
				}
			})
		}
	}
}

// TestLoopbackLeavesNoProcess interrupts a --loopback run and checks that
// the server process it started is gone too.
func TestLoopbackLeavesNoProcess(t *testing.T) {
	marker := "--timeout=59s" // identifies this test's processes
	p := start(t, "write-bw", "--loopback", "-D", "30", "-f", "1", marker)
	p.waitLine(t, regexp.MustCompile(`^ #bytes`), 30*time.Second)
	if n := countProcs(marker); n != 2 {
		t.Errorf("%d rperf processes with %s during the run, want 2", n, marker)
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t, 15*time.Second); code != 130 {
		t.Errorf("interrupted: exit %d, want 130; stderr %s", code, p.errb.String())
	}
	deadline := time.Now().Add(5 * time.Second)
	for countProcs(marker) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the loopback server outlived the client")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// countProcs counts live processes of the test binary whose command line
// holds marker.
func countProcs(marker string) int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(rperfBin)) || !bytes.Contains(cmdline, []byte(marker)) {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && bytes.Contains(st, []byte(") Z ")) {
			continue // a zombie waiting to be reaped
		}
		n++
	}
	return n
}

func TestVersionAndHelp(t *testing.T) {
	r := rperf(t, "--version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "rperf version ") {
		t.Errorf("--version: %d %q", r.code, r.stdout)
	}
	for _, c := range commands {
		r := rperf(t, c, "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "-n, --iters") || !strings.Contains(r.stdout, "--loopback") {
			t.Errorf("%s --help: %d\n%s", c, r.code, r.stdout)
		}
	}
	_ = io.Discard
}
