package rdiagcmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func pcapFile(name string) string { return filepath.Join("..", "..", "pcap", "testdata", name) }

// TestPcap summarises the committed captures, as a table and as JSON.
func TestPcap(t *testing.T) {
	cases := []struct {
		file                     string
		packets, icrcErr, nflows int
		format                   string
	}{
		{"rxe-rc.pcap", 74, 0, 8, "pcap"},
		{"rxe-rc.pcapng", 74, 0, 8, "pcapng"},
		{"rxe-rc-nsec.pcap", 74, 0, 8, "pcap"},
		{"perftest-oob.pcap", 0, 0, 0, "pcap"},
		{"perftest-oob.pcapng", 0, 0, 0, "pcapng"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			r := run(t, fakeEnv(), "pcap", "--json", pcapFile(c.file))
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			var got pcapJSON
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatal(err)
			}
			if got.Packets != c.packets || got.ICRCErrors != c.icrcErr || len(got.Flows) != c.nflows || got.FlowCount != c.nflows || got.Format != c.format {
				t.Errorf("packets %d, icrc_errors %d, flows %d (flow_count %d), format %s; want %d, %d, %d, %s",
					got.Packets, got.ICRCErrors, len(got.Flows), got.FlowCount, got.Format, c.packets, c.icrcErr, c.nflows, c.format)
			}
			if got.Error != nil {
				t.Errorf("error = %q, want none", *got.Error)
			}

			r = run(t, fakeEnv(), "pcap", pcapFile(c.file))
			if r.code != 0 {
				t.Fatalf("table: exit %d: %s", r.code, r.stderr)
			}
			if c.nflows > 0 {
				if n := strings.Count(r.stdout, "10.77.0."); n != 2*c.nflows {
					t.Errorf("table has %d flow addresses, want %d:\n%s", n, 2*c.nflows, r.stdout)
				}
			}
		})
	}
	r := run(t, fakeEnv(), "pcap", pcapFile("rxe-rc.pcap"))
	checkGolden(t, "pcap_rxe-rc.txt", r.stdout)
}

// TestPcapICRCFailure corrupts one payload byte of the rxe capture: that
// packet fails its ICRC, is counted, and the rest still decode.
func TestPcapICRCFailure(t *testing.T) {
	b, err := os.ReadFile(pcapFile("rxe-rc.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	// The first record starts after the 24-byte file header and its
	// 16-byte record header; its RoCEv2 payload starts after Ethernet 14,
	// IPv4 20, UDP 8 and BTH 12 bytes. Flip a payload byte.
	b[24+16+14+20+8+12+5] ^= 0xff
	path := filepath.Join(t.TempDir(), "bad.pcap")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, fakeEnv(), "pcap", "--json", path)
	var got pcapJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, r.stderr)
	}
	if got.Packets != 74 || got.ICRCErrors != 1 {
		t.Errorf("packets %d, icrc_errors %d; want 74, 1", got.Packets, got.ICRCErrors)
	}
	if r.code != 0 {
		t.Errorf("exit %d: an ICRC failure is a finding about the capture, not a failure of rdiag", r.code)
	}
}

// TestPcapErrors covers captures rdiag cannot read.
func TestPcapErrors(t *testing.T) {
	dir := t.TempDir()
	full, err := os.ReadFile(pcapFile("rxe-rc.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.pcap")
	if err := os.WriteFile(truncated, full[:20000], 0o644); err != nil {
		t.Fatal(err)
	}
	notPcap := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notPcap, []byte("these are not packets\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(dir, "unreadable.pcap")
	if err := os.WriteFile(unreadable, full, 0o000); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
		stdout string
	}{
		{"missing file", []string{"pcap", filepath.Join(dir, "nope.pcap")}, 1, "rdiag: open " + filepath.Join(dir, "nope.pcap") + ": no such file or directory\n", ""},
		{"not a capture", []string{"pcap", notPcap}, 1, "not a pcap or pcapng file", ""},
		{"directory", []string{"pcap", dir}, 1, "is a directory", ""},
		{"truncated", []string{"pcap", truncated}, 1, "capture damaged after 25 frames", "25 RoCEv2 packets"},
		{"truncated json", []string{"pcap", "--json", truncated}, 1, "capture damaged", `"error": "pcap: record 26`},
		{"no file", []string{"pcap"}, 2, "accepts 1 arg(s)", ""},
		{"bad mtu", []string{"pcap", "--mtu", "1500", pcapFile("rxe-rc.pcap")}, 2, "--mtu 1500: want 256, 512, 1024, 2048 or 4096", ""},
	}
	if os.Geteuid() != 0 { // root reads any file
		cases = append(cases, struct {
			name   string
			args   []string
			code   int
			stderr string
			stdout string
		}{"permission", []string{"pcap", unreadable}, 1, "permission denied", ""})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, fakeEnv(), c.args...)
			if r.code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", r.code, c.code, r.stderr)
			}
			if !strings.Contains(r.stderr, c.stderr) {
				t.Errorf("stderr %q lacks %q", r.stderr, c.stderr)
			}
			if lines := strings.Count(strings.TrimSuffix(r.stderr, "\n"), "\n"); c.code == 1 && lines != 0 {
				t.Errorf("stderr has %d lines, want one: %q", lines+1, r.stderr)
			}
			if !strings.Contains(r.stdout, c.stdout) {
				t.Errorf("stdout lacks %q:\n%s", c.stdout, r.stdout)
			}
		})
	}
}

// TestPcapStdin reads the capture from standard input ("-").
func TestPcapStdin(t *testing.T) {
	b, err := os.ReadFile(pcapFile("rxe-rc.pcapng"))
	if err != nil {
		t.Fatal(err)
	}
	root := NewRoot(fakeEnv())
	var out, errb bytes.Buffer
	root.SetIn(bytes.NewReader(b))
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs([]string{"pcap", "--json", "-"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var got pcapJSON
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Packets != 74 || len(got.Flows) != 8 {
		t.Errorf("packets %d, flows %d; want 74, 8", got.Packets, len(got.Flows))
	}
}

// TestPcapCM: the connection manager's MADs of Linux's CM capture, listed
// decoded in the table and in JSON.
func TestPcapCM(t *testing.T) {
	file := filepath.Join("..", "..", "..", "verbsio", "cm", "testdata", "rxe-cm1.pcap")
	r := run(t, fakeEnv(), "pcap", "--json", file)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var got pcapJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.CMMADs) != 50 || got.CMMADs[0].Attr != "REQ" || got.CMMADs[0].TID != 0x25990c418 {
		t.Fatalf("%d CM MADs, first %+v", len(got.CMMADs), got.CMMADs[0])
	}
	r = run(t, fakeEnv(), "pcap", file)
	for _, want := range []string{
		"connection manager MADs: 50",
		"+0.000000    10.77.0.2  10.77.0.1  REQ comm 0x18c49059 sid 0x0000000001061c06 qpn 0x11 psn 0xe8e10a RC mtu 1024",
		"REJ comm 0x0->0x18c49059 of REQ reason 8 (invalid service ID) tid 0x25990c418",
		"SIDR_REP id 0x17c49059 status 0 (success) qpn 0x18 qkey 0x1234567",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the table lacks %q:\n%s", want, r.stdout)
		}
	}
	// No MADs: an empty list, not null.
	r = run(t, fakeEnv(), "pcap", "--json", pcapFile("rxe-rc.pcap"))
	if !strings.Contains(r.stdout, `"cm_mads": []`) {
		t.Errorf("JSON without MADs:\n%s", r.stdout)
	}
}
