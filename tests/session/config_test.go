package session

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/verbsio"
)

// The test table: names, families, roles and perftest's defaults.
func TestTests(t *testing.T) {
	cases := []struct {
		test                 Test
		command              string
		family               Family
		verb                 Verb
		passive              bool
		rtt, size, iters, tx int
		inlineRC, inlineUD   int
	}{
		{SendLat, "send-lat", Latency, Send, false, 2, 2, 1000, 1, 236, 188},
		{WriteLat, "write-lat", Latency, Write, false, 2, 2, 1000, 1, 220, 220},
		{ReadLat, "read-lat", Latency, Read, true, 1, 2, 1000, 1, 0, 0},
		{AtomicLat, "atomic-lat", Latency, Atomic, true, 1, 8, 1000, 1, 0, 0},
		{SendBW, "send-bw", Bandwidth, Send, false, 2, 65536, 1000, 128, 0, 0},
		{WriteBW, "write-bw", Bandwidth, Write, true, 2, 65536, 5000, 128, 0, 0},
		{ReadBW, "read-bw", Bandwidth, Read, true, 1, 65536, 1000, 128, 0, 0},
		{AtomicBW, "atomic-bw", Bandwidth, Atomic, true, 1, 8, 1000, 128, 0, 0},
	}
	if len(cases) != len(Tests) {
		t.Fatalf("%d tests, the table has %d", len(Tests), len(cases))
	}
	for i, c := range cases {
		x := Tests[i]
		if x != c.test || x.Command() != c.command || x.Name() != strings.ReplaceAll(c.command, "-", "_") || x.Family() != c.family ||
			x.Verb() != c.verb || x.Passive() != c.passive || x.RTTFactor() != c.rtt || x.DefaultSize() != c.size ||
			x.DefaultIterations() != c.iters || x.DefaultTxDepth() != c.tx ||
			x.DefaultInline(verbsio.QPTypeRC) != c.inlineRC || x.DefaultInline(verbsio.QPTypeUD) != c.inlineUD {
			t.Errorf("%s: %s %s %s passive %v rtt %d size %d iters %d tx %d inline %d/%d", x, x.Command(), x.Family(), x.Verb(),
				x.Passive(), x.RTTFactor(), x.DefaultSize(), x.DefaultIterations(), x.DefaultTxDepth(),
				x.DefaultInline(verbsio.QPTypeRC), x.DefaultInline(verbsio.QPTypeUD))
		}
		if got := x.PathTest(verbsio.QPTypeUC); got.Bandwidth != (c.family == Bandwidth) || got.Type != verbsio.QPTypeUC {
			t.Errorf("%s: path test %+v", x, got)
		}
		d := Default(x)
		if d.Test != x || d.Sizes[0] != c.size || d.Iterations != c.iters || d.TxDepth != c.tx || d.Inline != c.inlineRC ||
			d.RxDepth != DefaultRxDepth || d.GIDIndex != AutoGID || d.Check() != nil {
			t.Errorf("%s: Default %+v: %v", x, d, d.Check())
		}
	}
	if Test(12).Valid() || Test(12).String() != "Test(12)" || Family(7).String() != "Family(7)" {
		t.Error("out of the table")
	}
	// The raw tests: family Raw, RAW_PACKET, perftest's raw names, and not
	// among Tests (the families of perftest's exchange).
	for _, c := range []struct {
		test          Test
		name, command string
		tx            int
	}{{RawBW, "raw_ethernet_bw", "raw-bw", 128}, {RawLat, "raw_ethernet_lat", "raw-lat", 1}, {FSRate, "raw_ethernet_fs_rate", "fs-rate", 1},
		{RawBurstLat, "raw_ethernet_burst_lat", "raw-burst-lat", 128}} {
		x := c.test
		if x.Name() != c.name || x.Command() != c.command || x.Family() != Raw || x.Family().String() != "raw" ||
			x.DefaultSize() != MinRawSize || x.DefaultTxDepth() != c.tx || len(x.Connections()) != 1 || x.Connections()[0] != verbsio.QPTypeRawPacket {
			t.Errorf("%s: %s %s %s size %d tx %d over %v", x, x.Name(), x.Command(), x.Family(), x.DefaultSize(), x.DefaultTxDepth(), x.Connections())
		}
		for _, y := range Tests {
			if y == x {
				t.Errorf("%s is among Tests", x)
			}
		}
	}
	if SendLat.RTTFactor() != reports.RTTFactorRoundTrip || ReadLat.RTTFactor() != reports.RTTFactorOneSided {
		t.Error("rtt factors")
	}
}

