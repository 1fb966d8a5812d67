package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// record is a packet as the tests compare it.
type record struct {
	TS        time.Time
	LinkType  LinkType
	Data      []byte
	OrigLen   int
	Interface int
}

func readAll(tb testing.TB, b []byte) ([]record, Format, error) {
	tb.Helper()
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, 0, err
	}
	var out []record
	for {
		p, err := r.Next()
		if err == io.EOF {
			return out, r.Format(), nil
		}
		if err != nil {
			return out, r.Format(), err
		}
		out = append(out, record{p.Timestamp, p.LinkType, append([]byte(nil), p.Data...), p.OrigLen, p.Interface})
	}
}

func readFile(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestReadCaptures(t *testing.T) {
	ref, format, err := readAll(t, readFile(t, "rxe-rc.pcap"))
	if err != nil || format != FormatPcap {
		t.Fatalf("rxe-rc.pcap: %v, format %v", err, format)
	}
	if len(ref) != 74 {
		t.Fatalf("rxe-rc.pcap: %d packets, want 74", len(ref))
	}
	// Values read by hand from the file's first and last record headers.
	first, last := ref[0], ref[73]
	if want := time.Unix(1795351417, 468263000).UTC(); !first.TS.Equal(want) || first.TS.Location() != time.UTC {
		t.Errorf("first timestamp %v, want %v", first.TS, want)
	}
	if want := time.Unix(1795351426, 217117000).UTC(); !last.TS.Equal(want) {
		t.Errorf("last timestamp %v, want %v", last.TS, want)
	}
	if len(first.Data) != 1082 || first.OrigLen != 1082 || first.LinkType != LinkTypeEthernet || len(last.Data) != 70 {
		t.Errorf("first %d/%d bytes %v, last %d bytes", len(first.Data), first.OrigLen, first.LinkType, len(last.Data))
	}
	if !bytes.Equal(first.Data[:6], []byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x01}) {
		t.Errorf("first frame starts % x", first.Data[:6])
	}
	// The same packets converted by editcap (Wireshark 4.0) to nanosecond
	// pcap and to pcapng.
	for _, tt := range []struct {
		name   string
		format Format
	}{{"rxe-rc-nsec.pcap", FormatPcap}, {"rxe-rc.pcapng", FormatPcapNG}} {
		got, format, err := readAll(t, readFile(t, tt.name))
		if err != nil || format != tt.format {
			t.Fatalf("%s: %v, format %v", tt.name, err, format)
		}
		if diff := cmp.Diff(ref, got); diff != "" {
			t.Errorf("%s differs from rxe-rc.pcap (-pcap +%s):\n%s", tt.name, tt.name, diff)
		}
	}
	oob, _, err := readAll(t, readFile(t, "perftest-oob.pcap"))
	if err != nil || len(oob) != 140 {
		t.Fatalf("perftest-oob.pcap: %d packets, %v", len(oob), err)
	}
	oobng, _, err := readAll(t, readFile(t, "perftest-oob.pcapng"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(oob, oobng); diff != "" {
		t.Errorf("perftest-oob.pcapng differs (-pcap +pcapng):\n%s", diff)
	}
}

// swapClassic converts a little-endian classic pcap file to big-endian.
func swapClassic(tb testing.TB, le []byte) []byte {
	tb.Helper()
	be := append([]byte(nil), le...)
	sw32 := func(b []byte) { binary.BigEndian.PutUint32(b, binary.LittleEndian.Uint32(b)) }
	sw16 := func(b []byte) { binary.BigEndian.PutUint16(b, binary.LittleEndian.Uint16(b)) }
	sw32(be[0:])
	sw16(be[4:])
	sw16(be[6:])
	for _, o := range []int{8, 12, 16, 20} {
		sw32(be[o:])
	}
	for off := 24; off < len(be); {
		caplen := int(binary.LittleEndian.Uint32(le[off+8:]))
		for o := 0; o < 16; o += 4 {
			sw32(be[off+o:])
		}
		off += 16 + caplen
	}
	return be
}

func TestReadBigEndianClassic(t *testing.T) {
	le := readFile(t, "rxe-rc.pcap")
	want, _, err := readAll(t, le)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := readAll(t, swapClassic(t, le))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("big-endian file (-little +big):\n%s", diff)
	}
	nano := swapClassic(t, readFile(t, "rxe-rc-nsec.pcap"))
	if got, _, err := readAll(t, nano); err != nil || !cmp.Equal(want, got) {
		t.Errorf("big-endian nanosecond file: %v, equal %v", err, cmp.Equal(want, got))
	}
}

// ng builds pcapng files for tests.
type ng struct {
	order binary.ByteOrder
	buf   bytes.Buffer
}

func (n *ng) u16(v uint16) []byte { b := make([]byte, 2); n.order.PutUint16(b, v); return b }
func (n *ng) u32(v uint32) []byte { b := make([]byte, 4); n.order.PutUint32(b, v); return b }

func (n *ng) opt(code uint16, val []byte) []byte {
	b := append(n.u16(code), n.u16(uint16(len(val)))...)
	b = append(b, val...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func (n *ng) block(typ uint32, body []byte) *ng {
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	total := uint32(12 + len(body))
	n.buf.Write(n.u32(typ))
	n.buf.Write(n.u32(total))
	n.buf.Write(body)
	n.buf.Write(n.u32(total))
	return n
}

func (n *ng) shb(opts ...[]byte) *ng {
	body := append(n.u32(byteOrderBOM), n.u16(1)...)
	body = append(body, n.u16(0)...)
	body = append(body, bytes.Repeat([]byte{0xff}, 8)...) // section length unknown
	for _, o := range opts {
		body = append(body, o...)
	}
	return n.block(blockSHB, body)
}

func (n *ng) idb(lt LinkType, snaplen uint32, opts ...[]byte) *ng {
	body := append(n.u16(uint16(lt)), n.u16(0)...)
	body = append(body, n.u32(snaplen)...)
	for _, o := range opts {
		body = append(body, o...)
	}
	if len(opts) > 0 {
		body = append(body, n.opt(0, nil)...)
	}
	return n.block(blockIDB, body)
}

func (n *ng) epb(id uint32, ts uint64, data []byte, orig uint32, opts ...[]byte) *ng {
	body := append(n.u32(id), n.u32(uint32(ts>>32))...)
	body = append(body, n.u32(uint32(ts))...)
	body = append(body, n.u32(uint32(len(data)))...)
	body = append(body, n.u32(orig)...)
	body = append(body, data...)
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	for _, o := range opts {
		body = append(body, o...)
	}
	return n.block(blockEPB, body)
}

func (n *ng) pb(id uint16, ts uint64, data []byte, orig uint32) *ng {
	body := append(n.u16(id), n.u16(0)...)
	body = append(body, n.u32(uint32(ts>>32))...)
	body = append(body, n.u32(uint32(ts))...)
	body = append(body, n.u32(uint32(len(data)))...)
	body = append(body, n.u32(orig)...)
	body = append(body, data...)
	return n.block(blockPB, body)
}

func (n *ng) spb(orig uint32, data []byte) *ng {
	return n.block(blockSPB, append(n.u32(orig), data...))
}

func (n *ng) bytes() []byte { return n.buf.Bytes() }

func le() *ng { return &ng{order: binary.LittleEndian} }
func be() *ng { return &ng{order: binary.BigEndian} }

func TestReadPcapNG(t *testing.T) {
	d1 := []byte("first packet")
	d2 := []byte{1, 2, 3, 4, 5}
	d3 := bytes.Repeat([]byte{0xab}, 100)
	for _, mk := range []struct {
		name string
		new  func() *ng
	}{{"little", le}, {"big", be}} {
		t.Run(mk.name, func(t *testing.T) {
			n := mk.new()
			n.shb(n.opt(4, []byte("rperf test")), n.opt(0, nil)).
				idb(LinkTypeEthernet, 0).                                                   // if 0: microseconds
				idb(LinkTypeLinuxSLL2, 64, n.opt(9, []byte{9}), n.opt(14, n.u32x2(1000))).  // if 1: ns, +1000 s, snaplen 64
				idb(LinkTypeRaw, 0, n.opt(2, []byte("eth9")), n.opt(9, []byte{0x80 | 10})). // if 2: 2^-10 s
				block(4, []byte{0, 0, 0, 0}).                                               // name resolution: skipped
				epb(0, 1_700_000_000_123_456, d1, 100, n.opt(1, []byte("comment")), n.opt(0, nil)).
				block(0x00000bad, bytes.Repeat([]byte{7}, 40)). // custom: skipped
				epb(1, 1_700_000_000_000_000_001, d2, 5).
				epb(2, 5<<10|512, d2, 0).
				block(5, make([]byte, 24)). // interface statistics: skipped
				spb(100, d3).               // interface 0 has no snaplen: 100 bytes
				pb(1, 1_700_000_000_000_000_002, d1, 12)
			// A second section in the other byte order, with its own
			// interfaces.
			var m *ng
			if mk.name == "little" {
				m = be()
			} else {
				m = le()
			}
			m.shb().idb(LinkTypeLinuxSLL2, 16).
				spb(100, d3). // truncated to the snaplen, 16
				epb(0, 42_000_001, d2, 9)
			file := append(append([]byte(nil), n.bytes()...), m.bytes()...)
			got, format, err := readAll(t, file)
			if err != nil || format != FormatPcapNG {
				t.Fatalf("read: %v, format %v", err, format)
			}
			want := []record{
				{time.Unix(1_700_000_000, 123_456_000).UTC(), LinkTypeEthernet, d1, 100, 0},
				{time.Unix(1_700_001_000, 1).UTC(), LinkTypeLinuxSLL2, d2, 5, 1},
				{time.Unix(5, 500_000_000).UTC(), LinkTypeRaw, d2, 5, 2},
				{time.Time{}, LinkTypeEthernet, d3, 100, 0},
				{time.Unix(1_700_001_000, 2).UTC(), LinkTypeLinuxSLL2, d1, 12, 1},
				{time.Time{}, LinkTypeLinuxSLL2, d3[:16], 100, 0},
				{time.Unix(42, 1000).UTC(), LinkTypeLinuxSLL2, d2, 9, 0},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("packets (-want +got):\n%s", diff)
			}
		})
	}
}

// u32x2 encodes a 64-bit option value in the builder's byte order.
func (n *ng) u32x2(v uint64) []byte {
	b := make([]byte, 8)
	n.order.PutUint64(b, v)
	return b
}

func TestTimestampResolutions(t *testing.T) {
	tests := []struct {
		resol byte
		ts    uint64
		want  time.Time
	}{
		{0, 12, time.Unix(12, 0)},
		{3, 12_345, time.Unix(12, 345_000_000)},
		{6, 12_000_345, time.Unix(12, 345_000)},
		{9, 12_000_000_345, time.Unix(12, 345)},
		{12, 12_000_000_000_345, time.Unix(12, 0)},
		{12, 12_000_000_345_000, time.Unix(12, 345)},
		{19, 12 * 1e18, time.Unix(1, 200_000_000)},
		{0x80, 12, time.Unix(12, 0)},
		{0x80 | 1, 25, time.Unix(12, 500_000_000)},
		{0x80 | 30, 3<<30 | 1<<29, time.Unix(3, 500_000_000)},
		{0x80 | 63, 1<<63 | 1<<62, time.Unix(1, 500_000_000)},
	}
	for _, tt := range tests {
		n := le()
		n.shb().idb(LinkTypeEthernet, 0, n.opt(9, []byte{tt.resol})).epb(0, tt.ts, []byte{1}, 1)
		got, _, err := readAll(t, n.bytes())
		if err != nil || len(got) != 1 {
			t.Fatalf("resolution %#x: %v", tt.resol, err)
		}
		if !got[0].TS.Equal(tt.want) {
			t.Errorf("resolution %#x, ts %d: %v, want %v", tt.resol, tt.ts, got[0].TS, tt.want.UTC())
		}
	}
}

func TestReadErrors(t *testing.T) {
	classic := readFile(t, "rxe-rc.pcap")
	mod := func(b []byte, f func([]byte) []byte) []byte { return f(append([]byte(nil), b...)) }
	n := le()
	goodNG := n.shb().idb(LinkTypeEthernet, 0).epb(0, 1, []byte{1, 2, 3}, 3).bytes()
	tests := []struct {
		name     string
		in       []byte
		packets  int    // packets read before the error
		contains string // in the error message
	}{
		{"empty", nil, 0, "truncated file while reading magic number"},
		{"bad magic", []byte("GIF89a......................"), 0, "unknown magic number"},
		{"short header", classic[:20], 0, "truncated file while reading file header"},
		{"version 3", mod(classic, func(b []byte) []byte { b[4] = 3; return b }), 0, "unsupported version 3.4"},
		{"truncated record header", classic[:24+16+1082+8], 1, "record 2: truncated file while reading record header"},
		{"truncated packet", classic[:24+16+1000], 0, "record 1: truncated file while reading packet data"},
		{"huge caplen", mod(classic, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[32:], 1<<30); return b }), 0, "captured length 1073741824 exceeds the 262144-byte limit"},
		{"ng bad bom", mod(goodNG, func(b []byte) []byte { b[8] = 0; return b }), 0, "byte-order magic"},
		{"ng short shb", mod(goodNG, func(b []byte) []byte { b[4] = 24; return b }), 0, "section header length 24 is invalid"},
		{"ng huge shb", mod(goodNG, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[4:], 1<<30); return b }), 0, "section header length"},
		{"ng version 2", mod(goodNG, func(b []byte) []byte { b[12] = 2; return b }), 0, "unsupported pcapng version 2.0"},
		{"ng shb trailer", mod(goodNG, func(b []byte) []byte { b[24] = 99; return b }), 0, "trailing length"},
		{"ng truncated shb", goodNG[:20], 0, "truncated file"},
		{"ng block length 8", append(le().shb().bytes(), 6, 0, 0, 0, 8, 0, 0, 0), 0, "invalid length 8"},
		{"ng block length odd", append(le().shb().bytes(), 6, 0, 0, 0, 13, 0, 0, 0), 0, "invalid length 13"},
		{"ng truncated block", goodNG[:len(goodNG)-2], 0, "truncated file while reading block type 0x6"},
		{"ng truncated skip", append(le().shb().bytes(), 4, 0, 0, 0, 64, 0, 0, 0, 1), 0, "skipping block type 0x4"},
		{"ng block trailer", mod(goodNG, func(b []byte) []byte { b[len(b)-4] = 1; return b }), 0, "trailing length"},
		{"ng huge epb", append(le().shb().idb(1, 0).bytes(), 6, 0, 0, 0, 0, 0, 0, 16), 0, "exceeds the 1048576-byte limit"},
		{"ng no interface", le().shb().epb(0, 1, []byte{1}, 1).bytes(), 0, "packet refers to interface 0 but the section describes 0"},
		{"ng interface 5", le().shb().idb(1, 0).epb(5, 1, []byte{1}, 1).bytes(), 0, "interface 5"},
		{"ng pb interface", le().shb().pb(3, 1, []byte{1}, 1).bytes(), 0, "interface 3"},
		{"ng spb no interface", le().shb().spb(1, []byte{1}).bytes(), 0, "interface 0"},
		{"ng epb caplen overrun", mod(goodNG, func(b []byte) []byte { b[len(b)-16] = 200; return b }), 0, "captured length 200 overruns its block"},
		{"ng short epb", le().shb().idb(1, 0).block(blockEPB, make([]byte, 16)).bytes(), 0, "enhanced packet block shorter"},
		{"ng short pb", le().shb().idb(1, 0).block(blockPB, make([]byte, 16)).bytes(), 0, "packet block shorter"},
		{"ng short idb", le().shb().block(blockIDB, make([]byte, 4)).bytes(), 0, "interface description block shorter"},
		{"ng idb option overrun", func() []byte {
			n := le()
			return n.shb().block(blockIDB, append(make([]byte, 8), n.opt(9, []byte{6})[:4]...)).bytes()
		}(), 0, "interface option 9 overruns"},
		{"ng bad tsresol len", func() []byte { n := le(); return n.shb().idb(1, 0, n.opt(9, []byte{6, 6})).bytes() }(), 0, "if_tsresol option has length 2"},
		{"ng bad tsresol", func() []byte { n := le(); return n.shb().idb(1, 0, n.opt(9, []byte{20})).bytes() }(), 0, "unsupported timestamp resolution 0x14"},
		{"ng bad tsoffset", func() []byte { n := le(); return n.shb().idb(1, 0, n.opt(14, []byte{1})).bytes() }(), 0, "if_tsoffset option has length 1"},
	}
	for _, tt := range tests {
		got, _, err := readAll(t, tt.in)
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v is not ErrFormat", tt.name, err)
		}
		if !strings.Contains(err.Error(), tt.contains) || !strings.HasPrefix(err.Error(), "pcap: ") {
			t.Errorf("%s: error %q does not contain %q", tt.name, err, tt.contains)
		}
		if len(got) != tt.packets {
			t.Errorf("%s: %d packets before the error, want %d", tt.name, len(got), tt.packets)
		}
	}
	// Errors are sticky.
	r, err := NewReader(bytes.NewReader(classic[:24+16+10]))
	if err != nil {
		t.Fatal(err)
	}
	_, err1 := r.Next()
	_, err2 := r.Next()
	if err1 == nil || err1 != err2 || !errors.Is(err1, io.ErrUnexpectedEOF) {
		t.Errorf("errors %v then %v", err1, err2)
	}
}

