// Package compare compares a candidate rperf run against a baseline and
// decides, per measurement and metric, whether the candidate is better,
// worse, or the same within noise. rperf compare is built on it, and CI
// uses its exit code.
//
// # What is compared
//
// Records are matched on their [Key]: test, message size and path. All
// records of one key on one side are repetitions (runs) of the same
// measurement, whether they sit in one document or in several. Keys found
// on one side only are listed, not compared; when no key matches, Compare
// returns a [*NoMatchError] naming what each side has.
//
// Metrics ([ParseMetric]): for latency records any percentile pNN and the
// mean, in microseconds one-way (divided by rtt_factor, as the records
// are); for bandwidth records bw_avg (Gb/s) and msg_rate (Mpps). Lower
// latency is better, higher bandwidth and message rate are better.
//
// Each side of a latency comparison has one figure over all its samples:
// the runs' HdrHistograms (the records' hdr fields) are merged, exactly
// — they share range and precision, so Merge adds bucket counts and the
// merged histogram is the one a single recorder would have built from
// every sample — and the percentile is read from it, capped at the
// largest true maximum as rperf caps it; the mean is pooled exactly from
// the runs' exact means and sample counts. A bandwidth side's figure is
// the median of its runs. The relative change is (candidate − baseline) /
// baseline of these figures.
//
// # Noise, and why this method
//
// Whether a change is real is judged from the per-run values, because the
// variation that matters for a regression check is between runs (another
// process start, other memory placement, a noisy neighbour), and the
// samples inside one run are neither independent nor representative of
// it. The method is rank based and exact:
//
//   - The Hodges-Lehmann interval of the shift between the two sides: the
//     n·m pairwise differences candidate − baseline, sorted, and the
//     interval from the k-th smallest to the k-th largest, with k from the
//     exact null distribution of the Mann-Whitney U statistic so that the
//     interval's confidence is at least the level asked (default 95%). It
//     excludes zero exactly when a two-sided Mann-Whitney test would call
//     the difference significant at that level. The interval is divided by
//     the baseline's figure to be a relative interval.
//
// It assumes no distribution shape, which matters for latency tails and
// bandwidth plateaus; it is deterministic (no resampling, no seed, the
// same inputs always give the same verdict); and it states its real
// confidence, including when it cannot reach the level asked. The usual
// alternative, a bootstrap of the median, fits the handful of runs a CI
// job affords badly: with 3 to 10 values the bootstrap distribution of a
// median takes only a few distinct values, and its percentile interval
// claims 95% where it covers far less (with 3 runs, [min, max], which
// holds the true median 75% of the time). The Mann-Whitney test is also
// what Go's benchstat applies to benchmark repetitions, so its behaviour
// is familiar: a rank interval at 95% needs at least 4 runs per side (or
// 3 and 5, or 2 and 8); see [stats.MaxConfidence].
//
// With fewer runs the comparison degrades in steps, and each comparison
// says which it used ([Noise]):
//
//   - runs: the rank interval above.
//   - range: repetitions, but too few for the level asked. Each side's
//     interval spans all its runs and, for latency, the within-run
//     interval of its pooled samples; the change's interval is their
//     difference. The report gives the most confidence these runs can
//     give (90% for 3 against 3), not the level asked.
//   - histogram: one latency run per side. Each side's interval is the
//     within-run interval of its histogram: order statistics of the
//     pooled samples for a percentile ([stats.QuantileRanks]), the
//     standard error for the mean. This is the histogram-based spread,
//     and the reason says the verdict rests on one sample per side.
//   - none: one bandwidth run per side. A bandwidth record is one number,
//     so nothing measures the noise.
//
// # Verdicts
//
// A comparison is [Worse] or [Better] when both hold: the change reaches
// the threshold (default 5%) in that direction, and its rank interval
// from enough runs (basis runs) lies entirely on that side of zero. It is
// [Same] when the change is below the threshold, or when its interval,
// of any basis, includes no change (within noise); the reason says which.
// A baseline of 0 has no relative change ([NoVerdict]). The threshold
// keeps statistically clear but practically irrelevant changes (a real
// 0.5% shift over many runs) from failing CI.
//
// When the change reaches the threshold and the sides do not overlap, but
// the basis is range, histogram or none, the verdict is [Unsure]: the
// data cannot say it at the confidence asked, so it is not called worse.
// This is measured, not cautious by principle: on the development VM,
// two identical write_lat runs of 10000 iterations differed by +35% at
// p99 and ×10 at p99.9, and by +25% in the mean, while each run's
// histogram interval was a few percent wide. Samples within a run are
// not independent (a stall delays a burst of them), so a histogram's
// spread measures the noise within a run and says nothing of the
// variation between runs; only repetitions measure that. Only [Worse]
// fails a check ([Report.Failures]), unless [Options.FailUnsure] makes an
// unsure change in the worse direction fail too, for CI jobs that can
// afford one run per side and prefer false alarms to misses. A lower
// confidence (0.9) turns 3 against 3 runs into a rank interval.
//
// # Outputs
//
// A [Report] writes itself as a plain text table ([Report.WriteText]),
// Markdown for CI comments ([Report.WriteMarkdown]), JUnit XML with one
// testcase per key and metric, a regression being a failure
// ([Report.WriteJUnit]), and a JSON comparison document with its own
// schema, rperf-compare/v1, described in SCHEMA.md beside this file
// ([Report.WriteJSON]).
package compare
