package pcap

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestWriterReproducesCapture reads rxe-rc.pcap and writes it again in the
// microsecond format: the output must be the same file, byte for byte.
func TestWriterReproducesCapture(t *testing.T) {
	for _, name := range []string{"rxe-rc.pcap", "perftest-oob.pcap"} {
		orig := readFile(t, name)
		recs, _, err := readAll(t, orig)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		w, err := NewWriter(&out, LinkTypeEthernet, WriterOptions{Microseconds: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := w.WritePacket(r.TS, r.Data, r.OrigLen); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(orig, out.Bytes()) {
			t.Errorf("%s: rewritten file differs (%d bytes, want %d)", name, out.Len(), len(orig))
		}
	}
}

func TestWriterNanoRoundTrip(t *testing.T) {
	var out bytes.Buffer
	w, err := NewWriter(&out, LinkTypeLinuxSLL2, WriterOptions{Snaplen: 8})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 11, 22, 12, 0, 0, 123456789, time.UTC)
	long := []byte("0123456789abcdef")
	if err := w.WritePacket(ts, long, 0); err != nil {
		t.Fatal(err)
	}
	if err := w.WritePacket(ts.Add(time.Nanosecond), []byte{1, 2}, 1500); err != nil {
		t.Fatal(err)
	}
	got, format, err := readAll(t, out.Bytes())
	if err != nil || format != FormatPcap {
		t.Fatalf("read back: %v %v", err, format)
	}
	want := []record{
		{ts, LinkTypeLinuxSLL2, long[:8], 16, 0},
		{ts.Add(time.Nanosecond), LinkTypeLinuxSLL2, []byte{1, 2}, 1500, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
	if err := w.WritePacket(time.Unix(-1, 0), nil, 0); err == nil {
		t.Error("negative timestamp accepted")
	}
	if n := testing.AllocsPerRun(100, func() { _ = w.WritePacket(ts, long, 16) }); n != 0 {
		t.Errorf("WritePacket: %v allocations, want 0", n)
	}
}

type failWriter struct{ after int }

func (f *failWriter) Write(b []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("disk full")
	}
	f.after--
	return len(b), nil
}

func TestWriterErrors(t *testing.T) {
	if _, err := NewWriter(&failWriter{}, LinkTypeEthernet, WriterOptions{}); err == nil {
		t.Error("header write error ignored")
	}
	for after := 1; after <= 2; after++ {
		w, err := NewWriter(&failWriter{after: after}, LinkTypeEthernet, WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WritePacket(time.Unix(1, 0), []byte{1}, 1); err == nil {
			t.Errorf("write error after %d writes ignored", after)
		}
	}
}

func TestNetwork(t *testing.T) {
	ip4 := []byte{0x45, 0, 0, 20}
	ip6 := []byte{0x60, 0, 0, 0}
	eth := func(types ...byte) []byte {
		b := make([]byte, 12)
		return append(b, types...)
	}
	sll := func(proto uint16) []byte {
		b := make([]byte, 14)
		return append(b, byte(proto>>8), byte(proto))
	}
	sll2 := func(proto uint16) []byte {
		b := []byte{byte(proto >> 8), byte(proto)}
		return append(b, make([]byte, 18)...)
	}
	cat := func(a ...[]byte) []byte { return bytes.Join(a, nil) }
	tests := []struct {
		name    string
		lt      LinkType
		frame   []byte
		typ     uint16
		payload []byte
		err     error
	}{
		{"ethernet", LinkTypeEthernet, cat(eth(0x08, 0x00), ip4), EtherTypeIPv4, ip4, nil},
		{"ethernet vlan", LinkTypeEthernet, cat(eth(0x81, 0x00, 0x20, 0x05, 0x86, 0xdd), ip6), EtherTypeIPv6, ip6, nil},
		{"ethernet qinq", LinkTypeEthernet, cat(eth(0x88, 0xa8, 0, 1, 0x81, 0x00, 0, 2, 0x08, 0x00), ip4), EtherTypeIPv4, ip4, nil},
		{"ethernet arp", LinkTypeEthernet, cat(eth(0x08, 0x06), []byte{1}), 0x0806, []byte{1}, nil},
		{"ethernet short", LinkTypeEthernet, make([]byte, 13), 0, nil, ErrShortFrame},
		{"ethernet short vlan", LinkTypeEthernet, eth(0x81, 0x00, 0x20), 0, nil, ErrShortFrame},
		{"raw v4", LinkTypeRaw, ip4, EtherTypeIPv4, ip4, nil},
		{"raw v6", LinkTypeRaw, ip6, EtherTypeIPv6, ip6, nil},
		{"ipv4", LinkTypeIPv4, ip4, EtherTypeIPv4, ip4, nil},
		{"ipv6", LinkTypeIPv6, ip6, EtherTypeIPv6, ip6, nil},
		{"raw empty", LinkTypeRaw, nil, 0, nil, ErrShortFrame},
		{"raw not ip", LinkTypeRaw, []byte{0x15}, 0, nil, ErrNotIP},
		{"sll", LinkTypeLinuxSLL, cat(sll(0x0800), ip4), EtherTypeIPv4, ip4, nil},
		{"sll vlan", LinkTypeLinuxSLL, cat(sll(0x8100), []byte{0, 7, 0x86, 0xdd}, ip6), EtherTypeIPv6, ip6, nil},
		{"sll short", LinkTypeLinuxSLL, make([]byte, 15), 0, nil, ErrShortFrame},
		{"sll2", LinkTypeLinuxSLL2, cat(sll2(0x86dd), ip6), EtherTypeIPv6, ip6, nil},
		{"sll2 short", LinkTypeLinuxSLL2, make([]byte, 19), 0, nil, ErrShortFrame},
		{"unknown", LinkType(147), ip4, 0, nil, ErrLinkType},
	}
	for _, tt := range tests {
		typ, payload, err := Network(tt.lt, tt.frame)
		if !errors.Is(err, tt.err) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.err)
			continue
		}
		if typ != tt.typ || !bytes.Equal(payload, tt.payload) {
			t.Errorf("%s: got %#04x % x, want %#04x % x", tt.name, typ, payload, tt.typ, tt.payload)
		}
	}
	for lt, want := range map[LinkType]string{LinkTypeEthernet: "ETHERNET", LinkTypeRaw: "RAW", LinkTypeLinuxSLL: "LINUX_SLL", LinkTypeLinuxSLL2: "LINUX_SLL2", LinkTypeIPv4: "IPV4", LinkTypeIPv6: "IPV6", 7: "LINKTYPE(7)"} {
		if got := lt.String(); got != want {
			t.Errorf("LinkType(%d).String() = %q, want %q", uint32(lt), got, want)
		}
	}
}
