//go:build linux

package main

import (
	"os"
	"path/filepath"
	"slices"
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
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median = %v", m)
	}
}
