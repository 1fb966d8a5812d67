package main_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/reports"
)

// -R (--rdma_cm) end to end, engine to engine: the out-of-band messages
// and the test QPs go through rdma_cm (the CM MADs over shm0's Unix
// sockets or udp_lo's QP1), with --validate checking every byte.

func TestRDMACMEveryCommand(t *testing.T) {
	for _, dev := range []string{"shm0", "udp_lo"} {
		for _, c := range commands {
			t.Run(dev+"/"+c, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "r.json")
				r := rperf(t, append(udpArgs(c), "-R", "-d", dev, "--loopback", "--json", out)...)
				if r.code != 0 {
					t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
				}
				checkRDMACM(t, r, out, c, dev, 1)
			})
		}
	}
}

// checkRDMACM checks a -R run's header and its document of n results.
func checkRDMACM(t *testing.T, r result, out, c, dev string, n int) {
	t.Helper()
	for _, want := range []string{"rdma_cm QPs     : ON", "Data ex. method : rdma_cm", "Device         : " + dev} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in:\n%s", want, r.stdout)
		}
	}
	doc, err := reports.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != n {
		t.Fatalf("%d results, want %d:\n%s", len(doc.Results), n, r.stdout)
	}
	for _, res := range doc.Results {
		if res.Test != testName(c) || res.Iterations <= 0 {
			t.Errorf("result %s %d B %d iterations", res.Test, res.Bytes, res.Iterations)
		}
	}
}

// TestRDMACMShapes runs -R on the shapes with their own rdma_cm steps:
// UD (SIDR; the client's QP-number message when the server sends too),
// several QPs (one connection each), READ's responder resources, and -m
// (the client's route limited, its QPs' MTU in the header).
func TestRDMACMShapes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in the output, if set
	}{
		{"write-lat -m 512", []string{"write-lat", "-m", "512", "-s", "4096", "-n", "300", "--validate"}, "Mtu             : 512[B]"},
		{"UD send-bw", []string{"send-bw", "-c", "UD", "-s", "1024", "-n", "300", "--validate"}, ""},
		{"UD send-bw -b", []string{"send-bw", "-c", "UD", "-s", "1024", "-n", "300", "-b"}, ""},
		{"UD send-lat", []string{"send-lat", "-c", "UD", "-s", "64", "-n", "300", "--validate"}, ""},
		{"write-bw -q 4", []string{"write-bw", "-q", "4", "-s", "4096", "-n", "300", "--validate"}, ""},
		{"read-bw -o 4", []string{"read-bw", "-o", "4", "-s", "4096", "-n", "300"}, ""},
	}
	for _, dev := range []string{"shm0", "udp_lo"} {
		for _, tt := range tests {
			t.Run(dev+"/"+tt.name, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "r.json")
				r := rperf(t, append(tt.args, "-R", "-d", dev, "--loopback", "--json", out)...)
				if r.code != 0 {
					t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
				}
				checkRDMACM(t, r, out, tt.args[0], dev, 1)
				if !strings.Contains(r.stdout, tt.want) {
					t.Errorf("no %q in:\n%s", tt.want, r.stdout)
				}
			})
		}
	}
}

// TestRDMACMSeparateSides runs the server and the client of udp_lo as
// separate commands, as on two hosts: the server's engine on a UDP port of
// its own (--udp-port), which the client's CM is told (--peer-udp-port).
func TestRDMACMSeparateSides(t *testing.T) {
	udpPort, port := freeUDPPort(t), freePort(t)
	srvOut := filepath.Join(t.TempDir(), "srv.json")
	srv := exec.Command(rperfBin, "write-lat", "-R", "-d", "udp_lo", "--udp-port", udpPort, "-p", port, "-n", "200", "--json", srvOut)
	done := make(chan result, 1)
	go func() { done <- runCmd(t, srv) }()
	cliOut := filepath.Join(t.TempDir(), "cli.json")
	cli := rperf(t, "write-lat", "-R", "-d", "udp_lo", "--udp-port", "0", "--peer-udp-port", udpPort, "-p", port, "-n", "200", "--json", cliOut, "127.0.0.1")
	s := <-done
	if cli.code != 0 || s.code != 0 {
		t.Fatalf("client exit %d: %s\nserver exit %d: %s", cli.code, cli.stderr, s.code, s.stderr)
	}
	checkRDMACM(t, cli, cliOut, "write-lat", "udp_lo", 1)
	checkRDMACM(t, s, srvOut, "write-lat", "udp_lo", 1)
}

