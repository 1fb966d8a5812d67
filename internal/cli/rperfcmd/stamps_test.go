package rperfcmd

import (
	"errors"
	"strings"
	"testing"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/verbsio"
)

// TestCompletionTimestampsFlag checks where --completion-timestamps
// applies: the latency tests, on a path that reads completions, on a
// device that stamps them.
func TestCompletionTimestampsFlag(t *testing.T) {
	cases := []struct {
		cmd  string
		args []string
		want string // "" for no error
	}{
		{"send-lat", nil, ""},
		{"write-lat", []string{"-a", "--max-size", "64"}, ""},
		{"write-lat", []string{"--path", "dv"}, ""},
		{"read-lat", nil, ""},
		{"atomic-lat", []string{"-D", "2"}, ""},
		{"write-bw", nil, "--completion-timestamps applies to latency tests only, not to write-bw; drop it"},
		{"send-lat", []string{"--path", "burst"}, "--path burst and --completion-timestamps conflict: the burst path counts completions (the cq_poll family) and reads none of their timestamps"},
	}
	for _, c := range cases {
		t.Run(c.cmd+strings.Join(c.args, ""), func(t *testing.T) {
			o, err := parse(t, c.cmd, append([]string{"--completion-timestamps"}, c.args...)...)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("err = %v", err)
			case c.want == "":
				if cfg := o.latencyConfig(o.sizes); !cfg.CompletionTimestamps {
					t.Errorf("the configuration does not take completion timestamps")
				}
			case err == nil || !strings.Contains(err.Error(), c.want):
				t.Errorf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestCompletionTimestampsDevice checks the device's part: a device
// without a completion clock is the machine's problem, named by its
// field; one with it gives its rate to the header and the document.
func TestCompletionTimestampsDevice(t *testing.T) {
	o, err := parse(t, "send-lat", "--completion-timestamps")
	if err != nil {
		t.Fatal(err)
	}
	attr := shmAttr
	err = o.checkDevice(attr, "mlx5_0")
	var ee *cli.EnvironmentError
	want := "--completion-timestamps: mlx5_0 does not stamp completions (completion_timestamp_mask 0; rdiag info -v mlx5_0 shows it)"
	if err == nil || !errors.As(err, &ee) || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want an environment error containing %q", err, want)
	}
	attr.Ext = &verbsio.DeviceAttrEx{CompletionTimestampMask: 1<<48 - 1, HCACoreClock: 156250}
	if err := o.checkDevice(attr, "mlx5_0"); err != nil {
		t.Fatal(err)
	}
	x := map[string]string{}
	o.stampsExtra(x)
	if o.clockKHz != 156250 || x["completion_clock_khz"] != "156250" {
		t.Errorf("clock %d kHz, env.extra %v", o.clockKHz, x)
	}
	// Without the flag a device without a clock is fine.
	o, _ = parse(t, "send-lat")
	if err := o.checkDevice(shmAttr, "mlx5_0"); err != nil {
		t.Errorf("without the flag: %v", err)
	}
}
