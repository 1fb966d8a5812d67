package raw

import (
	"context"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/verbsio"
)

// RunCountingSends is Run that also returns the send completions the
// raw-bw client polled, for the tests of its CQ moderation.
func RunCountingSends(ctx context.Context, dev *verbsio.Context, c *Config) ([]reports.Result, int, error) {
	var n int
	res, err := run(ctx, dev, c, nil, &n)
	return res, n, err
}
