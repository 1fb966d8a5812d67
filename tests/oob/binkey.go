package oob

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"
)

// On perftest's rdma_cm channel (-R) the key message is not text: it is
// struct pingpong_dest as the program holds it, its integers converted to
// big-endian (rdma_write_keys), sent as one SEND:
//
//	0   lid        4 bytes   (Dest.LID)
//	4   out_reads  4         (Dest.OutReads)
//	8   qpn        4
//	12  psn        4
//	16  rkey       4
//	20  (padding)  4
//	24  vaddr      8
//	32  tail_markers_vaddr 8 (6.29 and newer only)
//	32  gid        16        (40 from 6.29)
//	48  srqn       4         (56)
//	52  gid_index  4         (60)
//
// 56 bytes up to perftest 6.28 (4.5's "6.06" included), 64 from 6.29,
// which added tail_markers_vaddr. A side sends and expects the layout of
// the peer's version; between rperf peers (6.27) it is 56 bytes.
const (
	BinaryKeySize     = 56
	BinaryKeySizeTail = 64
	// tailMarkersVersion is the first version whose struct pingpong_dest
	// has tail_markers_vaddr.
	tailMarkersVersion = 6.29
)

// binaryKeySize is the key size of the peer's version.
func (c *Conn) binaryKeySize() int {
	if c.peerVersion >= tailMarkersVersion {
		return BinaryKeySizeTail
	}
	return BinaryKeySize
}

// AppendBinaryKey appends d as perftest's binary key of size bytes
// (BinaryKeySize or BinaryKeySizeTail) to dst. gid_index goes as 0 (the
// receiver keeps its own).
func AppendBinaryKey(dst []byte, d Dest, size int) []byte {
	var b [BinaryKeySizeTail]byte
	binary.BigEndian.PutUint32(b[0:], uint32(d.LID))
	binary.BigEndian.PutUint32(b[4:], uint32(d.OutReads))
	binary.BigEndian.PutUint32(b[8:], d.QPN&mask24)
	binary.BigEndian.PutUint32(b[12:], d.PSN&mask24)
	binary.BigEndian.PutUint32(b[16:], d.RKey)
	binary.BigEndian.PutUint64(b[24:], d.VAddr)
	g := 32
	if size == BinaryKeySizeTail {
		g = 40
	}
	copy(b[g:g+16], d.GID[:])
	binary.BigEndian.PutUint32(b[g+16:], d.SRQN)
	return append(dst, b[:size]...)
}

// ParseBinaryKey decodes a binary key of BinaryKeySize or
// BinaryKeySizeTail bytes. The GID is always present (HasGID).
func ParseBinaryKey(b []byte) (Dest, error) {
	if len(b) != BinaryKeySize && len(b) != BinaryKeySizeTail {
		return Dest{}, fmt.Errorf("a binary key is %d or %d bytes, not %d", BinaryKeySize, BinaryKeySizeTail, len(b))
	}
	lid, reads := binary.BigEndian.Uint32(b[0:]), binary.BigEndian.Uint32(b[4:])
	if lid > 0xffff || reads > 0xffff {
		return Dest{}, fmt.Errorf("LID %#x or out_reads %#x does not fit 16 bits", lid, reads)
	}
	d := Dest{LID: uint16(lid), OutReads: uint16(reads), QPN: binary.BigEndian.Uint32(b[8:]) & mask24,
		PSN: binary.BigEndian.Uint32(b[12:]) & mask24, RKey: binary.BigEndian.Uint32(b[16:]),
		VAddr: binary.BigEndian.Uint64(b[24:]), HasGID: true}
	g := 32
	if len(b) == BinaryKeySizeTail {
		g = 40
	}
	copy(d.GID[:], b[g:g+16])
	d.SRQN = binary.BigEndian.Uint32(b[g+16:])
	return d, nil
}

// exchangeBinaryKey is exchangeKey on the rdma_cm channel.
func (c *Conn) exchangeBinaryKey(ctx context.Context, step string, local Dest, wait time.Duration) (Dest, error) {
	size := c.binaryKeySize()
	var obuf, ibuf [BinaryKeySizeTail]byte
	out := AppendBinaryKey(obuf[:0], local, size)
	in := ibuf[:size]
	what := fmt.Sprintf("%d-byte binary key message", size)
	var remote Dest
	err := c.swap(
		func() error { return c.send(ctx, step, what, out) },
		func() error {
			if _, err := c.recv(ctx, step, what, in, wait); err != nil {
				return err
			}
			var err error
			if remote, err = ParseBinaryKey(in); err != nil {
				return newError(fmt.Sprintf("%s: the peer's key message is malformed (%v); is it running the same test with the same options?", step, err), ErrProtocol, err)
			}
			return nil
		})
	return remote, err
}
