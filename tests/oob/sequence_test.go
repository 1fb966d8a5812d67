package oob

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// kinds lists a sequence's step kinds (with the QP of key steps), the form
// the expectations below are written in.
func kinds(q Sequence) string {
	var parts []string
	for _, s := range q.Steps {
		p := s.Kind.String()
		if s.Kind == StepKey {
			p += strconv.Itoa(s.QP)
		}
		if s.PeerRuns {
			p += "*"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

// TestSequenceDefaults pins each program's sequence with default flags
// against a same-release peer, for both roles and both releases, as read
// from perftest's main() (docs/perftest-exchange.md). A "*" marks the step
// where a passive side waits for the peer's run.
func TestSequenceDefaults(t *testing.T) {
	const (
		open45  = "version sys-data mtu "
		open629 = "version sys-data mtu negotiate "
	)
	tests := []struct {
		p              Program
		client, server string // after the opening exchanges
		close45        string // appended for 6.06 (6.29: the same without "done")
	}{
		{SendLat, "key0 connect barrier key0 barrier run close", "key0 connect barrier key0 barrier run close", " done"},
		{WriteLat, "barrier key0 connect key0 barrier run", "barrier key0 connect key0 barrier run", ""},
		{ReadLat, "barrier key0 connect key0 barrier run close", "barrier key0 connect key0 barrier close*", " done"},
		{AtomicLat, "barrier key0 connect key0 barrier run close", "barrier key0 connect key0 barrier close*", " done"},
		{SendBW, "key0 connect barrier key0 barrier run close", "key0 connect barrier key0 barrier run close", " done"},
		{WriteBW, "key0 connect key0 barrier run barrier report close", "key0 connect key0 barrier barrier* report close", " done"},
		{ReadBW, "key0 connect key0 barrier run barrier report close", "key0 connect key0 barrier barrier* report close", " done"},
		{AtomicBW, "key0 connect key0 barrier run barrier report close", "key0 connect key0 barrier barrier* report close", " done"},
	}
	for _, tt := range tests {
		for _, server := range []bool{false, true} {
			want := tt.client
			if server {
				want = tt.server
			}
			for _, r := range Releases {
				name := fmt.Sprintf("%s/%s/server=%v", tt.p, r.Version, server)
				q, err := r.Sequence(tt.p, SequenceOptions{Server: server})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				w := open629 + want
				if r == Perftest45 {
					w = open45 + want + tt.close45
				}
				if got := kinds(q); got != w {
					t.Errorf("%s:\n got %s\nwant %s", name, got, w)
				}
			}
		}
	}
}

// TestSequenceVariants pins how -q, -a, -b and -D change the sequences
// (release 6.29 against an rperf-like 6.27 peer: no negotiation, no done).
func TestSequenceVariants(t *testing.T) {
	all := func(n int, unit string) string {
		return strings.TrimSpace(strings.Repeat(unit+" ", n))
	}
	tests := []struct {
		name string
		p    Program
		o    SequenceOptions
		want string
	}{
		{"send_lat -a: a barrier before each size", SendLat, SequenceOptions{All: true},
			"key0 connect barrier key0 " + all(23, "barrier run") + " close"},
		{"send_lat -a -c UD: sizes up to the MTU", SendLat, SequenceOptions{All: true, Conn: UD, MTU: MTU1024},
			"key0 connect barrier key0 " + all(10, "barrier run") + " close"},
		{"write_lat -a: no barrier between sizes", WriteLat, SequenceOptions{All: true},
			"barrier key0 connect key0 barrier " + all(23, "run")},
		{"read_lat -a server: still one close", ReadLat, SequenceOptions{All: true, Server: true},
			"barrier key0 connect key0 barrier close*"},
		{"send_bw -q 3: keys per QP", SendBW, SequenceOptions{QPs: 3},
			"key0 key1 key2 connect barrier key0 key1 key2 barrier run close"},
		{"send_bw -b: report", SendBW, SequenceOptions{Duplex: true},
			"key0 connect barrier key0 barrier run report close"},
		{"send_bw -b -D: no report in duration mode", SendBW, SequenceOptions{Duplex: true, Duration: true},
			"key0 connect barrier key0 barrier run close"},
		{"send_bw -a: barriers around each size", SendBW, SequenceOptions{All: true, Conn: UD},
			"key0 connect barrier key0 " + all(10, "barrier run barrier") + " close"},
		{"send_bw -a -b: report per size", SendBW, SequenceOptions{All: true, Duplex: true, Conn: UD},
			"key0 connect barrier key0 " + all(10, "barrier run report barrier") + " close"},
		{"write_bw -q 2 client", WriteBW, SequenceOptions{QPs: 2},
			"key0 key1 connect key0 key1 barrier run barrier report close"},
		{"write_bw -a client: one report at the end", WriteBW, SequenceOptions{All: true},
			"key0 connect key0 barrier " + all(23, "run") + " barrier report close"},
		{"write_bw -a server: passive", WriteBW, SequenceOptions{All: true, Server: true},
			"key0 connect key0 barrier barrier* report close"},
		{"write_bw -b", WriteBW, SequenceOptions{Duplex: true, Server: true},
			"key0 connect key0 barrier barrier run report close"},
		{"write_bw -b -D: the report stays", WriteBW, SequenceOptions{Duplex: true, Duration: true},
			"key0 connect key0 barrier barrier run report close"},
		{"read_bw -a -b: two barriers and a report per size", ReadBW, SequenceOptions{All: true, Duplex: true},
			"key0 connect key0 barrier " + all(23, "barrier run barrier report") + " close"},
		{"atomic_bw -b -q 2", AtomicBW, SequenceOptions{Duplex: true, QPs: 2},
			"key0 key1 connect key0 key1 barrier barrier run report close"},
	}
	for _, tt := range tests {
		tt.o.PeerVersion = "6.27 rperf/1"
		q, err := PerftestUpstream.Sequence(tt.p, tt.o)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got, want := kinds(q), "version sys-data mtu "+tt.want; got != want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, want)
		}
	}
}

// TestSequenceSymmetric checks, over every combination of the flags that
// matter, that both roles exchange the same messages in the same order (a
// sequence where they differed would deadlock), that refused combinations
// are refused for both roles, and that every active side runs each size
// once.
func TestSequenceSymmetric(t *testing.T) {
	bools := []bool{false, true}
	n := 0
	for _, r := range Releases {
		for _, p := range Programs {
			for _, qps := range []int{1, 4} {
				for _, all := range bools {
					for _, duplex := range bools {
						for _, dur := range bools {
							for _, conn := range []ConnType{RC, UC, UD} {
								for _, noGID := range bools {
									o := SequenceOptions{QPs: qps, All: all, Duplex: duplex, Duration: dur, Conn: conn, NoGID: noGID}
									name := fmt.Sprintf("%s/%s/%+v", r.Version, p, o)
									c, cerr := r.Sequence(p, o)
									o.Server = true
									s, serr := r.Sequence(p, o)
									if (cerr == nil) != (serr == nil) {
										t.Fatalf("%s: client error %v, server error %v", name, cerr, serr)
									}
									if cerr != nil {
										if !strings.Contains(cerr.Error(), string(p)) {
											t.Errorf("%s: error %q does not name the program", name, cerr)
										}
										continue
									}
									n++
									if !slices.Equal(c.Wire(), s.Wire()) {
										t.Errorf("%s: client wire %v != server wire %v\nclient %s\nserver %s", name, c.Wire(), s.Wire(), c, s)
									}
									sizes := len(AllSizes(p, conn, MTU1024))
									if !all {
										sizes = 1
									}
									if got := c.Count(StepRun); got != sizes {
										t.Errorf("%s: client runs %d sizes, want %d", name, got, sizes)
									}
									passive := !duplex && !p.Latency() && p.Verb() != "send" || p == ReadLat || p == AtomicLat
									if want := sizes; passive {
										if got := s.Count(StepRun); got != 0 {
											t.Errorf("%s: passive server runs %d sizes", name, got)
										}
									} else if got := s.Count(StepRun); got != want {
										t.Errorf("%s: server runs %d sizes, want %d", name, got, want)
									}
									keyLen := KeySizeGID
									if noGID {
										keyLen = KeySize
									}
									for _, st := range c.Steps {
										if (st.Kind == StepKey || st.Kind == StepBarrier || st.Kind == StepClose) && !slices.Equal(st.Wire, []int{keyLen}) {
											t.Fatalf("%s: %v carries %v, want one %d-byte key", name, st, st.Wire, keyLen)
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	if n < 200 {
		t.Errorf("only %d accepted combinations checked", n)
	}
}

// TestSequenceRefusals checks the combinations perftest's parser refuses.
func TestSequenceRefusals(t *testing.T) {
	tests := []struct {
		p    Program
		o    SequenceOptions
		want string
	}{
		{WriteLat, SequenceOptions{QPs: 2}, "Multiple QPs only available on bw tests"},
		{SendLat, SequenceOptions{Duplex: true}, "Bidirectional is only available in BW test"},
		{AtomicBW, SequenceOptions{All: true}, "Message size cannot be changed for Atomic tests"},
		{AtomicLat, SequenceOptions{All: true}, "Message size cannot be changed for Atomic tests"},
		{WriteBW, SequenceOptions{All: true, Duration: true}, "doesn't support running on all sizes"},
		{ReadBW, SequenceOptions{Conn: UC}, "UC connection not possible"},
		{WriteLat, SequenceOptions{Conn: UD}, "UD connection only possible in SEND verb"},
	}
	for _, tt := range tests {
		for _, r := range Releases {
			_, err := r.Sequence(tt.p, tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s %s %+v: error %v, want one containing %q", r.Version, tt.p, tt.o, err, tt.want)
			}
		}
	}
	if _, err := Perftest45.Sequence(WriteBW, SequenceOptions{PeerVersion: "5.60"}); err == nil || !strings.Contains(err.Error(), "5.70") {
		t.Errorf("peer 5.60: error %v, want the 5.70 refusal", err)
	}
}

// TestReleaseFor checks the mapping from an announced version to a
// described release.
func TestReleaseFor(t *testing.T) {
	for v, want := range map[string]Release{
		"6.06": Perftest45, "6.17": Perftest45, Version: Perftest45, "6.29": PerftestUpstream, "7.1": PerftestUpstream, "": Perftest45,
	} {
		if got := ReleaseFor(v); got != want {
			t.Errorf("ReleaseFor(%q) = %v, want %v", v, got, want)
		}
	}
	for _, name := range []string{"write-lat", "ib_write_lat", "write_lat"} {
		if p, ok := ProgramFor(name); !ok || p != WriteLat {
			t.Errorf("ProgramFor(%q) = %q, %v", name, p, ok)
		}
	}
	if _, ok := ProgramFor("ib_write"); ok {
		t.Error("ProgramFor(ib_write) succeeded")
	}
}

// A captured run: a perftest program and its flags, run by the release
// that announced version against the same release.
type capturedRun struct {
	version string
	p       Program
	o       SequenceOptions
	flags   string
}

// sequenceCaptures lists the captures checked against Sequence: the
// shared rxe-vm capture (four runs of perftest 4.5, see capture_test.go),
// and the ones `make interop`'s capture step took on the VM link (see
// tests/interop), each with a manifest naming the run of each TCP
// connection in order.
func sequenceCaptures(t *testing.T) map[string][]capturedRun {
	t.Helper()
	m := map[string][]capturedRun{
		capturePath: {
			parseRun(t, "6.06 ib_send_bw -s 2048 -n 8"),
			parseRun(t, "6.06 ib_write_bw -s 2048 -n 8"),
			parseRun(t, "6.06 ib_read_lat -s 64 -n 8"),
			parseRun(t, "6.06 ib_atomic_lat -A FETCH_AND_ADD -n 5"),
		},
	}
	manifests, err := filepath.Glob("testdata/sequence-*.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range manifests {
		f, err := os.Open(mf)
		if err != nil {
			t.Fatal(err)
		}
		var runs []capturedRun
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			runs = append(runs, parseRun(t, line))
		}
		f.Close()
		m[strings.TrimSuffix(mf, ".txt")+".pcap"] = runs
	}
	return m
}

// parseRun reads "VERSION PROGRAM FLAGS...".
func parseRun(t *testing.T, line string) capturedRun {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 2 {
		t.Fatalf("manifest line %q: want VERSION PROGRAM FLAGS", line)
	}
	p, ok := ProgramFor(f[1])
	if !ok {
		t.Fatalf("manifest line %q: unknown program", line)
	}
	r := capturedRun{version: f[0], p: p, flags: strings.Join(f[2:], " ")}
	for i := 2; i < len(f); i++ {
		arg := func() string {
			if i+1 >= len(f) {
				t.Fatalf("manifest line %q: %s needs a value", line, f[i])
			}
			i++
			return f[i]
		}
		switch f[i] {
		case "-q":
			r.o.QPs, _ = strconv.Atoi(arg())
		case "-a":
			r.o.All = true
		case "-b":
			r.o.Duplex = true
		case "-D":
			arg()
			r.o.Duration = true
		case "-c":
			r.o.Conn = ConnType(arg())
		case "-s":
			n, err := strconv.ParseUint(arg(), 10, 64)
			if err != nil {
				t.Fatalf("manifest line %q: -s: %v", line, err)
			}
			r.o.Size = n
		case "-n", "-A", "-d", "-i", "-x", "-m", "-p", "-t", "-Q", "-l", "-I":
			arg()
		case "-F", "--report_gbits":
		default:
			t.Fatalf("manifest line %q: flag %s is not understood here", line, f[i])
		}
	}
	return r
}

// TestSequenceCaptures splits every captured perftest-to-perftest run by
// the sequence Sequence gives for it, both directions, requires the
// streams to end exactly there, and checks each message's contents: the
// version string, the MTU, key messages that parse and repeat the same QP
// addresses, barriers and the close carrying QP 0's key, the reports'
// sizes, the negotiation's QP count and "done".
func TestSequenceCaptures(t *testing.T) {
	caps := sequenceCaptures(t)
	if len(caps) < 2 {
		t.Logf("only the shared capture: no testdata/sequence-*.pcap")
	}
	for path, runs := range caps {
		streams := readTCPStreams(t, path)
		if len(streams) != len(runs) {
			t.Fatalf("%s: %d connections, manifest lists %d runs", path, len(streams), len(runs))
		}
		for i, run := range runs {
			s := streams[i]
			name := fmt.Sprintf("%s#%d %s %s %s", filepath.Base(path), i+1, run.version, run.p, run.flags)
			r := ReleaseFor(run.version)
			if r.Version != run.version {
				t.Fatalf("%s: no release announces %q", name, run.version)
			}
			for _, server := range []bool{false, true} {
				o := run.o
				o.Server = server
				q, err := r.Sequence(run.p, o)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				stream := s.toServer
				side := "client"
				if server {
					stream, side = s.toClient, "server"
				}
				checkCapturedSide(t, name+"/"+side, q, stream)
			}
		}
	}
}

func checkCapturedSide(t *testing.T, name string, q Sequence, stream []byte) {
	t.Helper()
	off := 0
	next := func(st Step, n int) []byte {
		if off+n > len(stream) {
			t.Fatalf("%s: stream of %d bytes ends inside %v (a %d-byte message at offset %d); sequence %s", name, len(stream), st, n, off, q)
		}
		b := stream[off : off+n]
		off += n
		return b
	}
	keys := map[int][]byte{} // this side's key message per QP, as first sent
	for _, st := range q.Steps {
		var msgs [][]byte
		for _, n := range st.Wire {
			msgs = append(msgs, next(st, n))
		}
		switch st.Kind {
		case StepVersion:
			if v := versionString(msgs[0]); v != q.Release.Version {
				t.Errorf("%s: version %q, want %q", name, v, q.Release.Version)
			}
		case StepMTU:
			if m, err := parseMTU(msgs[0]); err != nil || !m.Valid() {
				t.Errorf("%s: MTU message %q: %v %v", name, msgs[0], m, err)
			}
		case StepNegotiate:
			if got := binary.BigEndian.Uint32(msgs[0][52:]); int(got) != q.Options.QPs {
				t.Errorf("%s: negotiation num_of_qps %d, want %d", name, got, q.Options.QPs)
			}
		case StepKey, StepBarrier, StepClose:
			d, err := ParseKey(msgs[0])
			if err != nil {
				t.Fatalf("%s: %v: %v", name, st, err)
			}
			if d.HasGID == q.Options.NoGID {
				t.Errorf("%s: %v: GID form %v", name, st, d.HasGID)
			}
			qp := st.QP
			if st.Kind != StepKey {
				qp = 0
			}
			if ref, ok := keys[qp]; !ok {
				keys[qp] = msgs[0]
			} else if !bytes.Equal(msgs[0], ref) {
				t.Errorf("%s: %v carries %q, not QP %d's key %q", name, st, msgs[0], qp, ref)
			}
		case StepReport:
			if !q.Options.Server || q.Options.Duplex {
				want := st.Size
				if want == 0 {
					want = lastRunSize(q)
				}
				if got := binary.BigEndian.Uint64(msgs[0]); got != want {
					t.Errorf("%s: report size %d, want %d", name, got, want)
				}
			}
		case StepDone:
			if !bytes.Equal(msgs[0], doneMessage) {
				t.Errorf("%s: %q, want %q", name, msgs[0], doneMessage)
			}
		}
	}
	if off != len(stream) {
		t.Errorf("%s: %d bytes after the sequence's end (%q...); sequence %s", name, len(stream)-off, stream[off:min(len(stream), off+16)], q)
	}
}

func lastRunSize(q Sequence) uint64 {
	var s uint64
	for _, st := range q.Steps {
		if st.Kind == StepRun {
			s = st.Size
		}
	}
	return s
}

// TestServerDisconnectsFirst: only peers of the upstream release's
// sequence (6.29 and newer) wait for the server's DREQs at the end of a
// -R run; 4.5's (6.06) client disconnects itself.
func TestServerDisconnectsFirst(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want bool
	}{{"6.06", false}, {"6.16", false}, {"6.29", true}, {"6.30", true}} {
		if got := ServerDisconnectsFirst(tt.v); got != tt.want {
			t.Errorf("ServerDisconnectsFirst(%q) = %v, want %v", tt.v, got, tt.want)
		}
	}
}
