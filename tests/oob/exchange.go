package oob

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// ExchangeKeys sends local's key message and returns the peer's. perftest
// calls this ctx_hand_shake(); it serves for the per-QP address exchange
// and, with the same Dest again, as a synchronisation point. The message
// form (with or without GID) follows local.HasGID; the peer must use the
// same form, and a mismatch is reported as ErrIncompatible. The first Dest
// exchanged is remembered for Barrier and Finish, as perftest uses
// my_dest[0] for those.
func (c *Conn) ExchangeKeys(ctx context.Context, local Dest) (Dest, error) {
	remote, err := c.exchangeKey(ctx, "key exchange", local, c.opts.IOTimeout)
	if err == nil && !c.haveBarrier {
		c.barrier, c.haveBarrier = local, true
	}
	return remote, err
}

// Barrier is a key exchange of the first Dest given to ExchangeKeys, used
// where perftest synchronises the two sides: after moving QPs to RTR,
// between message sizes, and when a passive server waits for the client to
// finish its run. wait bounds how long to wait for the peer's message (0
// means Options.IOTimeout); a passive side should pass the expected run
// time plus a margin. It fails if no key exchange has happened yet.
func (c *Conn) Barrier(ctx context.Context, wait time.Duration) error {
	if !c.haveBarrier {
		return fmt.Errorf("barrier: no key exchange yet; call ExchangeKeys first")
	}
	if wait <= 0 {
		wait = c.opts.IOTimeout
	}
	_, err := c.exchangeKey(ctx, "barrier", c.barrier, wait)
	return err
}

// doneMessage is what older perftest releases write after the closing key
// exchange, NUL included (perftest 4.5, version string "6.06", does; the
// 6.29 sources just close the socket).
var doneMessage = []byte("done\x00")

// drainTimeout bounds Finish's wait for the peer's "done".
const drainTimeout = time.Second

// Finish performs perftest's closing handshake, a final key exchange of
// the first Dest, then writes "done\0" as older perftest versions expect,
// reads the peer's "done\0" if it sends one (newer perftest does not), and
// closes the connection. Only the key exchange can fail; it is skipped if
// no keys were ever exchanged. The connection is closed in every case.
func (c *Conn) Finish(ctx context.Context) error { return c.FinishWait(ctx, 0, true) }

// FinishWait is Finish with the key exchange waiting up to wait for the
// peer (0: Options.IOTimeout), as a passive perftest server of read_lat
// and atomic_lat waits in its close for the client's whole run, and
// "done\0" written only with done (as perftest before 6.17; newer releases
// just close).
func (c *Conn) FinishWait(ctx context.Context, wait time.Duration, done bool) error {
	if wait <= 0 {
		wait = c.opts.IOTimeout
	}
	if c.finished {
		return nil
	}
	defer c.nc.Close()
	if !c.haveBarrier {
		c.finished = true
		return nil
	}
	_, err := c.exchangeKey(ctx, "close handshake", c.barrier, wait)
	c.finished = true
	if err != nil || !done || c.opts.RDMACM {
		return err // ctx_close_connection writes no "done" on the rdma_cm channel
	}
	d := min(c.opts.IOTimeout, drainTimeout)
	c.nc.SetDeadline(time.Now().Add(d))
	if _, err := c.nc.Write(doneMessage); err != nil {
		return nil // the peer already closed: nothing left to agree on
	}
	var buf [len("done\x00")]byte
	io.ReadFull(c.nc, buf[:]) // best effort: avoids resetting a peer that still reads
	return nil
}

// AwaitClose waits up to wait (0: Options.IOTimeout) for the peer to close
// the connection, for a perftest program whose sequence ends without a
// closing exchange (write_lat): the peer exits once its last operation
// completed, which may need this side's answer (an acknowledgement), so
// this side must not go before. It returns nil when the peer closed, an
// error when it sent anything instead or did not close in time; the
// connection is closed in every case.
func (c *Conn) AwaitClose(ctx context.Context, wait time.Duration) error {
	if wait <= 0 {
		wait = c.opts.IOTimeout
	}
	defer c.nc.Close()
	c.finished = true
	var b [1]byte
	n, err := c.recv(ctx, "end of the run", "the peer closing the connection", b[:], wait)
	switch {
	case n > 0:
		return newError("end of the run: the peer sent more where its program ends; is it running the same test?", ErrProtocol)
	case errors.Is(err, ErrPeerClosed):
		return nil
	}
	return err
}

