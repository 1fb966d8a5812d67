package diag

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSeverityString(t *testing.T) {
	tests := []struct {
		s    Severity
		want string
	}{{Pass, "PASS"}, {Info, "INFO"}, {Warn, "WARN"}, {Fail, "FAIL"}, {Severity(9), "Severity(9)"}}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("%d.String() = %q, want %q", int(tt.s), got, tt.want)
		}
	}
	if !(Pass < Info && Info < Warn && Warn < Fail) {
		t.Error("severities are not ordered PASS < INFO < WARN < FAIL")
	}
}

func TestWorstAndExitCode(t *testing.T) {
	tests := []struct {
		name      string
		sevs      []Severity
		wantWorst Severity
		wantExit  int
	}{
		{"none", nil, Pass, 0},
		{"all pass", []Severity{Pass, Pass}, Pass, 0},
		{"info", []Severity{Pass, Info}, Info, 0},
		{"warnings do not fail", []Severity{Info, Warn, Pass}, Warn, 0},
		{"any fail fails", []Severity{Pass, Fail, Warn}, Fail, ExitFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fs []Finding
			for _, s := range tt.sevs {
				fs = append(fs, Finding{Check: CheckMemlock, Severity: s})
			}
			if got := Worst(fs); got != tt.wantWorst {
				t.Errorf("Worst() = %v, want %v", got, tt.wantWorst)
			}
			if got := ExitCode(fs); got != tt.wantExit {
				t.Errorf("ExitCode() = %d, want %d", got, tt.wantExit)
			}
		})
	}
	if ExitFail == 0 {
		t.Error("ExitFail must be non-zero")
	}
}

func TestForEngine(t *testing.T) {
	// One FAIL of each scope, under each engine.
	in := []Finding{
		{Check: CheckDevInfiniband, Severity: Fail}, // kernel
		{Check: CheckMemfd, Severity: Fail},         // built-in
		{Check: CheckNoFile, Severity: Fail},        // both
		{Check: CheckShm, Severity: Pass},           // never raised
	}
	tests := []struct {
		engine Engine
		want   []Severity
	}{
		{EngineKernel, []Severity{Fail, Info, Fail, Pass}},
		{EngineBuiltin, []Severity{Info, Fail, Fail, Pass}},
		{EngineAuto, []Severity{Warn, Warn, Fail, Pass}},
	}
	for _, tt := range tests {
		t.Run(tt.engine.String(), func(t *testing.T) {
			got := ForEngine(in, tt.engine)
			var sevs []Severity
			for _, f := range got {
				sevs = append(sevs, f.Severity)
			}
			if diff := cmp.Diff(tt.want, sevs); diff != "" {
				t.Errorf("ForEngine(%v) severities (-want +got):\n%s", tt.engine, diff)
			}
		})
	}
	if in[0].Severity != Fail {
		t.Error("ForEngine modified its input")
	}
	for _, name := range CheckNames {
		if _, ok := checkScope[name]; !ok {
			t.Errorf("check %q has no scope", name)
		}
	}
	if got := Engine(7).String(); got != "Engine(7)" {
		t.Errorf("Engine(7).String() = %q", got)
	}
}

func TestFmtBytes(t *testing.T) {
	tests := []struct {
		n    uint64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1 KiB"}, {64 << 10, "64 KiB"}, {8 << 20, "8 MiB"},
		{1536 << 10, "1.5 MiB"}, {3 << 30, "3 GiB"}, {Unlimited, "unlimited"},
	}
	for _, tt := range tests {
		if got := fmtBytes(tt.n); got != tt.want {
			t.Errorf("fmtBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestFindingString(t *testing.T) {
	f := Finding{Check: CheckMemlock, Severity: Fail, What: "too low", Fix: "raise it"}
	if got, want := f.String(), "FAIL memlock: too low (fix: raise it)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	f = Finding{Check: CheckMemfd, Severity: Pass, What: "memfd_create works"}
	if got, want := f.String(), "PASS memfd: memfd_create works"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// checkFinding asserts the check name and severity, that PASS has no fix
// and that anything else has one.
func checkFinding(t *testing.T, f Finding, check string, want Severity) {
	t.Helper()
	if f.Check != check {
		t.Errorf("Check = %q, want %q", f.Check, check)
	}
	if f.Severity != want {
		t.Errorf("Severity = %v, want %v (%s)", f.Severity, want, f)
	}
	if f.What == "" {
		t.Errorf("What is empty")
	}
	if f.Severity == Pass && f.Fix != "" {
		t.Errorf("PASS with a fix: %s", f)
	}
	if (f.Severity == Warn || f.Severity == Fail) && f.Fix == "" {
		t.Errorf("%v without a fix: %s", f.Severity, f)
	}
}
