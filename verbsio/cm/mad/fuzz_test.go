package mad_test

import (
	"bytes"
	"testing"

	"github.com/rperf/rperf/verbsio/cm/mad"
)

// FuzzDecode feeds arbitrary bytes to Decode. It must never panic; what it
// accepts must re-encode to the input with the reserved bits cleared, and
// decode again to the same message.
func FuzzDecode(f *testing.F) {
	for _, p := range captured(f, "rxe-cm1.pcap") {
		f.Add(p.Payload)
	}
	for _, msg := range sample() {
		b, err := mad.Append(nil, &mad.MAD{Header: mad.CMHeader(msg.Attr(), 1), Msg: msg})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := mad.Decode(b)
		if err != nil {
			return
		}
		out, err := mad.Append(nil, &m)
		if err != nil {
			t.Fatalf("decoded %s does not encode: %v", m.AttrID, err)
		}
		want := append([]byte(nil), b...)
		for i, r := range mad.Reserved(m.AttrID) {
			want[mad.HeaderSize+i] &^= r
		}
		if !bytes.Equal(out, want) {
			t.Fatalf("%s re-encodes to\n%x\nwant\n%x", m.AttrID, out, want)
		}
		again, err := mad.Decode(out)
		if err != nil || again.String() != m.String() {
			t.Fatalf("second decode: %v %v", again.String(), err)
		}
	})
}
