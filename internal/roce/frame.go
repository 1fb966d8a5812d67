package roce

// Frame is a whole RoCEv2 frame: an optional Ethernet header, an IPv4 or
// IPv6 header, a UDP header and the transport part.
type Frame struct {
	// HasEthernet says whether Ethernet is part of the frame. DecodeEthernet
	// sets it, DecodeIP clears it, Encode obeys it.
	HasEthernet bool
	Ethernet    Ethernet
	// IPVersion is 4 or 6 and says which of IPv4 and IPv6 is in use.
	IPVersion uint8
	IPv4      IPv4
	IPv6      IPv6
	UDP       UDP
	Packet    Packet

	// IPHeader, UDPHeader and Transport alias the decoded buffer: the raw IP
	// header, the raw UDP header and the UDP payload (BTH through ICRC).
	// After a failed decode, those not reached are nil. Encode ignores them.
	IPHeader  []byte
	UDPHeader []byte
	Transport []byte
}

var (
	errFrameEtherType = newErr("decode frame", "EtherType is neither IPv4 nor IPv6", ErrNotRoCE)
	errFrameMismatch  = newErr("decode frame", "IP version disagrees with the EtherType", ErrNotRoCE)
	errFrameVersion   = newErr("decode frame", "IP version is neither 4 nor 6", ErrNotRoCE)
	errFrameEmpty     = newErr("decode frame", "no IP header", ErrTooShort)
	errFrameNotUDP    = newErr("decode frame", "IP payload is not UDP", ErrNotRoCE)
	errFrameFragment  = newErr("decode frame", "IPv4 fragment", ErrNotRoCE)
	errFramePort      = newErr("decode frame", "UDP destination port is not 4791", ErrNotRoCE)
	errFrameIPLen     = newErr("decode frame", "IP length field below the headers", ErrLength)
	errFrameTrunc     = newErr("decode frame", "IP length field exceeds the captured bytes", ErrTooShort)
	errFrameUDPLen    = newErr("decode frame", "UDP length disagrees with the IP length", ErrLength)
	errFrameJumbo     = newErr("decode frame", "IPv6 jumbogram", ErrUnsupported)
	errFrameVersionE  = newErr("encode frame", "IPVersion is neither 4 nor 6", ErrRange)
	errFrameBuf       = newErr("encode frame", "buffer shorter than the frame", ErrShortBuffer)
	errFrameTooLong   = newErr("encode frame", "packet too long for the IP length field", ErrLength)
)

// DecodeEthernet decodes an Ethernet frame (without FCS; bytes after the IP
// datagram, such as Ethernet padding or an FCS, are ignored). Errors of kind
// ErrNotRoCE mean a well-formed frame that is not RoCEv2.
func (f *Frame) DecodeEthernet(b []byte) error {
	n, err := f.Ethernet.Unmarshal(b)
	if err != nil {
		return err
	}
	var want byte
	switch f.Ethernet.Type {
	case EtherTypeIPv4:
		want = 4
	case EtherTypeIPv6:
		want = 6
	default:
		return errFrameEtherType
	}
	if len(b) > n && b[n]>>4 != want {
		return errFrameMismatch
	}
	if err := f.DecodeIP(b[n:]); err != nil {
		return err
	}
	f.HasEthernet = true
	return nil
}

