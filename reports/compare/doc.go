// Package compare compares a candidate rperf run against a baseline and
// decides, per key (test, message size, path) and metric, whether the
// candidate is better, worse, or the same within noise, with one error
// rate for the whole report. rperf compare is built on it, and CI uses
// its exit code.
//
// [Compare] groups the records of each side by [Key] (records of one key
// are repetitions), [Measure]s every metric ([ParseMetric]) on both sides,
// and [Judge]s all comparisons together: with enough runs, a t interval of
// the change of the runs' log figures, at the Bonferroni level that holds
// the report's confidence over all its comparisons ([Family]), with the
// noise moderated by the same metric at the other sizes; a regression is
// called only when the whole interval lies beyond the threshold. With too
// few runs the [Noise] basis degrades and a change is at most [Unsure].
//
// A [Report] writes itself as text, Markdown, JUnit XML and a JSON
// document (schema rperf-compare/v1, SCHEMA.md beside this file). The
// method, its reasons and its calibration on real runs are in
// docs/compare.md.
package compare
