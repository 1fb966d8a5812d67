// Package capture reads the CM traffic out of packet captures of RoCEv2
// links: every UD SEND to QP1 whose payload is a MAD, with the addresses and
// transport headers it came with. The tests of the CM packages use it on
// the captures of Linux rxe traffic in verbsio/cm/testdata.
package capture

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/rperf/rperf/internal/pcap"
	"github.com/rperf/rperf/internal/roce"
	"github.com/rperf/rperf/verbsio/cm/mad"
)

// Packet is one captured RoCEv2 packet.
type Packet struct {
	Frame   int // 1-based frame number in the capture
	Time    time.Time
	Src     netip.AddrPort // IP source address and UDP source port
	Dst     netip.AddrPort
	BTH     roce.BTH
	DETH    roce.DETH // for UD packets
	Payload []byte    // a copy
	ICRCOK  bool
}

// IsMAD reports whether the packet is a UD SEND to QP1 carrying a MAD.
func (p *Packet) IsMAD() bool {
	return p.BTH.Opcode == roce.UDSendOnly && p.BTH.DestQP == 1
}

// Read returns every RoCEv2 packet of the capture at path, in order.
// Frames that are not RoCEv2 (ARP, the perftest TCP exchange) are skipped.
func Read(path string) ([]Packet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := pcap.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Packet
	for n := 1; ; n++ {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: frame %d: %w", path, n, err)
		}
		var fr roce.Frame
		if err := fr.DecodeEthernet(p.Data); err != nil {
			if errors.Is(err, roce.ErrNotRoCE) {
				continue
			}
			return nil, fmt.Errorf("%s: frame %d: %w", path, n, err)
		}
		var src, dst netip.Addr
		if fr.IPVersion == 4 {
			src, dst = netip.AddrFrom4(fr.IPv4.Src), netip.AddrFrom4(fr.IPv4.Dst)
		} else {
			src, dst = netip.AddrFrom16(fr.IPv6.Src), netip.AddrFrom16(fr.IPv6.Dst)
		}
		out = append(out, Packet{
			Frame:   n,
			Time:    p.Timestamp,
			Src:     netip.AddrPortFrom(src, fr.UDP.SrcPort),
			Dst:     netip.AddrPortFrom(dst, fr.UDP.DstPort),
			BTH:     fr.Packet.BTH,
			DETH:    fr.Packet.DETH,
			Payload: append([]byte(nil), fr.Packet.Payload...),
			ICRCOK:  fr.VerifyICRC(),
		})
	}
}

// MADs returns the packets of the capture at path that carry MADs.
func MADs(path string) ([]Packet, error) {
	all, err := Read(path)
	if err != nil {
		return nil, err
	}
	var out []Packet
	for _, p := range all {
		if p.IsMAD() {
			out = append(out, p)
		}
	}
	return out, nil
}

// Frames returns the MAD packets of the capture at path by frame number.
func Frames(path string) (map[int]Packet, error) {
	pkts, err := MADs(path)
	if err != nil {
		return nil, err
	}
	m := make(map[int]Packet, len(pkts))
	for _, p := range pkts {
		m[p.Frame] = p
	}
	return m, nil
}

// Decode decodes the MAD of frame n of frames.
func Decode(frames map[int]Packet, n int) (mad.MAD, error) {
	p, ok := frames[n]
	if !ok {
		return mad.MAD{}, fmt.Errorf("no MAD in frame %d", n)
	}
	m, err := mad.Decode(p.Payload)
	if err != nil {
		return m, fmt.Errorf("frame %d: %w", n, err)
	}
	return m, nil
}
