// Package flows summarises the RoCEv2 traffic in a packet capture per QP
// flow: packets, payload bytes, opcodes, PSN range, PSN gaps,
// retransmissions, ACKs, NAKs and ICRC failures. It backs `rdiag pcap FILE`.
//
// # Flows
//
// A flow is one direction of traffic to one queue pair, keyed by
// (source IP, destination IP, destination QP), plus the source QP for UD.
// The BTH names only the destination QP; the source QP of RC and UC traffic
// is not on the wire, and the UDP source port is a hash of both QP numbers
// that may collide, so it cannot identify the sender. Keying on the
// destination therefore splits each RC connection into two flows: the
// requests (SEND, WRITE, READ request, atomics) from the requester to the
// responder's QP, and the responses (ACK/NAK, READ responses, atomic ACKs)
// from the responder to the requester's QP. UD packets carry the source QP
// in their DETH, and UD flows are keyed by it too, so that datagrams from
// different QPs of one host are not mixed.
//
// # PSN accounting
//
// PSN gaps and retransmissions are judged on request packets only, since
// responses legitimately skip PSNs (ACKs are coalesced). Each request
// consumes one PSN, except an RDMA READ request, which consumes one PSN per
// response packet: ceil(length/MTU), at least 1. Options.MTU gives the path
// MTU; when it is 0 the MTU is unknown and a READ request is taken to
// consume anywhere from ceil(length/4096) to ceil(length/256) PSNs, so a gap
// is reported only beyond the largest of these. A request whose PSN lies
// after the expected next PSN is a gap (psn_gaps counts the jumps,
// psn_missing the PSNs skipped). A request whose PSN lies before the
// expected next PSN is a retransmission: it was sent before, whether or not
// the capture saw the first copy. A packet whose ICRC fails is counted in
// packets and icrc_errors but otherwise ignored, as a receiver would drop
// it; its flow is the one its (possibly corrupted) headers name.
//
// # JSON
//
// Summary and Flow marshal to JSON with these stable snake_case fields.
//
// Summary:
//
//	format            "pcap" or "pcapng"
//	frames            capture records read
//	packets           RoCEv2 packets decoded (ICRC failures included)
//	payload_bytes     payload bytes of the packets whose ICRC verified
//	icrc_errors       packets whose ICRC did not verify
//	non_roce_frames   frames skipped: not IPv4/IPv6, not UDP, not to port
//	                  4791, IP fragments, unsupported link types
//	truncated_frames  RoCEv2-looking frames cut short by the snapshot length
//	malformed_frames  frames to UDP port 4791 that failed to decode
//	malformed_reasons count per decode error text (diagnostic, not stable)
//	flows             number of flows
//	first_timestamp   time of the first RoCEv2 packet (RFC 3339), if any
//	last_timestamp    time of the last RoCEv2 packet, if any
//	by_flow           the flows, in order of their first packet
//	cm_mads           the connection manager's MADs (below), in order;
//	                  absent when there are none
//	cm_mads_omitted   CM MADs beyond the first MaxMADs, counted only
//
// Flow:
//
//	src, dst          IP addresses
//	dest_qp           destination QP number
//	src_qp            source QP number (UD only)
//	udp_src_port      UDP source port of the flow's first packet
//	packets           packets (ICRC failures included)
//	payload_bytes     payload bytes (pad excluded)
//	requests          request packets
//	responses         response packets
//	opcodes           count per opcode name ("RC_SEND_FIRST")
//	psn_first         PSN of the first request or response packet
//	psn_last          the latest PSN seen, in 24-bit serial order
//	psn_gaps          forward PSN jumps between requests
//	psn_missing       PSNs skipped by those jumps
//	retransmissions   requests whose PSN was behind the expected one
//	acks              ACKNOWLEDGE packets with an ACK syndrome
//	naks              ACKNOWLEDGE packets with a NAK syndrome (RNR excluded)
//	nak_syndromes     count per NAK code ("psn_sequence_error",
//	                  "invalid_request", "remote_access_error",
//	                  "remote_operational_error", "invalid_rd_request",
//	                  "reserved_N")
//	rnr_naks          RNR NAKs
//	cnps              congestion notification packets
//	fecn, becn        packets with the FECN or BECN bit set
//	icrc_errors       packets whose ICRC did not verify
//	first_timestamp   time of the flow's first packet
//	last_timestamp    time of its last packet
//
// # Connection manager MADs
//
// A UD SEND_ONLY to QP 1 whose ICRC verifies carries a management datagram
// (RoCE's QP1: Linux's ib_cm and rdma_cm, rperf's verbsio/cm); it is
// counted in its flow like any packet and decoded with
// verbsio/cm/mad.Decode into a MAD record:
//
//	time              the packet's time stamp
//	src, dst          IP addresses
//	attr              the CM message ("REQ", "REP", "RTU", "REJ", "MRA",
//	                  "DREQ", "DREP", "SIDR_REQ", "SIDR_REP", or the
//	                  attribute's number), empty when the header does not
//	                  decode
//	tid               the transaction ID
//	summary           the message's one-line summary: the fields that
//	                  identify it ("REQ comm 0x1cc49059 sid 0x...1064853
//	                  qpn 0x15 psn 0x956d52 RC mtu 1024 ...->... tid ...")
//	error             why the MAD does not decode, if it does not
package flows

