package oob

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"

	"github.com/rperf/rperf/verbsio"
)

// MTU is a path MTU as libibverbs' enum ibv_mtu numbers it; this number,
// not the byte count, is what perftest exchanges.
type MTU = verbsio.MTU

// The ibv_mtu values.
const (
	MTU256  = verbsio.MTU256
	MTU512  = verbsio.MTU512
	MTU1024 = verbsio.MTU1024
	MTU2048 = verbsio.MTU2048
	MTU4096 = verbsio.MTU4096
)

// DefaultCacheLineSize is used when Hello.CacheLineSize is 0.
const DefaultCacheLineSize = 64

// Hello is what one side brings to Handshake.
type Hello struct {
	// PageSize is perftest's cycle_buffer: the alignment unit of message
	// buffers. 0 means os.Getpagesize().
	PageSize uint32
	// CacheLineSize is the L1 data cache line size. 0 means 64.
	CacheLineSize uint32
	// MTU is the local port's active MTU (or -m). Required.
	MTU MTU
	// Params describes the test this side runs. It is exchanged only when
	// both sides are rperf; see Params.
	Params Params
}

// Peer is what Handshake learned from the other side, and the values both
// sides now use.
type Peer struct {
	// Version is the peer's version string ("" with NoVersionExchange).
	Version string
	// Rperf reports whether the peer advertised an rperf version, in which
	// case test parameters were exchanged and checked.
	Rperf bool
	// Hello holds the values the peer sent. Fields of skipped steps are
	// zero; Params is set only when Rperf is true.
	Hello Hello
	// PageSize and CacheLineSize are the maximum of both sides (as perftest
	// computes them), or the local values when sys-data was not exchanged.
	PageSize      uint32
	CacheLineSize uint32
	// MTU is the smaller of both sides' MTUs; a peer value outside 1..5 is
	// ignored, as perftest ignores it.
	MTU MTU
}

// Handshake performs the session's opening steps, in perftest's order:
// version exchange, sys-data exchange (page size, then cache line size),
// MTU exchange and, when both sides are rperf, the test-parameter
// exchange. It rejects a peer older than perftest 5.70, and an rperf peer
// whose symmetric test parameters differ (error matching ErrIncompatible,
// e.g. "peers disagree: client runs write-lat -s 64, server runs write-lat
// -s 4096; start both with the same flags"). It must be called once, before
// any other exchange.
func (c *Conn) Handshake(ctx context.Context, local Hello) (Peer, error) {
	if c.handshook {
		return Peer{}, fmt.Errorf("handshake: already done on this connection")
	}
	if local.PageSize == 0 {
		local.PageSize = uint32(os.Getpagesize())
	}
	if local.CacheLineSize == 0 {
		local.CacheLineSize = DefaultCacheLineSize
	}
	if !local.MTU.Valid() {
		return Peer{}, fmt.Errorf("handshake: local MTU %v is not an ibv_mtu value (1..5)", local.MTU)
	}
	if err := local.Params.validate(); err != nil {
		return Peer{}, fmt.Errorf("handshake: %w", err)
	}
	c.handshook = true
	p := Peer{PageSize: local.PageSize, CacheLineSize: local.CacheLineSize, MTU: local.MTU}
	if c.opts.NoVersionExchange {
		c.peer = p
		return p, nil
	}

	// 1. Versions.
	in := make([]byte, VersionSize)
	if err := c.swapBytes(ctx, "version exchange", fmt.Sprintf("%d-byte version", VersionSize), versionMessage(c.opts.Version), in, c.opts.IOTimeout); err != nil {
		return Peer{}, err
	}
	p.Version = versionString(in)
	v := atof(p.Version)
	if v < minPeerVersion {
		return Peer{}, newError(fmt.Sprintf("version exchange: the peer's version %q is older than perftest 5.70, the oldest rperf can work with (or it is not perftest/rperf at all); upgrade perftest on the peer or run rperf there", p.Version), ErrIncompatible)
	}
	c.peerVersion = v

	// 2. Sys-data: page size, then cache line size; both sides keep the max.
	if v >= sysDataVersion {
		var err error
		if p.Hello.PageSize, err = c.swapUint32(ctx, "sys-data exchange", "page size", local.PageSize); err != nil {
			return Peer{}, err
		}
		if p.Hello.CacheLineSize, err = c.swapUint32(ctx, "sys-data exchange", "cache line size", local.CacheLineSize); err != nil {
			return Peer{}, err
		}
		p.PageSize = max(p.PageSize, p.Hello.PageSize)
		p.CacheLineSize = max(p.CacheLineSize, p.Hello.CacheLineSize)
	}

	// 3. MTU, as the ASCII decimal ibv_mtu value; both sides keep the min.
	size := mtuMessageSize(v)
	in = make([]byte, size)
	if err := c.swapBytes(ctx, "MTU exchange", fmt.Sprintf("%d-byte MTU", size), mtuMessage(local.MTU, size), in, c.opts.IOTimeout); err != nil {
		return Peer{}, err
	}
	rem, err := parseMTU(in)
	if err != nil {
		return Peer{}, fmt.Errorf("MTU exchange: %w", err)
	}
	p.Hello.MTU = rem
	if rem.Valid() && rem < p.MTU {
		p.MTU = rem
	}

	// 4. rperf only: test parameters.
	if lvl := min(rperfLevel(c.opts.Version), rperfLevel(p.Version)); lvl >= 1 {
		p.Rperf = true
		rp, err := c.swapParams(ctx, local.Params)
		if err != nil {
			return Peer{}, err
		}
		p.Hello.Params = rp
		c.peer = p
		if err := checkParams(c.server, local.Params, rp); err != nil {
			return p, err
		}
	}
	c.peer = p
	return p, nil
}

// swapUint32 exchanges a big-endian 32-bit value.
func (c *Conn) swapUint32(ctx context.Context, step, what string, v uint32) (uint32, error) {
	var out, in [4]byte
	binary.BigEndian.PutUint32(out[:], v)
	if err := c.swapBytes(ctx, step, what, out[:], in[:], c.opts.IOTimeout); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(in[:]), nil
}

// mtuMessageSize is 2 bytes for peers from 5.31 on, else sizeof(int).
func mtuMessageSize(peerVersion float64) int {
	if peerVersion >= mtuShortVersion {
		return 2
	}
	return 4
}

// mtuMessage is m in ASCII decimal, NUL terminated and padded to size.
func mtuMessage(m MTU, size int) []byte {
	b := make([]byte, size)
	copy(b, strconv.Itoa(int(m)))
	return b
}

// parseMTU reads the decimal digits before the NUL of an MTU message. Bytes
// after the NUL are ignored: perftest's 4-byte form leaves them unset.
func parseMTU(b []byte) (MTU, error) {
	n := 0
	for i, c := range b {
		switch {
		case c == 0 && i > 0:
			if n > 255 {
				return 0, protoErrorf("peer sent MTU message %q, not an ibv_mtu value", b)
			}
			return MTU(n), nil
		case c >= '0' && c <= '9':
			n = min(n*10+int(c-'0'), 1000)
		default:
			return 0, protoErrorf("peer sent MTU message %q, want decimal digits and a NUL", b)
		}
	}
	return 0, protoErrorf("peer sent MTU message %q without a terminating NUL", b)
}
