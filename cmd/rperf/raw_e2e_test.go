package main_test

import (
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/cli/rperfcmd"
	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/reports"
)

// macOf is the MAC address of link in namespace ns.
func macOf(t *testing.T, ns, link string) string {
	t.Helper()
	var mac string
	err := netns.Run(ns, func() error {
		ifc, err := net.InterfaceByName(link)
		if err != nil {
			return err
		}
		mac = ifc.HardwareAddr.String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

var rawReady = regexp.MustCompile(`^ Clock\s+:`)

// TestRawBWPacedProcesses paces rperf raw-bw at 100 Mb/s with the client
// and the server as separate processes in two namespaces over a veth pair
// (-s 1514, -n 10000: 1.21 s at the rate), as a user runs it. The
// in-process harness never showed the bug this guards: with perftest's CQ
// moderation the client polled one completion in 100 (12 ms apart), its
// wait backed off into time.Sleep naps, the engine's pacer (which runs
// only when the application polls or waits) lost the time, and the rate
// came out at 40 Mb/s in every run on an idle machine (before 585d3fe).
//
// The rate is the client's as rperf reports it (1514-byte frames, headers
// and payload without the FCS, as perftest counts -s, over the first post
// to the last completion); the server's is from the first arrival to the
// last. Neither may be above the rate: the bucket's initial 4 KiB burst
// moves the client's figure by +0.03%, so +1% is a pacer that runs ahead.
// Below the rate, the client is judged over the time its sending thread
// could run: rperf says, when the rate is more than 1% off, how long that
// thread waited for a CPU during the run, and the engine, which paces when
// its sender runs and catches up 10 ms of a late sender's lateness, loses
// no more of the rate than that wait (a loaded machine's). At least 80%
// of the rate over the run less the wait; the 40 Mb/s bug lost the time
// while the client slept, not waited, and reads 40%. A run whose sender
// waited for more than half of it leaves too little to judge (logged).
func TestRawBWPacedProcesses(t *testing.T) {
	pair := netns.Setup(t, netns.Options{})
	macA, macB := macOf(t, pair.A.NS, pair.A.Link), macOf(t, pair.B.NS, pair.B.Link)
	ipA, ipB := pair.A.Addr4.Addr().String(), pair.B.Addr4.Addr().String()
	const (
		mbps   = 100.0
		frames = "10000"
	)
	dir := t.TempDir()
	// perftest's address flags: -J the server's IP and -j the client's,
	// the same on both sides.
	sp := startCmd(t, netns.Command(pair.B.NS, rperfBin, "raw-bw", "-d", "raw_"+pair.B.Link, "-Z", "-E", macA, "-J", ipB, "-j", ipA,
		"-s", "1514", "-n", frames, "-r", "8192", "--timeout", "10s", "--json", filepath.Join(dir, "server.json")))
	sp.waitLine(t, rawReady, 30*time.Second)
	cli := runCmd(t, netns.Command(pair.A.NS, rperfBin, "raw-bw", "-d", "raw_"+pair.A.Link, "-P", "-E", macB, "-J", ipB, "-j", ipA,
		"-s", "1514", "-n", frames, "--rate_limit", fmt.Sprint(mbps/1000), "--json", filepath.Join(dir, "client.json"))) // in Gb/s, perftest's default unit
	code := sp.wait(t, 30*time.Second)
	if cli.code != 0 || code != 0 {
		t.Fatalf("client exit %d, stderr %s; server exit %d, stderr %s", cli.code, cli.stderr, code, sp.errb.String())
	}
	c := rawBWRate(t, filepath.Join(dir, "client.json"))
	s := rawBWRate(t, filepath.Join(dir, "server.json"))
	t.Logf("client %.3f Mb/s, server %.3f Mb/s (asked %v)", c, s, mbps)
	if c > mbps*1.01 || s > mbps*1.01 {
		t.Fatalf("client %.3f Mb/s, server %.3f Mb/s: above the %v Mb/s asked (the pacer runs ahead)", c, s, mbps)
	}
	if s < c*0.97 {
		// The receiver lost frames or was starved: say so; the
		// client's rate is the pacer's.
		t.Logf("the server's rate is %.1f%% under the client's", 100*(1-s/c))
	}
	if c >= mbps*0.8 {
		return
	}
	waited, el, ok := rperfcmd.PacingWait(cli.stdout)
	if !ok {
		t.Fatalf("client %.3f Mb/s of %v, and no line saying how long its sender waited for a CPU:\n%s", c, mbps, cli.stdout)
	}
	ran := el - waited
	t.Logf("the sender waited %v for a CPU during the %v run", waited, el)
	if ran < el/2 {
		t.Logf("the sender waited for more than half of the run: too little to judge the pacer by")
		return
	}
	if r := c * float64(el) / float64(ran); r < mbps*0.8 {
		t.Errorf("paced at %v Mb/s, the client achieved %.3f Mb/s, %.1f Mb/s over the %v its sender could run: under 80%% (a pacer that loses time while the client waits)",
			mbps, c, r, ran)
	}
}

// rawBWRate is the Mb/s of the one raw_ethernet_bw result of 1514-byte
// frames in an rperf/v1 document.
func rawBWRate(t *testing.T, path string) float64 {
	t.Helper()
	doc, err := reports.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != 1 || doc.Results[0].Test != "raw_ethernet_bw" || doc.Results[0].Bytes != 1514 || doc.Results[0].Bandwidth == nil {
		t.Fatalf("%s: results %+v, want one raw_ethernet_bw result of 1514 B", path, doc.Results)
	}
	return doc.Results[0].BWAvgGbps * 1000
}
