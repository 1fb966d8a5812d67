package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// SchemaV1 is the schema string of the documents this package writes.
const SchemaV1 = "rperf/v1"

// Document is one rperf output file: the environment, then one result per
// message size (and test). Its JSON form is documented in SCHEMA.md.
type Document struct {
	Schema  string   `json:"schema"`
	Env     Env      `json:"env"`
	Results []Result `json:"results"`
}

// NewDocument returns an empty rperf/v1 document for env.
func NewDocument(env Env) *Document {
	return &Document{Schema: SchemaV1, Env: env, Results: []Result{}}
}

// Mode says how a test was bounded.
type Mode string

// Test modes.
const (
	// ModeIterations: a fixed number of iterations (perftest -n).
	ModeIterations Mode = "iterations"
	// ModeDuration: a fixed time (perftest -D); only the sample window
	// between the margins counts.
	ModeDuration Mode = "duration"
)

// Result is one record: one test at one message size. Exactly one of
// Latency and Bandwidth is set; their fields appear flattened in JSON.
type Result struct {
	// Test names the test, e.g. "write_lat" or "send_bw" (perftest's
	// program name without "ib_").
	Test string `json:"test"`
	// Bytes is the message size.
	Bytes int64 `json:"bytes"`
	// Iterations is perftest's #iterations column: the -n value for latency
	// tests; messages (iterations × QPs) for bandwidth tests; in duration
	// mode, what completed in the sample window.
	Iterations int64 `json:"iterations"`
	Mode       Mode  `json:"mode"`
	// ElapsedNs is the measured interval in nanoseconds: for bandwidth, last
	// completion minus first post; in duration mode, the sample window.
	// 0 (omitted) for iteration-mode latency.
	ElapsedNs int64 `json:"elapsed_ns,omitempty"`

	*Latency
	*Bandwidth

	// Optional fields for later features; absent unless set.

	// Path names the send path or engine variant measured.
	Path string `json:"path,omitempty"`
	// RatioToGeneric is this result's figure of merit divided by the same
	// test's on the generic path.
	RatioToGeneric *float64 `json:"ratio_to_generic,omitempty"`
	// RequestedMbps and AchievedMbps are a paced test's target and measured
	// rate in Mb/s (10^6 bits per second).
	RequestedMbps *float64 `json:"requested_mbps,omitempty"`
	AchievedMbps  *float64 `json:"achieved_mbps,omitempty"`
	// ErrorPct is (achieved − requested) / requested × 100.
	ErrorPct *float64 `json:"error_pct,omitempty"`

	// Repeated measurements (rperf paths, dm-lat): a record is the
	// repetition whose figure of merit was the median of Repetitions
	// runs; Merit names the figure ("msg_rate_mpps", "p50_us"), Merits
	// holds every repetition's in run order, MeritMin and MeritMax are
	// their extremes, and Verdict compares the path with generic (see
	// [VerdictOf]).
	Repetitions int       `json:"repetitions,omitempty"`
	Merit       string    `json:"merit,omitempty"`
	Merits      []float64 `json:"merits,omitempty"`
	MeritMin    *float64  `json:"merit_min,omitempty"`
	MeritMax    *float64  `json:"merit_max,omitempty"`
	Verdict     string    `json:"verdict,omitempty"`

	// Device is the device a record was measured on, in a document that
	// holds records of several (rperf baseline); absent otherwise, where
	// env.device says it.
	Device string `json:"device,omitempty"`
	// Baseline names, on an engine's record of rperf baseline, the
	// machine's record (its test) for the same work, and RatioToBaseline
	// is this record's figure of merit (Merit) divided by that record's.
	Baseline        string   `json:"baseline,omitempty"`
	RatioToBaseline *float64 `json:"ratio_to_baseline,omitempty"`

	// Gap is a paced stream's inter-message gap distribution, and
	// ExcludedMessages the messages before the measurement (the token
	// bucket's initial burst).
	Gap              *Gap  `json:"gap,omitempty"`
	ExcludedMessages int64 `json:"excluded_messages,omitempty"`

	// Clock names where the latency samples came from when not the
	// software clock: ClockCompletion for the completion timestamps of
	// the device's clock (rperf's latency tests and raw-lat with
	// --completion-timestamps).
	Clock string `json:"clock,omitempty"`
}

// ClockCompletion is the Clock of latency results taken from completion
// timestamps, in the device's clock, beside the same run's software-clock
// result.
const ClockCompletion = "completion"

// Write writes d as indented JSON. It sets an empty Schema to [SchemaV1]
// and refuses any other.
func (d *Document) Write(w io.Writer) error {
	if d.Schema == "" {
		d.Schema = SchemaV1
	}
	if d.Schema != SchemaV1 {
		return fmt.Errorf("write document: schema %q: this build writes only %q", d.Schema, SchemaV1)
	}
	doc := *d
	if doc.Results == nil {
		doc.Results = []Result{}
	}
	b, err := json.MarshalIndent(&doc, "", "  ")
	if err != nil {
		return fmt.Errorf("write document: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write document: %w", err)
	}
	return nil
}

// WriteFile writes d to the named file (see [Document.Write]).
func (d *Document) WriteFile(name string) error {
	var buf bytes.Buffer
	if err := d.Write(&buf); err != nil {
		return err
	}
	if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write document: %w", err)
	}
	return nil
}

// Read parses a document, checking its schema first: a document without a
// schema (perftest's --out_json output, for one) or with another schema is
// an error naming what was found. Unknown fields are ignored, so v1
// readers accept v1 documents from newer writers that add fields.
func Read(r io.Reader) (*Document, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read document: %w", err)
	}
	var head struct {
		Schema *string `json:"schema"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("read document: not JSON: %w", err)
	}
	switch {
	case head.Schema == nil:
		return nil, fmt.Errorf("read document: no \"schema\" field: not an rperf document (want schema %q)", SchemaV1)
	case *head.Schema != SchemaV1:
		return nil, fmt.Errorf("read document: unknown schema %q: this build reads %q", *head.Schema, SchemaV1)
	}
	var d Document
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("read document: %w", err)
	}
	if d.Results == nil {
		d.Results = []Result{}
	}
	return &d, nil
}

// ReadFile reads the named file with [Read].
func ReadFile(name string) (*Document, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read document: %w", err)
	}
	defer f.Close()
	return Read(f)
}
