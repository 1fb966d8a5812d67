package diag

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Text as a little-endian x86 kernel prints it: rdma_rxe's socket on
// 0.0.0.0:4791, a DNS stub on 127.0.0.53:53, and in udp6 a wildcard
// 4791 and fe80::5054:ff:fe77:1 port 8080.
const (
	procNetUDP = `   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops            
  253: 00000000:12B7 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 31245 2 0000000000000000 0         
 1200: 3500007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000   101        0 1234 2 0000000000000000 0
`
	procNetUDP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  100: 00000000000000000000000000000000:12B7 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4444 2 0000000000000000 0
  101: 000080FE00000000FF005450010077FE:1F90 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000  1000        0 5555 2 0000000000000000 0
`
)

func TestParseProcNetUDP(t *testing.T) {
	ap := netip.MustParseAddrPort
	tests := []struct {
		name  string
		text  string
		order binary.ByteOrder
		want  []UDPSocket
	}{
		{"udp, little-endian host", procNetUDP, binary.LittleEndian, []UDPSocket{
			{Local: ap("0.0.0.0:4791"), UID: 0, Inode: 31245},
			{Local: ap("127.0.0.53:53"), UID: 101, Inode: 1234},
		}},
		{"udp6, little-endian host", procNetUDP6, binary.LittleEndian, []UDPSocket{
			{Local: ap("[::]:4791"), UID: 0, Inode: 4444},
			{Local: ap("[fe80::5054:ff:fe77:1]:8080"), UID: 1000, Inode: 5555},
		}},
		{"big-endian host prints network order", " 1: 7F000035:0035 00000000:0000 07 0:0 0:0 0 5 0 77 2 0 0\n", binary.BigEndian, []UDPSocket{
			{Local: ap("127.0.0.53:53"), UID: 5, Inode: 77},
		}},
		{"header only", "  sl  local_address rem_address\n", binary.LittleEndian, nil},
		{"empty", "", binary.LittleEndian, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProcNetUDP(tt.text, tt.order)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
				t.Errorf("ParseProcNetUDP (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseProcNetUDPErrors(t *testing.T) {
	for _, text := range []string{
		"  1: 00000000:12B7 00000000:0000 07\n",                           // too few fields
		"  1: 00000000 00000000:0000 07 0:0 0:0 0 0 0 1 2 0 0\n",          // no port
		"  1: 0000000G:12B7 00000000:0000 07 0:0 0:0 0 0 0 1 2 0 0\n",     // bad hex
		"  1: 000000:12B7 00000000:0000 07 0:0 0:0 0 0 0 1 2 0 0\n",       // bad length
		"  1: 00000000:XYZ 00000000:0000 07 0:0 0:0 0 0 0 1 2 0 0\n",      // bad port
		"  1: 00000000:12B7 00000000:0000 07 0:0 0:0 0 uid 0 1 2 0 0\n",   // bad uid
		"  1: 00000000:12B7 00000000:0000 07 0:0 0:0 0 0 0 inode 2 0 0\n", // bad inode
	} {
		if _, err := ParseProcNetUDP(text, binary.LittleEndian); err == nil {
			t.Errorf("ParseProcNetUDP(%q) succeeded, want an error", strings.TrimSpace(text))
		}
	}
}

func TestUDPPort(t *testing.T) {
	rxe, err := ParseProcNetUDP(procNetUDP, binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		sockets  []UDPSocket
		port     uint16
		readErr  error
		want     Severity
		wantWhat string
	}{
		{"free", nil, RoCEv2Port, nil, Pass, "UDP port 4791 is free"},
		{"other ports only", rxe[1:], RoCEv2Port, nil, Pass, "free"},
		{"taken by rxe", rxe, RoCEv2Port, nil, Fail, "UDP port 4791 is bound: 0.0.0.0:4791 (uid 0, inode 31245); rdma_rxe binds it"},
		{"another port taken", rxe, 53, nil, Fail, "UDP port 53 is bound: 127.0.0.53:53"},
		{"unreadable", nil, RoCEv2Port, errors.New("permission denied"), Warn, "cannot tell"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := UDPPort(tt.sockets, tt.port, tt.readErr)
			checkFinding(t, f, CheckUDPPort, tt.want)
			if !strings.Contains(f.What, tt.wantWhat) {
				t.Errorf("What = %q, want it to contain %q", f.What, tt.wantWhat)
			}
		})
	}
}