// TestRDMACMErrors: a client with nobody listening fails naming the cause,
// and -R refuses what rdma_cm cannot do.
func TestRDMACMErrors(t *testing.T) {
	r := rperf(t, "send-bw", "-R", "-d", "shm0", "-p", freePort(t), "--timeout", "2s", "127.0.0.1")
	if r.code == 0 || !strings.Contains(r.stderr, "nothing listens on port") {
		t.Errorf("no server: exit %d, stderr %q", r.code, r.stderr)
	}
	r = rperf(t, "send-bw", "-R", "-c", "UC", "--loopback")
	if r.code != 2 || !strings.Contains(r.stderr, "rdma_cm connects RC and UD QPs only") {
		t.Errorf("-c UC: exit %d, stderr %q", r.code, r.stderr)
	}
	r = rperf(t, "paths", "-R", "--loopback")
	if r.code != 2 || !strings.Contains(r.stderr, "rdma_cm (-R) is for the eight test commands") {
		t.Errorf("paths -R: exit %d, stderr %q", r.code, r.stderr)
	}
	r = rperf(t, "send-bw", "--peer-udp-port", "5000", "-d", "udp_lo", "--loopback")
	if r.code != 2 || !strings.Contains(r.stderr, "applies with -R") {
		t.Errorf("--peer-udp-port without -R: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestRping runs rperf's rping server and client against each other as
// two processes, over shm0 (Unix sockets) and udp_lo (each engine on its
// own UDP port), with every echo checked and printed as rping -v does;
// with -q (self-created QPs: the client's deferred establish) on both
// sides and on one side only.
func TestRping(t *testing.T) {
	tests := []struct {
		name     string
		srv, cli []string
	}{
		{"shm0", []string{"-d", "shm0", "-a", "::1"}, []string{"-d", "shm0", "-a", "::1"}},
		{"udp_lo", nil, []string{"-d", "udp_lo", "-a", "127.0.0.1", "--udp-port", "0"}},
		{"shm0 -q", []string{"-d", "shm0", "-a", "::1", "-q"}, []string{"-d", "shm0", "-a", "::1", "-q"}},
		{"udp_lo -q client", nil, []string{"-d", "udp_lo", "-a", "127.0.0.1", "--udp-port", "0", "-q"}},
		{"udp_lo -q server", []string{"-q"}, []string{"-d", "udp_lo", "-a", "127.0.0.1", "--udp-port", "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := freePort(t)
			srvArgs, cliArgs := tt.srv, tt.cli
			if strings.HasPrefix(tt.name, "udp_lo") {
				udp := freeUDPPort(t)
				srvArgs = append([]string{"-d", "udp_lo", "-a", "127.0.0.1", "--udp-port", udp}, tt.srv...)
				cliArgs = append(cliArgs, "--peer-udp-port", udp)
			}
			srv := exec.Command(rperfBin, append([]string{"rping", "-s", "-v", "-p", port, "--timeout", "20s"}, srvArgs...)...)
			done := make(chan result, 1)
			go func() { done <- runCmd(t, srv) }()
			var cli result
			for try := 0; try < 50; try++ { // until the server listens
				cli = rperf(t, append([]string{"rping", "-c", "-v", "-V", "-C", "3", "-S", "40", "-p", port}, cliArgs...)...)
				if cli.code == 0 || !strings.Contains(cli.stderr, "no rping server listens") {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			s := <-done
			if cli.code != 0 || s.code != 0 {
				t.Fatalf("client exit %d: %s\nserver exit %d: %s", cli.code, cli.stderr, s.code, s.stderr)
			}
			// 40 bytes: "rdma-ping-N: ", 26 letters from rping's rotating start, NUL.
			want := "ping data: rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ\nping data: rdma-ping-1: BCDEFGHIJKLMNOPQRSTUVWXYZ[\nping data: rdma-ping-2: CDEFGHIJKLMNOPQRSTUVWXYZ[\\\n"
			if cli.stdout != want {
				t.Errorf("client printed\n%s\nwant\n%s", cli.stdout, want)
			}
			if strings.Count(s.stdout, "server ping data: rdma-ping-") != 3 {
				t.Errorf("server printed\n%s", s.stdout)
			}
		})
	}
}