import (
	"errors"
	"io"
	"net/netip"
	"time"

	"github.com/rperf/rperf/internal/pcap"
	"github.com/rperf/rperf/internal/psn"
	"github.com/rperf/rperf/internal/roce"
	"github.com/rperf/rperf/verbsio/cm/mad"
)

// Summary is the result of summarising a capture.
type Summary struct {
	Format           string         `json:"format"`
	Frames           int            `json:"frames"`
	Packets          int            `json:"packets"`
	PayloadBytes     int64          `json:"payload_bytes"`
	ICRCErrors       int            `json:"icrc_errors"`
	NonRoCEFrames    int            `json:"non_roce_frames"`
	TruncatedFrames  int            `json:"truncated_frames"`
	MalformedFrames  int            `json:"malformed_frames"`
	MalformedReasons map[string]int `json:"malformed_reasons,omitempty"`
	FlowCount        int            `json:"flows"`
	FirstTimestamp   *time.Time     `json:"first_timestamp,omitempty"`
	LastTimestamp    *time.Time     `json:"last_timestamp,omitempty"`
	Flows            []*Flow        `json:"by_flow"`
	MADs             []MAD          `json:"cm_mads,omitempty"`
	MADsOmitted      int            `json:"cm_mads_omitted,omitempty"`
}

// MAD is a connection manager MAD of the capture (see the package doc).
type MAD struct {
	Time    time.Time  `json:"time"`
	Src     netip.Addr `json:"src"`
	Dst     netip.Addr `json:"dst"`
	Attr    string     `json:"attr"`
	TID     uint64     `json:"tid"`
	Summary string     `json:"summary"`
	Error   string     `json:"error,omitempty"`
}

// MaxMADs bounds the MAD records of a summary; later MADs are counted in
// MADsOmitted.
const MaxMADs = 10000

// Flow is the summary of one flow; see the package documentation for what
// a flow is and what each field counts.
type Flow struct {
	Src            netip.Addr     `json:"src"`
	Dst            netip.Addr     `json:"dst"`
	DestQP         uint32         `json:"dest_qp"`
	SrcQP          *uint32        `json:"src_qp,omitempty"`
	UDPSrcPort     uint16         `json:"udp_src_port"`
	Packets        int            `json:"packets"`
	PayloadBytes   int64          `json:"payload_bytes"`
	Requests       int            `json:"requests"`
	Responses      int            `json:"responses"`
	Opcodes        map[string]int `json:"opcodes"`
	PSNFirst       *uint32        `json:"psn_first,omitempty"`
	PSNLast        *uint32        `json:"psn_last,omitempty"`
	PSNGaps        int            `json:"psn_gaps"`
	PSNMissing     int64          `json:"psn_missing"`
	Retransmits    int            `json:"retransmissions"`
	ACKs           int            `json:"acks"`
	NAKs           int            `json:"naks"`
	NAKSyndromes   map[string]int `json:"nak_syndromes,omitempty"`
	RNRNAKs        int            `json:"rnr_naks"`
	CNPs           int            `json:"cnps"`
	FECN           int            `json:"fecn"`
	BECN           int            `json:"becn"`
	ICRCErrors     int            `json:"icrc_errors"`
	FirstTimestamp time.Time      `json:"first_timestamp"`
	LastTimestamp  time.Time      `json:"last_timestamp"`

	// Request PSN tracking: the next request is expected in
	// [next, nextMax]; they differ only after a READ request when the MTU
	// is unknown.
	haveReq bool
	next    psn.PSN
	nextMax psn.PSN
	havePSN bool
	first   psn.PSN
	last    psn.PSN
}

