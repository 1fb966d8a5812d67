// Package reports is rperf's result model: it turns raw measurements into
// the numbers a perftest user expects, beside the true statistics perftest
// does not give, and writes them as a versioned JSON document, HdrHistogram
// .hgrm text, and (in package reports/table) perftest's own text lines.
//
// # Latency
//
// A test loop records one round-trip sample per iteration, in nanoseconds,
// with [Recorder.Record], which never allocates. [NewLatencyResult] then
// computes, from the same samples:
//
//   - perftest's fields ([Perftest]), reproduced exactly as perftest's
//     print_report_lat computes them, quirks included: the two largest
//     samples are dropped, t_max is the second-largest sample, the standard
//     deviation truncates each deviation to whole microseconds before
//     squaring, and the 99%/99.9% "percentiles" index the sorted array at
//     ceil(n*0.99) and ceil(n*0.999), which for small n lands on a dropped
//     sample;
//   - rperf's true statistics: exact minimum and maximum, exact mean,
//     exact population standard deviation, and percentiles from an
//     HdrHistogram that saw every sample.
//
// Both sets are divided by the same rtt_factor (2 for SEND and WRITE, whose
// samples are round trips; 1 for READ and ATOMIC) and reported in
// microseconds, so they can be compared column by column.
//
// # Bandwidth
//
// [BWAverage], [BWPeak] and [NewBandwidthResult] implement perftest's
// print_report_bw: average bandwidth over the whole run, message rate, and
// the peak bandwidth over windows of post-list and CQ-moderation steps,
// which perftest (and rperf) skip above 20000 iterations.
//
// # Documents
//
// A [Document] is {"schema": "rperf/v1", "env": {...}, "results": [...]},
// one [Result] per message size. SCHEMA.md beside this file documents every
// field, its unit and its definition.
package reports