func TestReaderLinkType(t *testing.T) {
	r, err := NewReader(bytes.NewReader(readFile(t, "rxe-rc.pcap")))
	if err != nil || r.LinkType() != LinkTypeEthernet {
		t.Errorf("classic: %v %v", r.LinkType(), err)
	}
	n := le()
	r, err = NewReader(bytes.NewReader(n.shb().idb(LinkTypeLinuxSLL, 0).epb(0, 0, []byte{1}, 1).bytes()))
	if err != nil || r.LinkType() != 0 {
		t.Fatalf("pcapng before any IDB: %v %v", r.LinkType(), err)
	}
	if _, err := r.Next(); err != nil || r.LinkType() != LinkTypeLinuxSLL {
		t.Errorf("pcapng: %v %v", r.LinkType(), err)
	}
	if FormatPcap.String() != "pcap" || FormatPcapNG.String() != "pcapng" || Format(9).String() != "format(9)" {
		t.Error("Format.String")
	}
}

// FuzzReader reads arbitrary files. It must never panic or allocate beyond
// its limits, and every packet must respect MaxCaptureLen.
func FuzzReader(f *testing.F) {
	for _, name := range []string{"rxe-rc.pcap", "rxe-rc-nsec.pcap", "rxe-rc.pcapng", "perftest-oob.pcapng"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:min(len(b), 4096)])
	}
	f.Add(swapClassic(f, readFile(f, "rxe-rc.pcap"))[:2000])
	n := be()
	f.Add(n.shb().idb(LinkTypeRaw, 0, n.opt(9, []byte{0x85})).epb(0, 99, []byte{0x45, 0, 0}, 3).spb(3, []byte{1, 2, 3}).pb(0, 1, []byte{1}, 1).bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("NewReader error %v is not ErrFormat", err)
			}
			return
		}
		for i := 0; i < 1000; i++ {
			p, err := r.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				if !errors.Is(err, ErrFormat) {
					t.Fatalf("Next error %v is not ErrFormat", err)
				}
				return
			}
			if len(p.Data) > MaxCaptureLen || p.OrigLen < len(p.Data) {
				t.Fatalf("packet of %d bytes, orig %d", len(p.Data), p.OrigLen)
			}
		}
	})
}