// Options tunes the summary.
type Options struct {
	// MTU is the path MTU in bytes (256, 512, 1024, 2048 or 4096), used to
	// tell how many PSNs an RDMA READ request consumes. 0 means unknown.
	MTU int
}

type flowKey struct {
	src, dst netip.Addr
	destQP   uint32
	srcQP    uint32 // UD only
	ud       bool
}

// Summariser accumulates a summary frame by frame. It is not safe for
// concurrent use.
type Summariser struct {
	opts    Options
	sum     Summary
	flows   map[flowKey]*Flow
	frame   roce.Frame
	haveTS  bool
	firstTS time.Time
	lastTS  time.Time
}

// NewSummariser returns an empty Summariser.
func NewSummariser(opts Options) *Summariser {
	return &Summariser{opts: opts, flows: make(map[flowKey]*Flow)}
}

// Summarise reads a pcap or pcapng capture from r and summarises its
// RoCEv2 traffic with default options. If the capture turns out malformed
// after its header, it returns the summary of the packets before the damage
// together with the error.
func Summarise(r io.Reader) (Summary, error) {
	return SummariseOptions(r, Options{})
}

// SummariseOptions is Summarise with options.
func SummariseOptions(r io.Reader, opts Options) (Summary, error) {
	pr, err := pcap.NewReader(r)
	if err != nil {
		return Summary{}, err
	}
	s := NewSummariser(opts)
	s.sum.Format = pr.Format().String()
	for {
		p, err := pr.Next()
		if err == io.EOF {
			return s.Summary(), nil
		}
		if err != nil {
			return s.Summary(), err
		}
		s.Add(p)
	}
}

// Add accounts for one captured frame. It keeps no reference to p.Data.
func (s *Summariser) Add(p pcap.Packet) {
	s.sum.Frames++
	et, l3, err := pcap.Network(p.LinkType, p.Data)
	if err != nil || (et != pcap.EtherTypeIPv4 && et != pcap.EtherTypeIPv6) {
		s.sum.NonRoCEFrames++
		return
	}
	f := &s.frame
	if err := f.DecodeIP(l3); err != nil {
		switch {
		case errors.Is(err, roce.ErrNotRoCE):
			s.sum.NonRoCEFrames++
		case p.OrigLen > len(p.Data):
			s.sum.TruncatedFrames++
		case f.UDPHeader == nil:
			// The IP or UDP layer is broken or unsupported before the port
			// could be read: not recognisably RoCE.
			s.sum.NonRoCEFrames++
		default:
			s.sum.MalformedFrames++
			if s.sum.MalformedReasons == nil {
				s.sum.MalformedReasons = make(map[string]int)
			}
			s.sum.MalformedReasons[err.Error()]++
		}
		return
	}
	s.addPacket(p.Timestamp, f)
}

func (s *Summariser) addPacket(ts time.Time, f *roce.Frame) {
	s.sum.Packets++
	if !s.haveTS {
		s.haveTS, s.firstTS = true, ts
	}
	s.lastTS = ts

	pkt := &f.Packet
	bth := &pkt.BTH
	var key flowKey
	if f.IPVersion == 4 {
		key.src, key.dst = netip.AddrFrom4(f.IPv4.Src), netip.AddrFrom4(f.IPv4.Dst)
	} else {
		key.src, key.dst = netip.AddrFrom16(f.IPv6.Src), netip.AddrFrom16(f.IPv6.Dst)
	}
	key.destQP = bth.DestQP
	if bth.Opcode.Transport() == roce.UD {
		key.ud, key.srcQP = true, pkt.DETH.SrcQP
	}
	fl := s.flows[key]
	if fl == nil {
		fl = &Flow{
			Src: key.src, Dst: key.dst, DestQP: key.destQP,
			UDPSrcPort:     f.UDP.SrcPort,
			Opcodes:        make(map[string]int),
			FirstTimestamp: ts,
		}
		if key.ud {
			q := key.srcQP
			fl.SrcQP = &q
		}
		s.flows[key] = fl
		s.sum.Flows = append(s.sum.Flows, fl)
	}
	fl.Packets++
	fl.LastTimestamp = ts
	if !f.VerifyICRC() {
		s.sum.ICRCErrors++
		fl.ICRCErrors++
		return
	}
	op := bth.Opcode
	if bth.DestQP == 1 && op == roce.UDSendOnly {
		s.addMAD(ts, key, pkt.Payload)
	}
	fl.Opcodes[op.String()]++
	fl.PayloadBytes += int64(len(pkt.Payload))
	s.sum.PayloadBytes += int64(len(pkt.Payload))
	if bth.FECN {
		fl.FECN++
	}
	if bth.BECN {
		fl.BECN++
	}
	switch {
	case op.IsRequest():
		fl.Requests++
		fl.seePSN(bth.PSN)
		s.request(fl, pkt)
	case op.IsResponse():
		fl.Responses++
		fl.seePSN(bth.PSN)
		if op == roce.RCAck {
			syn := pkt.AETH.Syndrome
			switch {
			case syn.IsACK():
				fl.ACKs++
			case syn.IsRNRNAK():
				fl.RNRNAKs++
			case syn.IsNAK():
				fl.NAKs++
				if fl.NAKSyndromes == nil {
					fl.NAKSyndromes = make(map[string]int)
				}
				fl.NAKSyndromes[syn.NAKCode().String()]++
			}
		}
	case op.Kind() == roce.KindCNP:
		fl.CNPs++
	}
}