// DecodeIP decodes a frame that starts at the IP header, such as a raw-IP
// capture record or a datagram read from a raw socket. Bytes after the IP
// datagram are ignored. It does not check the ICRC (see VerifyICRC) or the
// IPv4 header checksum.
func (f *Frame) DecodeIP(b []byte) error {
	f.HasEthernet = false
	f.IPHeader, f.UDPHeader, f.Transport = nil, nil, nil
	if len(b) == 0 {
		return errFrameEmpty
	}
	// hdr is the IP header length, end the end of the IP datagram.
	var hdr, end int
	switch b[0] >> 4 {
	case 4:
		if err := f.IPv4.Unmarshal(b); err != nil {
			return err
		}
		f.IPVersion = 4
		f.IPHeader = b[:IPv4Len]
		if f.IPv4.Protocol != ProtoUDP {
			return errFrameNotUDP
		}
		if f.IPv4.IsFragment() {
			return errFrameFragment
		}
		hdr, end = IPv4Len, int(f.IPv4.Length)
		if end < IPv4Len+UDPLen {
			return errFrameIPLen
		}
	case 6:
		if err := f.IPv6.Unmarshal(b); err != nil {
			return err
		}
		f.IPVersion = 6
		f.IPHeader = b[:IPv6Len]
		if f.IPv6.NextHeader != ProtoUDP {
			return errFrameNotUDP
		}
		pl := int(f.IPv6.PayloadLength)
		if pl == 0 {
			return errFrameJumbo
		}
		if pl < UDPLen {
			return errFrameIPLen
		}
		hdr, end = IPv6Len, IPv6Len+pl
	default:
		return errFrameVersion
	}
	// Read the UDP header before checking that the whole datagram is
	// present, so that a datagram cut short by a capture's snapshot length
	// is still told apart as RoCE or not.
	if err := f.UDP.Unmarshal(b[hdr:]); err != nil {
		return err
	}
	f.UDPHeader = b[hdr : hdr+UDPLen]
	if f.UDP.DstPort != UDPPort {
		return errFramePort
	}
	if end > len(b) {
		return errFrameTrunc
	}
	l4 := b[hdr:end]
	if int(f.UDP.Length) < UDPLen || int(f.UDP.Length) > len(l4) {
		return errFrameUDPLen
	}
	f.Transport = l4[UDPLen:f.UDP.Length]
	return f.Packet.Decode(f.Transport)
}

// ComputeICRC returns the ICRC of the decoded frame, computed from its raw
// IP, UDP and transport bytes. Call it only after a successful decode.
func (f *Frame) ComputeICRC() (uint32, error) {
	return ICRCRaw(f.IPHeader, f.UDPHeader, f.Transport)
}

// VerifyICRC reports whether the decoded frame's stored ICRC matches the
// one computed over it. Call it only after a successful decode.
func (f *Frame) VerifyICRC() bool {
	crc, err := f.ComputeICRC()
	return err == nil && crc == f.Packet.ICRC
}

// Len returns the encoded length of the frame.
func (f *Frame) Len() int {
	n := f.Packet.Len() + UDPLen
	if f.IPVersion == 6 {
		n += IPv6Len
	} else {
		n += IPv4Len
	}
	if f.HasEthernet {
		n += f.Ethernet.Len()
	}
	return n
}

// Encode writes the frame into b and returns its length. It derives the
// lengths (IPv4 total length or IPv6 payload length, UDP length), the IP
// protocol or next header (UDP), the IPv4 header checksum, BTH.PadCnt and the
// ICRC, and updates those fields of f to what it wrote; every other field,
// the UDP checksum included, is written as given. It does not add Ethernet
// padding for frames shorter than 60 bytes.
func (f *Frame) Encode(b []byte) (int, error) {
	if f.IPVersion != 4 && f.IPVersion != 6 {
		return 0, errFrameVersionE
	}
	plen := f.Packet.Len()
	if plen == 0 {
		return 0, errEncOpcode
	}
	if (f.IPVersion == 4 && plen > 0xffff-IPv4Len-UDPLen) || plen > 0xffff-UDPLen {
		return 0, errFrameTooLong
	}
	if len(b) < f.Len() {
		return 0, errFrameBuf
	}
	off := 0
	if f.HasEthernet {
		if f.IPVersion == 4 {
			f.Ethernet.Type = EtherTypeIPv4
		} else {
			f.Ethernet.Type = EtherTypeIPv6
		}
		n, err := f.Ethernet.Marshal(b)
		if err != nil {
			return 0, err
		}
		off = n
	}
	ipOff := off
	var err error
	if f.IPVersion == 4 {
		err = PutIPv4UDP(b[off:], &f.IPv4, &f.UDP, plen)
		off += IPv4Len + UDPLen
	} else {
		err = PutIPv6UDP(b[off:], &f.IPv6, &f.UDP, plen)
		off += IPv6Len + UDPLen
	}
	if err != nil {
		return 0, err
	}
	n, err := f.Packet.Encode(b[off:])
	if err != nil {
		return 0, err
	}
	pkt := b[off : off+n]
	crc, err := ICRCRaw(b[ipOff:off-UDPLen], b[off-UDPLen:off], pkt)
	if err != nil {
		return 0, err
	}
	PutICRC(pkt, crc)
	f.Packet.ICRC = crc
	f.Packet.BTH.PadCnt = uint8(PadLen(len(f.Packet.Payload)))
	return off + n, nil
}
