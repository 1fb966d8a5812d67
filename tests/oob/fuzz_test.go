package oob

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"slices"
	"testing"
	"time"
)

// The peer's side of the exchanges is untrusted input: these targets feed
// arbitrary bytes where the peer's messages go and check what comes out.

// FuzzParams: a parameter document is accepted only when it is JSON whose
// fields each have a flag, no flag twice; what is accepted encodes back to
// the same parameters. Everything else is an ErrProtocol error.
func FuzzParams(f *testing.F) {
	f.Add([]byte(`{"rperf":1,"test":"write-lat","fields":[{"flag":"-s","value":"64","symmetric":true},{"flag":"-t","value":"1"}]}`))
	f.Add([]byte(`{"rperf":1,"test":"x","fields":[{"flag":"-s"},{"flag":"-s"}]}`))
	f.Add([]byte(`{"rperf":1,"test":"x","fields":[{"flag":""}]}`))
	f.Add([]byte(`{"test":1e999}`))
	f.Add([]byte(`[]`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parseParams("test-parameter exchange", b)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not match ErrProtocol", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, fl := range p.Fields {
			if fl.Flag == "" || seen[fl.Flag] {
				t.Fatalf("accepted %+v: empty or repeated flag %q", p, fl.Flag)
			}
			seen[fl.Flag] = true
		}
		again, err := json.Marshal(paramsDoc{Rperf: rperfExtensionLevel, Test: p.Test, Fields: p.Fields})
		if err != nil {
			t.Fatal(err)
		}
		q, err := parseParams("test-parameter exchange", again)
		if err != nil || p.Test != q.Test || !slices.Equal(p.Fields, q.Fields) {
			t.Fatalf("round trip of %+v: %+v, %v", p, q, err)
		}
	})
}

// pipeConn returns the client end of an in-memory connection, past the
// handshake with a peer of version peerVersion, whose other end reads
// whatever the client sends and answers with peer, then closes.
func pipeConn(t *testing.T, peerVersion float64, peer []byte) *Conn {
	a, b := net.Pipe()
	c := newConn(a, false, Options{IOTimeout: 2 * time.Second}.withDefaults())
	c.handshook, c.peerVersion = true, peerVersion
	go io.Copy(io.Discard, b)
	go func() {
		b.Write(peer)
		b.Close()
	}()
	t.Cleanup(func() { a.Close() })
	return c
}

// FuzzBWReport: the peer's bandwidth report is read value by value,
// big-endian, exactly as sent (an iteration count of 4 bytes from peers
// older than 5.33), a short one ends in an error, and Check accepts
// the figures only when each one used is a finite rate of 0 or more: NaN
// and Inf never pass.
func FuzzBWReport(f *testing.F) {
	le := func(vs ...float64) []byte {
		b := binary.BigEndian.AppendUint64(nil, 65536)
		b = binary.BigEndian.AppendUint64(b, 5000)
		for _, v := range vs {
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(v))
		}
		return b
	}
	f.Add(le(9000.5, 8000.25, 0.125), false, false)
	f.Add(le(math.NaN(), 1, 1), false, false)
	f.Add(le(1, math.Inf(1), 1), false, false)
	f.Add(le(1, 1, -1), false, false)
	f.Add(le(1, 2, 3, 4, 5, 6, 7), false, true)
	f.Add(le(1, 2, 3, 4, 5, 6, math.Inf(-1)), false, true)
	f.Add(le(1, 2)[:20], true, false)
	f.Fuzz(func(t *testing.T, peer []byte, old, perPort bool) {
		version, itersSize := 6.0, 8
		if old {
			version, itersSize = 5.0, 4
		}
		c := pipeConn(t, version, peer)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := c.ExchangeBWReport(ctx, BWReport{Size: 64, Iters: 1, PerPort: perPort})
		floats := 3
		if perPort {
			floats += 4
		}
		need := 8 + itersSize + 8*floats
		if len(peer) < need {
			// The peer closed: our read or our next write fails.
			if err == nil {
				t.Fatalf("%d of %d bytes: %+v, no error", len(peer), need, r)
			}
			return
		}
		if err != nil {
			t.Fatalf("%d bytes: %v", len(peer), err)
		}
		// The model: each value as sent.
		var want BWReport
		want.PerPort = perPort
		want.Size = binary.BigEndian.Uint64(peer)
		if old {
			want.Iters = uint64(binary.BigEndian.Uint32(peer[8:]))
		} else {
			want.Iters = binary.BigEndian.Uint64(peer[8:])
		}
		vals := make([]float64, floats)
		for i := range vals {
			vals[i] = math.Float64frombits(binary.BigEndian.Uint64(peer[8+itersSize+8*i:]))
		}
		want.BWPeak, want.BWAvg, want.MsgRate = vals[0], vals[1], vals[2]
		if perPort {
			want.BWAvgPort[0], want.MsgRatePort[0], want.BWAvgPort[1], want.MsgRatePort[1] = vals[3], vals[4], vals[5], vals[6]
		}
		if math.Float64bits(r.BWPeak) != math.Float64bits(want.BWPeak) || math.Float64bits(r.BWAvg) != math.Float64bits(want.BWAvg) ||
			math.Float64bits(r.MsgRate) != math.Float64bits(want.MsgRate) || r.Size != want.Size || r.Iters != want.Iters || r.PerPort != perPort {
			t.Fatalf("read %+v, sent %+v", r, want)
		}
		measured := true
		for _, v := range vals {
			measured = measured && !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0
		}
		if err := r.Check(); (err == nil) != measured || err != nil && !errors.Is(err, ErrProtocol) {
			t.Fatalf("Check(%+v) = %v; every figure a finite rate of 0 or more: %v", r, err, measured)
		}
	})
}