// Sync is a key exchange that only synchronises the two sides: perftest's
// create_rdma_cm_connection() does one before and one after connecting
// the test's QPs through rdma_cm, sending its still empty my_dest[0]. It
// sends an empty Dest and does not make it the Dest of later barriers.
func (c *Conn) Sync(ctx context.Context, step string, wait time.Duration) error {
	if wait <= 0 {
		wait = c.opts.IOTimeout
	}
	_, err := c.exchangeKey(ctx, step, Dest{HasGID: true}, wait)
	return err
}

func (c *Conn) exchangeKey(ctx context.Context, step string, local Dest, wait time.Duration) (Dest, error) {
	if !c.handshook {
		return Dest{}, fmt.Errorf("%s: call Handshake first", step)
	}
	if c.finished {
		return Dest{}, fmt.Errorf("%s: the connection is already finished", step)
	}
	if c.opts.RDMACM {
		return c.exchangeBinaryKey(ctx, step, local, wait)
	}
	var obuf, ibuf [KeySizeGID]byte
	out := AppendKey(obuf[:0], local)
	in := ibuf[:local.KeyLen()]
	what := fmt.Sprintf("%d-byte key message", len(in))
	var remote Dest
	err := c.swap(
		func() error { return c.send(ctx, step, what, out) },
		func() error {
			n, err := c.recv(ctx, step, what, in, wait)
			if err != nil {
				if local.HasGID && n == KeySize && in[KeySize-1] == 0 {
					return gidMismatch(step, false, err)
				}
				return err
			}
			remote, err = ParseKey(in)
			if err != nil {
				if !local.HasGID && looksLikeGIDForm(in) {
					return gidMismatch(step, true, err)
				}
				return newError(fmt.Sprintf("%s: the peer's key message is malformed (%v); is it running the same test with the same options? (--data_validation key messages are not supported)", step, err), ErrProtocol, err)
			}
			return nil
		})
	if err != nil {
		return Dest{}, err
	}
	return remote, nil
}

// looksLikeGIDForm reports whether the first KeySize bytes of a message are
// the start of the GID form: colons after GID[0] and GID[2].
func looksLikeGIDForm(b []byte) bool {
	return len(b) >= KeySize && b[52] == ':' && b[58] == ':'
}

func gidMismatch(step string, peerHasGID bool, err error) error {
	peer, local := "without a GID (59 bytes)", "with a GID (108 bytes)"
	if peerHasGID {
		peer, local = local, peer
	}
	return newError(fmt.Sprintf("%s: the peer sends key messages %s but this side sends them %s; both sides must agree: give -x (GID index) to both sides or to neither, and run both on the same link type", step, peer, local), ErrIncompatible, err)
}

// BWReport is a bandwidth test's result as perftest's xchg_bw_reports()
// exchanges it. cm does not interpret the numbers. Note that a perftest
// server of a unidirectional test sends uninitialised memory here: only
// the side that ran the traffic has meaningful values.
type BWReport struct {
	Size    uint64  // message size in bytes
	Iters   uint64  // iterations; only the low 32 bits reach peers older than 5.33
	BWPeak  float64 // peak bandwidth
	BWAvg   float64 // average bandwidth
	MsgRate float64 // average message rate
	// PerPort adds the per-port values of --report-per-port (dual-port
	// tests). Both sides must agree on it; the returned report copies the
	// local setting.
	PerPort     bool
	BWAvgPort   [2]float64
	MsgRatePort [2]float64
}

