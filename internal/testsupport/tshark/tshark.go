// Package tshark runs Wireshark's tshark over frames a test built or
// captured, with checksum validation on, and returns the fields the test
// asks for, so that tests check their packets against an independent
// dissector.
package tshark

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/pcap"
)

// Path is where tshark is looked for first; the PATH is searched after.
const Path = "/usr/bin/tshark"

// Checksum statuses as tshark prints *.checksum.status fields.
const (
	Bad        = "0"
	Good       = "1"
	Unverified = "2"
	NotPresent = "3" // a zero UDP checksum
)

func find() string {
	if _, err := os.Stat(Path); err == nil {
		return Path
	}
	p, _ := exec.LookPath("tshark")
	return p
}

// Skip skips t, saying how to install tshark, when it is not installed.
func Skip(t testing.TB) {
	t.Helper()
	if find() == "" {
		t.Skip("needs tshark to check frames with an independent dissector: apt-get install -y tshark")
	}
}

// Fields writes frames (Ethernet) into a pcap file under t.TempDir(), runs
// tshark over it with IP, TCP and UDP checksum validation on and returns,
// per frame, the values of fields (several occurrences of one field, such
// as the outer and inner ip.id of a VXLAN frame, are joined by ";").
// A frame's pcap file is kept in the temporary directory when t fails.
func Fields(t testing.TB, frames [][]byte, fields ...string) [][]string {
	t.Helper()
	Skip(t)
	path := filepath.Join(t.TempDir(), "frames.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	w, err := pcap.NewWriter(bw, pcap.LinkTypeEthernet, pcap.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1_700_000_000, 0)
	for i, fr := range frames {
		if err := w.WritePacket(ts.Add(time.Duration(i)*time.Microsecond), fr, len(fr)); err != nil {
			t.Fatal(err)
		}
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	args := []string{"-r", path, "-n",
		"-o", "ip.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
		"-o", "tcp.analyze_sequence_numbers:FALSE",
		"-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=;"}
	for _, fl := range fields {
		args = append(args, "-e", fl)
	}
	cmd := exec.Command(find(), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if line == "" && len(frames) == 0 {
			continue
		}
		rows = append(rows, strings.Split(line, "\t"))
	}
	if len(rows) != len(frames) {
		t.Fatalf("tshark printed %d rows for %d frames:\n%s", len(rows), len(frames), out)
	}
	return rows
}
