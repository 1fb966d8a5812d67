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

// TestCMListening reads hand-made "rdma res show cm_id" output: only a
// LISTEN identifier whose source port is the port counts.
func TestCMListening(t *testing.T) {
	tests := []struct {
		name, out string
		port      int
		want      bool
	}{
		{"wildcard listener", "link rxe0/1 cm-idn 0 state LISTEN ps TCP pid 251 comm ib_send_bw src-addr 0.0.0.0:18515 dst-addr 0.0.0.0:0\n", 18515, true},
		{"ipv6 listener", "link rxe0/1 cm-idn 3 state LISTEN ps TCP pid 7 comm rping src-addr [::]:7174 dst-addr [::]:0\n", 7174, true},
		{"connected, not listening", "link rxe0/1 cm-idn 1 state CONNECT ps TCP pid 251 comm ib_send_bw src-addr 10.77.0.1:18515 dst-addr 10.77.0.9:40000\n", 18515, false},
		{"listener on another port", "link rxe0/1 cm-idn 0 state LISTEN ps TCP pid 251 comm rping src-addr 0.0.0.0:7174 dst-addr 0.0.0.0:0\n", 18515, false},
		{"port as a prefix of another", "link rxe0/1 cm-idn 0 state LISTEN ps TCP pid 251 comm x src-addr 0.0.0.0:185150 dst-addr 0.0.0.0:0\n", 18515, false},
		{"remote port matches", "link rxe0/1 cm-idn 0 state LISTEN ps TCP pid 1 comm x src-addr 0.0.0.0:1 dst-addr 0.0.0.0:18515\n", 18515, false},
		{"nothing", "", 18515, false},
	}
	for _, tt := range tests {
		if got := CMListening(tt.out, tt.port); got != tt.want {
			t.Errorf("%s: CMListening(%d) = %v, want %v", tt.name, tt.port, got, tt.want)
		}
	}
}
