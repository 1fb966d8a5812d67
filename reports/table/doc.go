// Package table prints rperf results as text.
//
// The first block of every test is perftest's own result lines, byte for byte:
// the same headers, widths, precision and tabs as perftest's RESULT_FMT_LAT /
// REPORT_FMT_LAT, RESULT_FMT_LAT_DUR / REPORT_FMT_LAT_DUR and RESULT_FMT /
// REPORT_FMT (src/perftest_parameters.h). Scripts that parse perftest's
// output, and users who compare by eye, can read them unchanged.
//
// For latency, a second block follows with rperf's true statistics: exact
// minimum, maximum, mean and standard deviation, and the HdrHistogram
// percentiles, over every sample. A closing line names the clock that took
// the timestamps, with its resolution and its cost per read.
//
// The lines are written with fmt and fixed widths instead of a table
// library, because the perftest lines must match perftest exactly.
package table
