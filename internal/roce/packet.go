package roce

import "encoding/binary"

// Packet is the transport part of a RoCEv2 packet, the UDP payload: BTH,
// the extension headers its opcode calls for, the payload, the pad and the
// ICRC. Only the headers named by BTH.Opcode.Layout() are meaningful; the
// others keep whatever they held.
type Packet struct {
	BTH          BTH
	RETH         RETH
	AETH         AETH
	AtomicETH    AtomicETH
	AtomicAckETH AtomicAckETH
	ImmDt        ImmDt
	DETH         DETH
	IETH         IETH
	FETH         FETH
	CNPPad       CNPPad

	// Payload is the message data in this packet, without pad. After
	// Decode it aliases the decoded buffer; it is nil for an opcode without
	// payload and empty but not nil for an empty payload.
	Payload []byte
	// ICRC is the invariant CRC as a number: the 4 trailing bytes read
	// least-significant byte first.
	ICRC uint32
}

// MinPacketLen is the length of the shortest transport part: a BTH and an
// ICRC.
const MinPacketLen = BTHLen + ICRCLen

var (
	errPktShort    = newErr("decode packet", "shorter than BTH and ICRC", ErrTooShort)
	errPktOpcode   = newErr("decode packet", "unknown opcode", ErrUnknownOpcode)
	errPktTVer     = newErr("decode packet", "BTH TVer is not 0", ErrTVer)
	errPktHdrShort = newErr("decode packet", "shorter than the opcode's headers and ICRC", ErrTooShort)
	errPktAlign    = newErr("decode packet", "length is not a multiple of 4", ErrLength)
	errPktTrailing = newErr("decode packet", "bytes after the headers of an opcode without payload", ErrLength)
	errPktPadNoPay = newErr("decode packet", "PadCnt is not 0 on an opcode without payload", ErrPadCount)
	errPktPadLong  = newErr("decode packet", "PadCnt exceeds the bytes after the headers", ErrPadCount)
	errEncOpcode   = newErr("encode packet", "unknown opcode", ErrUnknownOpcode)
	errEncPayload  = newErr("encode packet", "payload on an opcode without payload", ErrLength)
	errEncBuf      = newErr("encode packet", "buffer shorter than the packet", ErrShortBuffer)
	errEncTooLong  = newErr("encode packet", "packet longer than a UDP datagram can carry", ErrLength)
)

// maxTransportLen is the largest UDP payload a UDP length field can describe.
const maxTransportLen = 0xffff - UDPLen

// Decode parses b, the whole transport part (BTH through ICRC), into p.
// Payload aliases b. Decode checks that the opcode is known, TVer is 0, the
// length is a multiple of 4 and holds the opcode's headers and the ICRC, an
// opcode without payload has nothing after its headers and PadCnt 0, and
// PadCnt does not exceed the bytes after the headers. It does not check the
// ICRC, which needs the IP and UDP headers (see Frame.VerifyICRC and
// ICRCIPv4).
func (p *Packet) Decode(b []byte) error {
	if len(b) < MinPacketLen {
		return errPktShort
	}
	if err := p.BTH.Unmarshal(b); err != nil {
		return err
	}
	info := &opTable[p.BTH.Opcode]
	if !info.valid {
		return errPktOpcode
	}
	if p.BTH.TVer != 0 {
		return errPktTVer
	}
	l := &info.layout
	if len(b) < l.HeaderLen+ICRCLen {
		return errPktHdrShort
	}
	if len(b)%4 != 0 {
		return errPktAlign
	}
	off := BTHLen
	for i := 0; i < l.NumExt; i++ {
		var err error
		h := b[off:]
		switch l.Ext[i] {
		case ExtRETH:
			err = p.RETH.Unmarshal(h)
		case ExtAETH:
			err = p.AETH.Unmarshal(h)
		case ExtAtomicETH:
			err = p.AtomicETH.Unmarshal(h)
		case ExtAtomicAck:
			err = p.AtomicAckETH.Unmarshal(h)
		case ExtImmDt:
			err = p.ImmDt.Unmarshal(h)
		case ExtDETH:
			err = p.DETH.Unmarshal(h)
		case ExtIETH:
			err = p.IETH.Unmarshal(h)
		case ExtFETH:
			err = p.FETH.Unmarshal(h)
		case ExtCNPPad:
			err = p.CNPPad.Unmarshal(h)
		}
		if err != nil {
			return err
		}
		off += l.Ext[i].Len()
	}
	end := len(b) - ICRCLen
	rest := end - off
	pad := int(p.BTH.PadCnt)
	if !l.Payload {
		if rest != 0 {
			return errPktTrailing
		}
		if pad != 0 {
			return errPktPadNoPay
		}
		p.Payload = nil
	} else {
		if pad > rest {
			return errPktPadLong
		}
		p.Payload = b[off : end-pad : end-pad]
	}
	p.ICRC = binary.LittleEndian.Uint32(b[end:])
	return nil
}