// A FieldError reads in the library's terms (Error) and in a caller's
// (Text), with every field it names spelled by the reader.
func TestFieldErrorText(t *testing.T) {
	flags := map[string]string{"PostList": "-l", "TxDepth": "-t", "Iterations": "-n", "Validate": "--validate", "Path": "--path"}
	values := map[string]string{"PostList": "16", "TxDepth": "8", "Iterations": "10", "Path": "dm"}
	cli := func(field string, withValue bool) string {
		if withValue && field != "Validate" {
			return flags[field] + " " + values[field]
		}
		return flags[field]
	}
	cases := []struct {
		err      *FieldError
		lib, cli string
	}{
		{NewFieldError("TxDepth", 0, "tx depth must be between 1 and %d", MaxTxDepth),
			"TxDepth 0: tx depth must be between 1 and 15000", "-t 8: tx depth must be between 1 and 15000"},
		{NewFieldError("PostList", 16, "the post list cannot be longer than the tx depth ({TxDepth=}) or the iterations ({Iterations=})").
			WithValue("TxDepth", 8).WithValue("Iterations", 10),
			"PostList 16: the post list cannot be longer than the tx depth (TxDepth 8) or the iterations (Iterations 10)",
			"-l 16: the post list cannot be longer than the tx depth (-t 8) or the iterations (-n 10)"},
		{NewFieldError("Path", "dm", "{Path=} and {Validate} conflict: no").WithFix("validate on another {Path}"),
			"Path dm and data validation conflict: no; validate on another Path",
			"--path dm and --validate conflict: no; validate on another --path"},
		{&FieldError{Reason: "no field {here"}, "no field {here", "no field {here"},
	}
	for _, c := range cases {
		if got := c.err.Error(); got != c.lib {
			t.Errorf("Error() = %q, want %q", got, c.lib)
		}
		if got := c.err.Text(cli); got != c.cli {
			t.Errorf("Text() = %q, want %q", got, c.cli)
		}
	}
}

// Check reports every problem, in the order of its rules, each a
// FieldError naming its field.
func TestCheckProblems(t *testing.T) {
	c := Default(WriteLat)
	c.Connection = verbsio.QPTypeUD
	c.Sizes = []int{0}
	c.TxDepth = 0
	c.Inline = 2000
	c.Path = sendpath.DM
	c.Validate = true
	err := c.Check()
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("Check() = %v (%T), want Problems", err, err)
	}
	var fields []string
	for _, p := range ps {
		fields = append(fields, p.Field)
	}
	if got := strings.Join(fields, " "); got != "Connection Sizes TxDepth Inline Path" {
		t.Errorf("problems with %s", got)
	}
	if want := "Connection UD: write-lat runs over RC or UC only; it does not run over UD"; err.Error() != want {
		t.Errorf("Error() = %q, want the first problem %q", err, want)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "Connection" {
		t.Errorf("errors.As: %+v", fe)
	}
	var all Problems
	all.Add(err)
	all.Add(nil)
	all.Add((*FieldError)(nil))
	all.Add(errors.New("plain"))
	if len(all) != len(ps)+1 || all[len(all)-1].Error() != "plain" {
		t.Errorf("Add: %v", all)
	}
	if (Problems{}).Err() != nil {
		t.Error("no problems is no error")
	}

	// Length rules, one at a time.
	for _, m := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Duration = -time.Second }, "Duration -1s: the duration cannot be negative"},
		{func(c *Config) { c.Duration, c.Margin = time.Second, -time.Second }, "Margin -1s: the margin cannot be negative"},
		{func(c *Config) { c.Duration, c.Margin = 4*time.Second, 2*time.Second },
			"Duration 4s Margin 2s: the duration must be longer than twice the margin; use a longer Duration or a smaller Margin"},
		{func(c *Config) { c.Warmup = -1 }, "Warmup -1: the warm-up cannot be negative"},
		{func(c *Config) { c.Duration, c.Warmup = 5*time.Second, 1 }, "Warmup and Duration conflict"},
		{func(c *Config) { c.Test, c.Sizes, c.AtomicOp = AtomicLat, []int{8}, verbsio.OpSend }, "AtomicOp SEND: the atomic operation must be FETCH_AND_ADD or CMP_AND_SWAP"},
		{func(c *Config) { c.OutReads = -1 }, "OutReads -1: outstanding reads must be at least 1"},
		{func(c *Config) { c.Test = SendLat; c.RxDepth = 0 }, "RxDepth 0: rx depth must be between 1 and 15000"},
		{func(c *Config) { c.Path = sendpath.Burst; c.Test = SendLat; c.Validate = true }, "RecvBurst does not set"},
		{func(c *Config) { c.Test = 99 }, "Test 99: not one of rperf's tests"},
	} {
		c := Default(WriteLat)
		m.mod(&c)
		if err := c.Check(); err == nil || !strings.Contains(err.Error(), m.want) {
			t.Errorf("Check() = %v, want %q", err, m.want)
		}
	}
}