// addMAD decodes a CM MAD (a UD SEND_ONLY to QP 1).
func (s *Summariser) addMAD(ts time.Time, key flowKey, payload []byte) {
	if len(s.sum.MADs) == MaxMADs {
		s.sum.MADsOmitted++
		return
	}
	r := MAD{Time: ts, Src: key.src, Dst: key.dst}
	m, err := mad.Decode(payload)
	if err != nil {
		r.Error = err.Error()
		var h mad.Header
		if h.Unmarshal(payload) == nil {
			r.TID = h.TID
			r.Attr = h.AttrID.String()
		}
	} else {
		r.Attr, r.TID, r.Summary = m.AttrID.String(), m.TID, m.String()
	}
	s.sum.MADs = append(s.sum.MADs, r)
}

// seePSN records a request or response PSN for psn_first and psn_last.
func (fl *Flow) seePSN(p psn.PSN) {
	if !fl.havePSN {
		fl.havePSN = true
		fl.first, fl.last = p, p
		return
	}
	fl.last = psn.Max(fl.last, p)
}

// request does the PSN gap and retransmission accounting of one request.
func (s *Summariser) request(fl *Flow, pkt *roce.Packet) {
	q := pkt.BTH.PSN
	lo, hi := 1, 1
	if pkt.BTH.Opcode == roce.RCReadRequest {
		lo, hi = s.readSpan(pkt.RETH.DMALen)
	}
	if !fl.haveReq {
		fl.haveReq = true
		fl.next, fl.nextMax = q.Add(lo), q.Add(hi)
		return
	}
	switch {
	case q.Before(fl.next):
		fl.Retransmits++
		// A retransmitted READ may reach past what was expected.
		fl.next, fl.nextMax = psn.Max(fl.next, q.Add(lo)), psn.Max(fl.nextMax, q.Add(hi))
		return
	case q.After(fl.nextMax):
		fl.PSNGaps++
		fl.PSNMissing += int64(psn.Diff(fl.nextMax, q))
	}
	fl.next, fl.nextMax = q.Add(lo), q.Add(hi)
}

// readSpan returns the fewest and the most PSNs that a READ request for
// length bytes consumes.
func (s *Summariser) readSpan(length uint32) (lo, hi int) {
	span := func(mtu int) int {
		n := (int64(length) + int64(mtu) - 1) / int64(mtu)
		if n < 1 {
			n = 1
		}
		if n > psn.Half {
			n = psn.Half
		}
		return int(n)
	}
	if roce.ValidMTU(s.opts.MTU) {
		n := span(s.opts.MTU)
		return n, n
	}
	return span(4096), span(256)
}

// Summary returns the summary so far. The returned value shares its flows
// and maps with the Summariser, which goes on updating them if Add is
// called again.
func (s *Summariser) Summary() Summary {
	sum := s.sum
	sum.FlowCount = len(sum.Flows)
	if sum.Flows == nil {
		sum.Flows = []*Flow{}
	}
	if s.haveTS {
		first, last := s.firstTS, s.lastTS
		sum.FirstTimestamp, sum.LastTimestamp = &first, &last
	}
	for _, fl := range sum.Flows {
		if fl.havePSN {
			first, last := uint32(fl.first), uint32(fl.last)
			fl.PSNFirst, fl.PSNLast = &first, &last
		}
	}
	return sum
}
