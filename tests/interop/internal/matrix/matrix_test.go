//go:build linux

package matrix

import (
	"fmt"
	"github.com/rperf/rperf/tests/oob"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var testPeers = []Peer{
	{Name: "perftest 6.06", Kind: PerftestPeer, Dir: "/usr/bin"},
	{Name: "perftest 6.29", Kind: PerftestPeer, Dir: "/opt/interop/perftest"},
}

// TestBuild checks the matrix's shape: numbered in order, every host case
// against every perftest peer in both roles, the VM cases against rperf
// once and against each perftest in both roles, every program with
// defaults, and no line twice.
func TestBuild(t *testing.T) {
	ls := Build(testPeers)
	seen := map[string]bool{}
	count := map[string]int{}
	for i, l := range ls {
		if l.N != i+1 {
			t.Fatalf("line %d numbered %d", i+1, l.N)
		}
		key := fmt.Sprintf("%v|%s|%s|%s|%v|%v", l.Setup, l.Peer.Name, l.Test, l.Flags+"|"+l.PeerFlags, l.RperfServer, l.Single)
		if seen[key] {
			t.Errorf("line %d repeats %s", l.N, key)
		}
		seen[key] = true
		count[fmt.Sprintf("%v/%s/%v", l.Setup, l.Peer.Name, l.RperfServer)]++
	}
	hc := len(HostCases())
	serverOnly := 0
	for _, c := range HostCases() {
		if c.ServerOnly != "" {
			serverOnly++
		}
	}
	if serverOnly != 1 {
		t.Errorf("%d host cases run with rperf as server only, want 1 (unpaced send-bw -c UC)", serverOnly)
	}
	vc := len(VMCases())
	for i, p := range testPeers {
		vcm := 0
		if i == 0 {
			vcm = len(VMCMCases()) // -R in the VM: the first peer only
		}
		for _, srv := range []bool{false, true} {
			want := hc
			if !srv {
				want -= serverOnly
			}
			if got := count[fmt.Sprintf("%v/%s/%v", HostUDP, p.Name, srv)]; got != want {
				t.Errorf("host lines against %s, server=%v: %d, want %d", p.Name, srv, got, want)
			}
			if got := count[fmt.Sprintf("%v/%s/%v", VMIbverbs, p.Name, srv)]; got != vc+vcm {
				t.Errorf("vm lines against %s, server=%v: %d, want %d", p.Name, srv, got, vc+vcm)
			}
		}
	}
	if got, want := count[fmt.Sprintf("%v/rperf/false", VMIbverbs)], vc+len(VMRperfOnly()); got != want {
		t.Errorf("vm rperf-to-rperf lines: %d, want %d", got, want)
	}
	rc := len(RpingCases)
	for _, setup := range []Setup{HostUDP, VMIbverbs} {
		for _, srv := range []bool{false, true} {
			if got := count[fmt.Sprintf("%v/%s/%v", setup, Rping.Name, srv)]; got != rc {
				t.Errorf("rping lines (%v), rperf server=%v: %d, want %d", setup, srv, got, rc)
			}
		}
	}
	// The -R lines in the VM run against the first perftest peer only.
	for i, p := range testPeers {
		want := 0
		if i == 0 {
			want = len(VMCMCases())
		}
		for _, srv := range []bool{false, true} {
			n := 0
			for _, l := range ls {
				if l.Setup == VMIbverbs && l.Peer.Name == p.Name && l.RperfServer == srv && l.Listener().CM {
					n++
				}
			}
			if n != want {
				t.Errorf("vm -R lines against %s, server=%v: %d, want %d", p.Name, srv, n, want)
			}
		}
	}
	want := len(testPeers)*(2*hc-serverOnly) + 2*2*rc + vc + len(testPeers)*2*vc + 2*len(VMCMCases()) + len(VMRperfOnly()) + len(SingleCases())
	if len(ls) != want {
		t.Errorf("%d lines, want %d", len(ls), want)
	}
	defaults := map[string]bool{}
	for _, c := range HostCases() {
		if c.Flags == iters(c.Test) {
			defaults[c.Test] = true
		}
	}
	for _, test := range allTests {
		if !defaults[test] {
			t.Errorf("no defaults case for %s", test)
		}
	}
}

// TestRDMACMCases checks issue 12's lines: every program with -R, UD
// with -R for both send tests, and that -R and rping lines wait for an
// rdma_cm listener on their port while the others wait for TCP.
func TestRDMACMCases(t *testing.T) {
	withR := map[string]bool{}
	udR := map[string]bool{}
	for _, c := range HostCases() {
		ln := c.Listener()
		hasR := strings.Contains(" "+c.Flags+" ", " -R ")
		if ln.CM != hasR || ln.Port != Port {
			t.Errorf("%s %s: listener %+v, want port %d, rdma_cm %v", c.Test, c.Flags, ln, Port, hasR)
		}
		if hasR && c.Expect == Pass {
			withR[c.Test] = true
			if strings.Contains(c.Flags, "-c UD") {
				udR[c.Test] = true
			}
		}
	}
	for _, test := range allTests {
		if !withR[test] {
			t.Errorf("no -R case for %s", test)
		}
	}
	for _, test := range []string{"send-lat", "send-bw"} {
		if !udR[test] {
			t.Errorf("no -R -c UD case for %s", test)
		}
	}
	if got, want := RpingCase.Listener(), (Listener{Port: RpingPort, CM: true}); got != want {
		t.Errorf("rping listener %+v, want %+v", got, want)
	}
}

// TestRefusedAsPerftest checks that every case expected to be refused is
// one perftest refuses, in the words oob.Check gives.
func TestRefusedAsPerftest(t *testing.T) {
	n := 0
	for _, c := range HostCases() {
		if c.Expect != Refused {
			continue
		}
		n++
		prog, ok := oob.ProgramFor(c.Test)
		if !ok {
			t.Fatalf("%s: no perftest program", c.Test)
		}
		var o oob.SequenceOptions
		f := strings.Fields(c.Flags)
		for i, a := range f {
			switch a {
			case "-a":
				o.All = true
			case "-b":
				o.Duplex = true
			case "-q":
				o.QPs, _ = strconv.Atoi(f[i+1])
			case "-c":
				o.Conn = oob.ConnType(f[i+1])
			}
		}
		err := oob.Check(prog, o)
		if err == nil || !strings.Contains(err.Error(), c.Why) {
			t.Errorf("%s %s: oob.Check says %v, the case says perftest refuses it with %q", c.Test, c.Flags, err, c.Why)
		}
	}
	if n == 0 {
		t.Error("no refused case")
	}
}

// TestArgv checks the command lines of both sides of a host line in each
// role, GID placeholders included.
func TestArgv(t *testing.T) {
	e := &Env{HostRperf: "/b/rperf", VMRperf: "/opt/interop/bin/rperf", RperfTimeout: 15 * time.Second,
		GIDs: map[string]map[string]string{"host": {"gid4": "1", "gid6": "2"}, "vm": {"gid4": "3", "gid6": "4"}}}
	l := Line{Case: Case{Test: "write-lat", Flags: "-x {gid6} -n 200"}, Setup: HostUDP, Peer: testPeers[0]}
	tests := []struct {
		server      bool
		rperf, peer string
	}{
		{false, "/b/rperf write-lat -d udp_br0 -x 2 -n 200 --timeout 15s 10.77.0.1", "/usr/bin/ib_write_lat -d rxe0 -F -x 4 -n 200"},
		{true, "/b/rperf write-lat -d udp_br0 -x 2 -n 200 --timeout 15s", "/usr/bin/ib_write_lat -d rxe0 -F -x 4 -n 200 10.77.0.9"},
	}
	for _, tt := range tests {
		l.RperfServer = tt.server
		if got := strings.Join(e.rperfArgv(l, l.Flags, !tt.server), " "); got != tt.rperf {
			t.Errorf("server=%v rperf:\n got %s\nwant %s", tt.server, got, tt.rperf)
		}
		if got := strings.Join(e.perftestArgv(l, l.Flags, tt.server), " "); got != tt.peer {
			t.Errorf("server=%v peer:\n got %s\nwant %s", tt.server, got, tt.peer)
		}
	}
	rping := Line{Case: RpingCase, Setup: HostUDP, Peer: Rping}
	for _, tt := range []struct {
		server      bool
		rperf, peer string
	}{
		{false, "/b/rperf rping -d udp_br0 -C 3 -v -V --timeout 15s -c -a 10.77.0.1", "/usr/bin/rping -C 3 -v -V -s -a 10.77.0.1"},
		{true, "/b/rperf rping -d udp_br0 -C 3 -v -V --timeout 15s -s -a 10.77.0.9", "/usr/bin/rping -C 3 -v -V -c -a 10.77.0.9"},
	} {
		rping.RperfServer = tt.server
		if got := strings.Join(e.rperfArgv(rping, rping.Flags, !tt.server), " "); got != tt.rperf {
			t.Errorf("rping server=%v rperf:\n got %s\nwant %s", tt.server, got, tt.rperf)
		}
		if got := strings.Join(e.perftestArgv(rping, rping.Flags, tt.server), " "); got != tt.peer {
			t.Errorf("rping server=%v peer:\n got %s\nwant %s", tt.server, got, tt.peer)
		}
	}
	vmLine := Line{Case: Case{Test: "paths", Flags: "-n 2000"}, Setup: VMIbverbs, Single: true}
	if got, want := strings.Join(e.rperfArgv(vmLine, vmLine.Flags, true), " "), "/opt/interop/bin/rperf paths -d rxe0 -n 2000 --timeout 15s --loopback"; got != want {
		t.Errorf("single:\n got %s\nwant %s", got, want)
	}
}

// TestJudge checks the verdicts from exit codes and logs.
func TestJudge(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		os.WriteFile(filepath.Join(dir, name), []byte("# host: rperf ...\n"+text), 0o644)
		return name
	}
	e := &Env{Results: dir}
	disagree := "rperf: peers disagree: client runs write-lat -s 64, server runs write-lat -s 128; start both with the same flags\n"
	tests := []struct {
		name     string
		o        Outcome
		pass     bool
		inReason string
	}{
		{"both zero", Outcome{Line: Line{Peer: testPeers[0]}}, true, ""},
		{"peer killed", Outcome{Line: Line{Peer: testPeers[0]}, PeerKilled: true}, false, "peer killed"},
		{"rperf error", Outcome{Line: Line{Peer: testPeers[0]}, RperfRC: 1, RperfLog: write("a", "rperf: no progress from the peer\n")}, false, "no progress"},
		{"perftest error", Outcome{Line: Line{Peer: testPeers[0]}, PeerRC: 1, PeerLog: write("b", " Couldn't read remote address\n")}, false, "Couldn't read"},
		{"disagree with perftest: rperf ends with an error", Outcome{Line: Line{Case: Case{Expect: Disagree}, Peer: testPeers[0]}, RperfRC: 1, PeerKilled: true, RperfLog: write("c", "rperf: timed out\n")}, true, "timed out"},
		{"disagree with perftest: rperf killed", Outcome{Line: Line{Case: Case{Expect: Disagree}, Peer: testPeers[0]}, RperfRC: 137, RperfKilled: true, RperfLog: write("d", "")}, false, "rperf killed"},
		{"disagree between rperfs", Outcome{Line: Line{Case: Case{Expect: Disagree}, Peer: Peer{Name: "rperf", Kind: RperfPeer}}, RperfRC: 2, PeerRC: 2, RperfLog: write("e", disagree), PeerLog: write("f", disagree)}, true, "peers disagree"},
		{"disagree between rperfs, one silent", Outcome{Line: Line{Case: Case{Expect: Disagree}, Peer: Peer{Name: "rperf", Kind: RperfPeer}}, RperfRC: 2, PeerRC: 1, RperfLog: write("g", disagree), PeerLog: write("h", "rperf: the peer closed\n")}, false, ""},
		{"unsupported", Outcome{Line: Line{Case: Case{Expect: Unsupported}, Single: true}, RperfRC: 4, RperfLog: write("i", "rperf: dm-lat: rxe0 does not support the dm send path\n")}, true, "dm send path"},
		{"unsupported but ran", Outcome{Line: Line{Case: Case{Expect: Unsupported}, Single: true}, RperfLog: write("j", "")}, false, ""},
		{"refused by both", Outcome{Line: Line{Case: Case{Expect: Refused, Why: "UC connection not possible in READ/ATOMIC verbs"}, Peer: testPeers[0]}, RperfRC: 2, PeerRC: 1, RperfLog: write("k", "rperf: -c UC: read-lat runs over RC only\n")}, true, "READ/ATOMIC"},
		{"refused by perftest only", Outcome{Line: Line{Case: Case{Expect: Refused}, Peer: testPeers[0]}, RperfRC: 0, PeerRC: 1, RperfLog: write("l", "")}, false, ""},
		{"refused by rperf, perftest killed", Outcome{Line: Line{Case: Case{Expect: Refused}, Peer: testPeers[0]}, RperfRC: 2, PeerRC: 137, PeerKilled: true, RperfLog: write("m", "rperf: -b applies to bandwidth tests only\n")}, false, ""},
	}
	for _, tt := range tests {
		o := tt.o
		e.judge(&o)
		if o.Pass != tt.pass || !strings.Contains(o.Reason, tt.inReason) {
			t.Errorf("%s: pass %v reason %q; want pass %v and a reason containing %q", tt.name, o.Pass, o.Reason, tt.pass, tt.inReason)
		}
	}
}