// Check reports whether the report's figures are measurements: the peak
// and average bandwidths and the message rate finite and not negative
// (and the per-port ones with PerPort). ExchangeBWReport does not check:
// a perftest server of a unidirectional test sends uninitialised memory
// that nobody reads. A test that uses the peer's figures checks them
// first, so that NaN or Inf never reaches a result; the error matches
// ErrProtocol.
func (r BWReport) Check() error {
	figures := []struct {
		what string
		v    float64
		used bool
	}{
		{"peak bandwidth", r.BWPeak, true},
		{"average bandwidth", r.BWAvg, true},
		{"message rate", r.MsgRate, true},
		{"port 1 average bandwidth", r.BWAvgPort[0], r.PerPort},
		{"port 1 message rate", r.MsgRatePort[0], r.PerPort},
		{"port 2 average bandwidth", r.BWAvgPort[1], r.PerPort},
		{"port 2 message rate", r.MsgRatePort[1], r.PerPort},
	}
	for _, f := range figures {
		if f.used && (math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0) {
			return protoErrorf("the peer's bandwidth report is not a measurement: its %s is %v (a finite rate of 0 or more is; is the peer a compatible, working perftest or rperf?)", f.what, f.v)
		}
	}
	return nil
}

// ExchangeBWReport sends local and returns the peer's report. As in
// perftest each value is its own exchange: size (8 bytes), iters (8 bytes,
// 4 for peers older than 5.33 or when versions were not exchanged), then
// bw_peak, bw_avg and msg_rate as big-endian IEEE doubles, then with
// PerPort bw_avg and msg_rate of port 1, then of port 2.
func (c *Conn) ExchangeBWReport(ctx context.Context, local BWReport) (BWReport, error) {
	const step = "BW report exchange"
	if !c.handshook {
		return BWReport{}, fmt.Errorf("%s: call Handshake first", step)
	}
	if c.finished {
		return BWReport{}, fmt.Errorf("%s: the connection is already finished", step)
	}
	r := BWReport{PerPort: local.PerPort}
	var err error
	if r.Size, err = c.swapUint64(ctx, step, "size", local.Size, 8); err != nil {
		return BWReport{}, err
	}
	itersSize := 8
	if c.peerVersion < reportIters64 {
		itersSize = 4
	}
	if r.Iters, err = c.swapUint64(ctx, step, "iteration count", local.Iters, itersSize); err != nil {
		return BWReport{}, err
	}
	floats := []struct {
		what   string
		in     float64
		out    *float64
		active bool
	}{
		{"peak bandwidth", local.BWPeak, &r.BWPeak, true},
		{"average bandwidth", local.BWAvg, &r.BWAvg, true},
		{"message rate", local.MsgRate, &r.MsgRate, true},
		{"port 1 average bandwidth", local.BWAvgPort[0], &r.BWAvgPort[0], local.PerPort},
		{"port 1 message rate", local.MsgRatePort[0], &r.MsgRatePort[0], local.PerPort},
		{"port 2 average bandwidth", local.BWAvgPort[1], &r.BWAvgPort[1], local.PerPort},
		{"port 2 message rate", local.MsgRatePort[1], &r.MsgRatePort[1], local.PerPort},
	}
	for _, f := range floats {
		if !f.active {
			continue
		}
		bits, err := c.swapUint64(ctx, step, f.what, math.Float64bits(f.in), 8)
		if err != nil {
			return BWReport{}, err
		}
		*f.out = math.Float64frombits(bits)
	}
	return r, nil
}

// swapUint64 exchanges v big-endian in size bytes (8, or 4 for the low 32
// bits).
func (c *Conn) swapUint64(ctx context.Context, step, what string, v uint64, size int) (uint64, error) {
	var out, in [8]byte
	if size == 4 {
		binary.BigEndian.PutUint32(out[:], uint32(v))
	} else {
		binary.BigEndian.PutUint64(out[:], v)
	}
	what = fmt.Sprintf("%d-byte %s", size, what)
	if err := c.swapBytes(ctx, step, what, out[:size], in[:size], c.opts.IOTimeout); err != nil {
		return 0, err
	}
	if size == 4 {
		return uint64(binary.BigEndian.Uint32(in[:])), nil
	}
	return binary.BigEndian.Uint64(in[:]), nil
}
