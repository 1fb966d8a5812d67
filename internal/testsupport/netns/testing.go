package netns

import "testing"

// Skip skips t, saying why, when Available reports that namespaces cannot
// be created here (not root, or no "ip" command).
func Skip(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("needs network namespaces: %v", err)
	}
}

// Setup is NewPair for tests: it skips t when namespaces are unavailable,
// fails it when creation fails, and removes the pair when t ends.
func Setup(t testing.TB, opts Options) *Pair {
	t.Helper()
	Skip(t)
	p, err := NewPair(opts)
	if err != nil {
		t.Fatalf("netns setup: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("netns cleanup: %v", err)
		}
	})
	return p
}
