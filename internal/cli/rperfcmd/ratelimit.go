package rperfcmd

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// rateOptions are perftest's rate limiter flags of the bandwidth tests
// (--rate_limit, --rate_units, --rate_limit_type). rperf paces through
// the QP's packet pacing (PP, ibv_modify_qp_rate_limit) only.
type rateOptions struct {
	rateLimit float64
	rateUnits string
	rateType  string
	rateKbps  uint32 // parsed: the QPs' rate limit, 0 = none
}

func (r *rateOptions) registerRate(fs *pflag.FlagSet, t session.Test) {
	fs.Float64Var(&r.rateLimit, "rate_limit", 0, "pace each sending QP to this rate (--rate_units), through the device's packet pacing; 0: as fast as the queue allows")
	fs.StringVar(&r.rateUnits, "rate_units", "g", rateUnitsHelp("messages"))
	fs.StringVar(&r.rateType, "rate_limit_type", "PP", "PP: the QP's packet pacing (rperf has no SW or HW limiter on these tests)")
	if t.Family() != session.Bandwidth {
		for _, name := range []string{"rate_limit", "rate_units", "rate_limit_type"} {
			fs.MarkHidden(name)
		}
	}
}

// validateRate turns --rate_limit and --rate_units into the QPs' rate in
// kbit/s (the device's range is checked once it is open: checkRate).
func (o *options) validateRate() error {
	r := &o.rateOptions
	given := o.changed("rate_limit") || o.changed("rate_units") || o.changed("rate_limit_type")
	switch {
	case !given:
		return nil
	case o.lat():
		return cli.Usagef("--rate_limit applies to bandwidth tests only, not to %s; drop it", o.test.Command())
	case r.rateLimit < 0 || math.IsNaN(r.rateLimit) || math.IsInf(r.rateLimit, 0):
		return cli.Usagef("--rate_limit %g: give a positive rate", r.rateLimit)
	case r.rateLimit == 0:
		return cli.Usagef("--rate_limit_type and --rate_units set how --rate_limit paces: give --rate_limit too")
	}
	switch strings.ToUpper(r.rateType) {
	case "PP":
	case "SW", "HW":
		return cli.Usagef("--rate_limit_type %s: rperf paces the bandwidth tests through the QP's packet pacing only; use PP", r.rateType)
	default:
		return cli.Usagef("--rate_limit_type %s: use PP (the QP's packet pacing)", r.rateType)
	}
	if r.rateUnits == "p" && o.all {
		return cli.Usagef("--rate_units p counts messages of one size: with -a, give the rate in M (MiB/s) or g (Gb/s)")
	}
	size := o.test.DefaultSize()
	if len(o.sizes) > 0 {
		size = o.sizes[0]
	}
	mbps, err := rateMbps(r.rateLimit, r.rateUnits, size, "messages")
	if err != nil {
		return err
	}
	kbps := math.Round(mbps * 1000)
	if kbps < 1 || kbps > math.MaxUint32 {
		return cli.Usagef("--rate_limit %g --rate_units %s is %g kbit/s: packet pacing takes 1 to %d kbit/s", r.rateLimit, r.rateUnits, kbps, uint32(math.MaxUint32))
	}
	r.rateKbps = uint32(kbps)
	return nil
}

// checkRate checks the rate against the device's packet pacing: a
// device without it cannot run the test (an environment error).
func (o *options) checkRate(pc verbsio.PacingCaps, dev string) error {
	switch {
	case o.rateKbps == 0:
		return nil
	case pc.RateLimitMaxKbps == 0:
		return &cli.EnvironmentError{Err: fmt.Errorf("--rate_limit: %s has no packet pacing (rdiag info shows packet_pacing); drop --rate_limit or use another device", dev)}
	case len(pc.SupportedQP) > 0 && !slices.Contains(pc.SupportedQP, o.qpType):
		return &cli.EnvironmentError{Err: fmt.Errorf("--rate_limit: %s paces %v QPs, not %s", dev, pc.SupportedQP, o.qpType)}
	case o.rateKbps < pc.RateLimitMinKbps || o.rateKbps > pc.RateLimitMaxKbps:
		return cli.Usagef("--rate_limit: %d kbit/s is outside %s's pacing range, %d to %d kbit/s", o.rateKbps, dev, pc.RateLimitMinKbps, pc.RateLimitMaxKbps)
	}
	return nil
}

// rateUnitsHelp is --rate_units' help; what is what --rate_units p counts.
func rateUnitsHelp(what string) string {
	return "--rate_limit's unit, as perftest's: M (MiB/s, 2^20 bytes per second), g (Gb/s, 10^9 bits per second; fractions allowed, e.g. 0.1) or p (" + what + " per second)"
}

// rateMbps turns --rate_limit's rate in --rate_units into Mb/s (10^6
// bits per second): perftest's M is MiB/s (10 M = 83.88608 Mb/s), g
// Gb/s and p messages (what) of size bytes per second.
func rateMbps(limit float64, units string, size int, what string) (float64, error) {
	switch units {
	case "M":
		return limit * 8 * 1048576 / 1e6, nil // bytes to bits, then one division: 10 M is 83.88608 exactly
	case "g":
		return limit * 1000, nil
	case "p":
		return limit * float64(size) * 8 / 1e6, nil
	}
	return 0, cli.Usagef("--rate_units %s: use M (MiB/s), g (Gb/s) or p (%s per second), as perftest's", units, what)
}

// rateText names a rate both ways: in Mb/s (10^6 bits per second) and
// as given, e.g. "83.886 Mb/s (--rate_limit 10 --rate_units M: MiB/s)".
func rateText(mbps, limit float64, units string) string {
	unit := map[string]string{"M": "MiB/s", "g": "Gb/s", "p": "per second"}[units]
	return fmt.Sprintf("%s Mb/s (--rate_limit %g --rate_units %s: %s)", strconv.FormatFloat(mbps, 'f', -1, 64), limit, units, unit)
}