// PadLen returns the pad needed after n payload bytes: (4 - n%4) % 4.
func PadLen(n int) int { return -n & 3 }

// Len returns the encoded length of p: its opcode's headers, the payload,
// the pad and the ICRC. It is 0 for an unknown opcode.
func (p *Packet) Len() int {
	info := &opTable[p.BTH.Opcode]
	if !info.valid {
		return 0
	}
	return info.layout.HeaderLen + len(p.Payload) + PadLen(len(p.Payload)) + ICRCLen
}

// Encode writes p into b and returns the number of bytes written, Len().
// It sets BTH.PadCnt in the output from len(Payload) (ignoring p.BTH.PadCnt),
// writes zero pad bytes, and stores p.ICRC as given; compute the ICRC with
// an IPv4Path, IPv6Path, ICRCIPv4 or Frame.Encode once the IP header is
// known.
func (p *Packet) Encode(b []byte) (int, error) {
	info := &opTable[p.BTH.Opcode]
	if !info.valid {
		return 0, errEncOpcode
	}
	l := &info.layout
	if !l.Payload && len(p.Payload) != 0 {
		return 0, errEncPayload
	}
	pad := PadLen(len(p.Payload))
	n := l.HeaderLen + len(p.Payload) + pad + ICRCLen
	if n > maxTransportLen {
		return 0, errEncTooLong
	}
	if len(b) < n {
		return 0, errEncBuf
	}
	off, err := p.EncodeHeaders(b, len(p.Payload))
	if err != nil {
		return 0, err
	}
	off += copy(b[off:], p.Payload)
	clear(b[off : off+pad])
	off += pad
	binary.LittleEndian.PutUint32(b[off:], p.ICRC)
	return off + ICRCLen, nil
}

// EncodeHeaders writes the BTH (with PadCnt for a payload of payloadLen
// bytes) and the extension headers of p's opcode into b, and returns their
// length. It lets a sender put the payload and the ICRC in buffers of their
// own (a gather list) instead of copying the payload behind the headers.
func (p *Packet) EncodeHeaders(b []byte, payloadLen int) (int, error) {
	info := &opTable[p.BTH.Opcode]
	if !info.valid {
		return 0, errEncOpcode
	}
	l := &info.layout
	if len(b) < l.HeaderLen {
		return 0, errEncBuf
	}
	bth := p.BTH
	bth.PadCnt = uint8(PadLen(payloadLen))
	if err := bth.Marshal(b); err != nil {
		return 0, err
	}
	off := BTHLen
	for i := 0; i < l.NumExt; i++ {
		var err error
		h := b[off:]
		switch l.Ext[i] {
		case ExtRETH:
			err = p.RETH.Marshal(h)
		case ExtAETH:
			err = p.AETH.Marshal(h)
		case ExtAtomicETH:
			err = p.AtomicETH.Marshal(h)
		case ExtAtomicAck:
			err = p.AtomicAckETH.Marshal(h)
		case ExtImmDt:
			err = p.ImmDt.Marshal(h)
		case ExtDETH:
			err = p.DETH.Marshal(h)
		case ExtIETH:
			err = p.IETH.Marshal(h)
		case ExtFETH:
			err = p.FETH.Marshal(h)
		case ExtCNPPad:
			err = p.CNPPad.Marshal(h)
		}
		if err != nil {
			return 0, err
		}
		off += l.Ext[i].Len()
	}
	return off, nil
}
