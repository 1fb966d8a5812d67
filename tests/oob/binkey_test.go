package oob

import (
	"bytes"
	"context"
	"encoding/hex"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBinaryKey(t *testing.T) {
	d := Dest{LID: 0x12, OutReads: 16, QPN: 0x1234, PSN: 0xabcdef, RKey: 0xdeadbeef, VAddr: 0x7f0011223344,
		GID: [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 77, 14: 0, 15: 2}, HasGID: true, SRQN: 7}
	tests := []struct {
		name string
		size int
		want string // hex of the message
	}{
		{"4.5 (6.06)", BinaryKeySize, "00000012" + "00000010" + "00001234" + "00abcdef" + "deadbeef" + "00000000" +
			"00007f0011223344" + "00000000000000000000ffff0a4d0002" + "00000007" + "00000000"},
		{"6.29", BinaryKeySizeTail, "00000012" + "00000010" + "00001234" + "00abcdef" + "deadbeef" + "00000000" +
			"00007f0011223344" + "0000000000000000" + "00000000000000000000ffff0a4d0002" + "00000007" + "00000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := AppendBinaryKey(nil, d, tt.size)
			if got := hex.EncodeToString(b); got != tt.want {
				t.Fatalf("AppendBinaryKey = %s\nwant            %s", got, tt.want)
			}
			back, err := ParseBinaryKey(b)
			if err != nil {
				t.Fatal(err)
			}
			if back != d {
				t.Fatalf("ParseBinaryKey = %+v, want %+v", back, d)
			}
		})
	}
}

// TestBinaryKeyCaptured parses the sync message ib_send_bw -R (perftest
// 4.5) sent before connecting its data QP (rxe-cm1.pcap frame 28): 56
// zero bytes, the still empty my_dest[0].
func TestBinaryKeyCaptured(t *testing.T) {
	d, err := ParseBinaryKey(make([]byte, 56))
	if err != nil {
		t.Fatal(err)
	}
	if d != (Dest{HasGID: true}) {
		t.Fatalf("got %+v, want an empty Dest", d)
	}
	if got := AppendBinaryKey(nil, Dest{HasGID: true}, BinaryKeySize); !bytes.Equal(got, make([]byte, 56)) {
		t.Fatalf("an empty Dest encodes as %x", got)
	}
}

func TestParseBinaryKeyErrors(t *testing.T) {
	big := make([]byte, BinaryKeySize)
	big[3], big[0] = 1, 1 // LID 0x01000001
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"short", make([]byte, 55), "not 55"},
		{"between", make([]byte, 60), "not 60"},
		{"LID too wide", big, "does not fit 16 bits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseBinaryKey(tt.b)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// recorder is a net.Conn end that records the size of every Write, as the
// rdma_cm channel turns each into one SEND.
type recorder struct {
	net.Conn
	sizes []int
}

func (r *recorder) Write(b []byte) (int, error) {
	r.sizes = append(r.sizes, len(b))
	return r.Conn.Write(b)
}

// TestRDMACMConn runs perftest 4.5's -R sequence over a pipe: the
// handshake, the sync exchanges around the rdma_cm connection of the test
// QPs, the key exchange, and a Finish that writes no "done". Every message
// must be one Write of perftest's size.
func TestRDMACMConn(t *testing.T) {
	a, b := net.Pipe()
	ra, rb := &recorder{Conn: a}, &recorder{Conn: b}
	opts := Options{RDMACM: true, Version: "6.06", IOTimeout: 5 * time.Second}
	cli, err := NewConn(ra, false, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewConn(rb, true, opts)
	if err != nil {
		t.Fatal(err)
	}
	if cli.NetConn() != ra {
		t.Fatal("NetConn does not return the transport")
	}
	ctx := context.Background()
	keys := [2]Dest{{QPN: 0x16, PSN: 0x956d52, RKey: 1, VAddr: 2, HasGID: true}, {QPN: 0x12, PSN: 3, RKey: 4, VAddr: 5, HasGID: true}}
	var got [2]Dest
	run := func(i int, c *Conn) error {
		if _, err := c.Handshake(ctx, Hello{MTU: MTU1024}); err != nil {
			return err
		}
		for range 2 {
			if err := c.Sync(ctx, "sync", 0); err != nil {
				return err
			}
		}
		var err error
		if got[i], err = c.ExchangeKeys(ctx, keys[i]); err != nil {
			return err
		}
		if err := c.Barrier(ctx, 0); err != nil {
			return err
		}
		return c.Finish(ctx)
	}
	errc := make(chan error, 1)
	go func() { errc <- run(1, srv) }()
	if err := run(0, cli); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got[0] != keys[1] || got[1] != keys[0] {
		t.Fatalf("keys crossed as %+v, want %+v", got, keys)
	}
	// version, page size, cache line, MTU, 2 syncs, keys, barrier, close.
	want := []int{16, 4, 4, 2, 56, 56, 56, 56, 56}
	if !slices.Equal(ra.sizes, want) || !slices.Equal(rb.sizes, want) {
		t.Fatalf("message sizes %v and %v, want %v each", ra.sizes, rb.sizes, want)
	}
}
