//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/tests/interop/internal/matrix"
	"github.com/rperf/rperf/tests/interop/internal/vm"
)

// captureRuns are the perftest runs whose TCP exchange -capture records,
// each release against itself. tests/oob's TestSequenceCaptures splits
// each by the sequence its model gives.
var captureRuns = []string{
	"ib_send_lat -n 5", "ib_write_lat -n 5", "ib_read_lat -n 5", "ib_atomic_lat -n 5",
	"ib_send_bw -n 5", "ib_write_bw -n 5", "ib_read_bw -n 5", "ib_atomic_bw -n 5",
	"ib_send_bw -q 2 -b -n 5", "ib_write_bw -q 2 -b -n 5", "ib_read_bw -q 2 -n 5", "ib_atomic_bw -q 2 -b -n 5",
	"ib_send_lat -a -c UD -n 5", "ib_send_bw -a -c UD -n 5", "ib_send_bw -a -b -c UD -n 5",
	"ib_write_lat -a -n 5", "ib_read_lat -a -n 5", "ib_write_bw -a -n 5", "ib_read_bw -a -b -n 5",
	"ib_send_lat -D 2", "ib_send_bw -b -D 2", "ib_write_bw -b -D 2",
}

// captures runs every captureRun with both sides in the VM, the client
// connecting through a relay on the host's end of the link, and records
// the client-to-relay connection with tcpdump on the bridge: the bytes of
// two real perftests, as they crossed a real link. One pcap and one
// manifest per perftest release go to captures/ in the results.
func (c *config) captures(ctx context.Context, env *matrix.Env, link *vm.Link, peers []matrix.Peer, logf func(string, ...any)) (int, error) {
	dir := filepath.Join(c.results, "captures")
	os.MkdirAll(dir, 0o755)
	failed := 0
	for _, p := range peers {
		version := strings.TrimPrefix(p.Name, "perftest ")
		pcap := filepath.Join(dir, "sequence-"+version+".pcap")
		filter := fmt.Sprintf("tcp and ((dst host %[1]s and dst port %[2]d) or (src host %[1]s and src port %[2]d))", vm.HostAddr, matrix.Port)
		stop, err := startTcpdump(link, pcap, filepath.Join(dir, "tcpdump-"+version+".log"), filter, 0)
		if err != nil {
			return 2, err
		}
		var manifest strings.Builder
		fmt.Fprintf(&manifest, "# perftest %s against itself, both in the VM on rxe0, the client through a relay on the link\n", version)
		for i, run := range captureRuns {
			f := strings.Fields(run)
			argv := append([]string{p.Dir + "/" + f[0], "-d", "rxe0", "-F"}, f[1:]...)
			base := fmt.Sprintf("captures/%s-%02d-%s", version, i+1, f[0])
			relay, err := newRelay(link)
			if err != nil {
				stop()
				return 2, err
			}
			rdone := make(chan error, 1)
			go func() { rdone <- relay.serveOne(2 * time.Minute) }()
			srv, cli, err := env.RunPair(ctx, env.VM, argv, base+".server.txt", env.VM, append(argv, vm.HostAddr), base+".client.txt", 3*time.Minute)
			relay.close()
			rerr := <-rdone
			// A reset at the end is perftest's own: before 6.17 each side
			// writes "done" after the last exchange and closes, and the
			// later writer finds the socket closed. What matters is that
			// both perftests succeeded.
			ok := err == nil && srv.Result().RC == 0 && cli.Result().RC == 0
			logf("capture %s %s: ok=%v (run: %v; relay: %v)", version, run, ok, err, rerr)
			if !ok {
				failed++
				continue
			}
			fmt.Fprintf(&manifest, "%s %s\n", version, run)
		}
		stop()
		os.WriteFile(strings.TrimSuffix(pcap, ".pcap")+".txt", []byte(manifest.String()), 0o644)
		logf("wrote %s and its manifest; copy both into tests/oob/testdata to check them", pcap)
	}
	if failed > 0 {
		return 1, fmt.Errorf("%d capture runs failed (left out of the manifests)", failed)
	}
	return 0, nil
}

// startTcpdump records what filter selects on the bridge into pcap
// (classic pcap; snap bytes of each packet, 0 for all) and returns a
// function that stops it.
func startTcpdump(link *vm.Link, pcap, logPath, filter string, snap int) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := link.Command("tcpdump", "-i", vm.Bridge, "-U", "-s", strconv.Itoa(snap), "-Z", "root", "-w", pcap, filter)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = logf, pw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("tcpdump (apt-get install tcpdump): %w", err)
	}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if strings.Contains(sc.Text(), "listening on") {
				close(listening)
				io.Copy(logf, pr)
				return
			}
		}
	}()
	stop := func() {
		// tcpdump stops reading at SIGINT: let it take in the last
		// packets first.
		time.Sleep(2 * time.Second)
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		pw.Close()
		logf.Close()
	}
	select {
	case <-listening:
		return stop, nil
	case <-time.After(20 * time.Second):
		stop()
		return nil, errors.New("tcpdump did not start listening within 20s")
	}
}

// relay accepts one connection on the host's end of the link and joins it
// to the VM's perftest server.
type relay struct {
	link *vm.Link
	ln   net.Listener
}

func newRelay(link *vm.Link) (*relay, error) {
	r := &relay{link: link}
	err := netns.Run(link.NS, func() error {
		var err error
		r.ln, err = net.Listen("tcp4", net.JoinHostPort(vm.HostAddr, strconv.Itoa(matrix.Port)))
		return err
	})
	return r, err
}

func (r *relay) close() { r.ln.Close() }

// serveOne relays one connection, both ways, until both ends close or
// limit passes.
func (r *relay) serveOne(limit time.Duration) error {
	r.ln.(*net.TCPListener).SetDeadline(time.Now().Add(limit))
	in, err := r.ln.Accept()
	if err != nil {
		return fmt.Errorf("relay accept: %w", err)
	}
	defer in.Close()
	var out net.Conn
	err = netns.Run(r.link.NS, func() error {
		var err error
		out, err = net.DialTimeout("tcp4", net.JoinHostPort(vm.VMAddr, strconv.Itoa(matrix.Port)), 10*time.Second)
		return err
	})
	if err != nil {
		return fmt.Errorf("relay dial: %w", err)
	}
	defer out.Close()
	deadline := time.Now().Add(limit)
	in.SetDeadline(deadline)
	out.SetDeadline(deadline)
	errs := make(chan error, 2)
	pipe := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		dst.(*net.TCPConn).CloseWrite()
		errs <- err
	}
	go pipe(out, in)
	go pipe(in, out)
	return errors.Join(<-errs, <-errs)
}
