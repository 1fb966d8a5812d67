//go:build linux

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestResultRow reads the first result row of perftest's and rperf's
// outputs, skipping the header block and the column titles.
func TestResultRow(t *testing.T) {
	dir := t.TempDir()
	perftest := ` Mtu             : 1024[B]
---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 2       2000          52.41          1912.00      61.20     	       70.11        	30.01   		190.50  		1900.00
---------------------------------------------------------------------------------------
`
	bw := " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n 65536      2000             12.03              10.50  		     0.000168\n"
	for name, tt := range map[string]struct {
		text string
		want []float64
	}{
		"lat": {perftest, []float64{2, 2000, 52.41, 1912, 61.2, 70.11, 30.01, 190.5, 1900}},
		"bw":  {bw, []float64{65536, 2000, 12.03, 10.5, 0.000168}},
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(tt.text), 0o644)
		got, err := resultRow(p)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: resultRow = %v, %v; want %v", name, got, err, tt.want)
		}
	}
	p := filepath.Join(dir, "none")
	os.WriteFile(p, []byte(" #bytes #iterations\n Couldn't connect\n"), 0o644)
	if _, err := resultRow(p); err == nil {
		t.Error("resultRow found a row in output without one")
	}
	for name, tt := range map[string]struct {
		text string
		want int
		ok   bool
	}{
		"perftest": {" GID index       : 1\n Max inline data : 0[B]\n rdma_cm QPs\t : OFF\n", 0, true},
		"220":      {" Mtu             : 1024[B]\n Max inline data : 220[B]\n", 220, true},
		"none":     {" Mtu             : 1024[B]\n", 0, false},
	} {
		p := filepath.Join(dir, "inline-"+name)
		os.WriteFile(p, []byte(tt.text), 0o644)
		got, err := inlineSize(p)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("%s: inlineSize = %d, %v; want %d, ok %v", name, got, err, tt.want, tt.ok)
		}
	}
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median = %v", m)
	}
}

// TestEngineCounters reads the sent, received and retransmitted packets
// from rperf's engine line, and refuses output without them.
func TestEngineCounters(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name, text string
		want       counters
		ok         bool
	}{
		{"line", " 65536      1000   9.10   8.90   0.000142\n engine udp_br0 (UDP port 4791) packets: sent 97338, received 3501, retransmitted 1204, rewinds 12, duplicates 0, ICRC errors 0, out of sequence 0, timeouts 2\n", counters{97338, 3501, 1204}, true},
		{"no line", " 65536      1000   9.10   8.90   0.000142\n", counters{}, false},
		{"no retransmitted", " engine udp_br0 packets: sent 5, received 4\n", counters{}, false},
		{"no received", " engine udp_br0 packets: sent 5, retransmitted 4\n", counters{}, false},
	} {
		p := filepath.Join(dir, tt.name)
		os.WriteFile(p, []byte(tt.text), 0o644)
		got, err := engineCounters(p)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("%s: engineCounters = %+v, %v; want %+v, ok %v", tt.name, got, err, tt.want, tt.ok)
		}
	}
}

// TestCompareDevinfo runs the devinfo step's comparison on devinfotest's
// checked-in rxe0 capture (which agrees), then on a copy where rdiag
// lost a line (which must fail and name it).
func TestCompareDevinfo(t *testing.T) {
	src := "../../../../internal/testsupport/devinfotest/testdata/rxe0"
	dir := t.TempDir()
	for _, n := range []string{"ibv_devinfo-v", "ibv_devinfo", "rdiag-info-v", "rdiag-info", "rdiag-ports", "rdiag-gids", "rdma-link", "rdma-dev"} {
		b, err := os.ReadFile(filepath.Join(src, n+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, n+".txt"), b, 0o644)
	}
	if err := compareDevinfo(dir); err != nil {
		t.Fatalf("the checked-in capture: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "rdiag-info-v.txt"))
	var kept []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "max_qp_wr:") {
			kept = append(kept, l)
		}
	}
	os.WriteFile(filepath.Join(dir, "rdiag-info-v.txt"), []byte(strings.Join(kept, "\n")), 0o644)
	if err := compareDevinfo(dir); err == nil || !strings.Contains(err.Error(), "max_qp_wr") {
		t.Errorf("without max_qp_wr: %v", err)
	}
}
