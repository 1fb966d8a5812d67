package agentproto

import (
	"os"
	"path/filepath"
	"testing"
)

// TestListening reads hand-made /proc/net tables: only a LISTEN (0A)
// socket on the port counts, IPv4 or IPv6.
func TestListening(t *testing.T) {
	const head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	tests := []struct {
		name, tcp, tcp6 string
		want            bool
	}{
		{"ipv4 listen", head + "   0: 00000000:4853 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n", "", true},
		{"ipv6 listen", head, head + "   0: 00000000000000000000000000000000:4853 00000000000000000000000000000000:0000 0A 0 0 0 0 0 1\n", true},
		{"established only", head + "   1: 0900000A:4853 0100000A:D5E2 01 00000000:00000000 00:00000000 00000000     0        0 2 1\n", "", false},
		{"other port", head + "   0: 00000000:4854 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n", "", false},
		{"remote port matches, not local", head + "   1: 0900000A:D5E2 0100000A:4853 0A 0 0 0 0 0 1\n", "", false},
		{"no tables", "", "", false},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		if tt.tcp != "" {
			os.WriteFile(filepath.Join(dir, "tcp"), []byte(tt.tcp), 0o644)
		}
		if tt.tcp6 != "" {
			os.WriteFile(filepath.Join(dir, "tcp6"), []byte(tt.tcp6), 0o644)
		}
		if got := Listening(dir, 18515); got != tt.want {
			t.Errorf("%s: Listening = %v, want %v", tt.name, got, tt.want)
		}
	}
}
