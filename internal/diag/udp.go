package diag

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// RoCEv2Port is the UDP destination port of RoCE v2 (IANA "roce").
const RoCEv2Port = 4791

// UDPSocket is one line of /proc/net/udp or /proc/net/udp6.
type UDPSocket struct {
	Local netip.AddrPort // local address and port
	UID   uint32         // owner
	Inode uint64         // socket inode (matches /proc/PID/fd links)
}

// ParseProcNetUDP parses the text of /proc/net/udp or /proc/net/udp6.
// Addresses are printed by the kernel as 32-bit words in host byte order;
// hostOrder is the byte order of the machine that produced the text
// (binary.NativeEndian for the local machine).
func ParseProcNetUDP(text string, hostOrder binary.ByteOrder) ([]UDPSocket, error) {
	var out []UDPSocket
	for i, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || (i == 0 && fields[0] == "sl") {
			continue
		}
		if len(fields) < 10 {
			return nil, fmt.Errorf("parse /proc/net/udp line %d: %d fields, want at least 10", i+1, len(fields))
		}
		local, err := parseProcAddr(fields[1], hostOrder)
		if err != nil {
			return nil, fmt.Errorf("parse /proc/net/udp line %d: %w", i+1, err)
		}
		uid, err := strconv.ParseUint(fields[7], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("parse /proc/net/udp line %d: uid %q: %w", i+1, fields[7], err)
		}
		inode, err := strconv.ParseUint(fields[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parse /proc/net/udp line %d: inode %q: %w", i+1, fields[9], err)
		}
		out = append(out, UDPSocket{Local: local, UID: uint32(uid), Inode: inode})
	}
	return out, nil
}

// parseProcAddr parses "0100007F:12B7" (IPv4) or a 32-digit IPv6 form.
func parseProcAddr(s string, order binary.ByteOrder) (netip.AddrPort, error) {
	addrHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q: no port", s)
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: bad port", s)
	}
	raw, err := hex.DecodeString(addrHex)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q: bad address", s)
	}
	// Each 32-bit word was printed as a number read in host order; write
	// the numbers back in host order to recover the bytes in memory,
	// which are in network order.
	for w := 0; w < len(raw); w += 4 {
		v := binary.BigEndian.Uint32(raw[w:])
		order.PutUint32(raw[w:], v)
	}
	var addr netip.Addr
	if len(raw) == 4 {
		addr = netip.AddrFrom4([4]byte(raw))
	} else {
		addr = netip.AddrFrom16([16]byte(raw))
	}
	return netip.AddrPortFrom(addr, uint16(port)), nil
}

// UDPPort checks whether a UDP port is free. The built-in engine's UDP
// fabric listens on RoCEv2Port by default; rdma_rxe binds the same port
// in the kernel when a Soft-RoCE device exists, so the two cannot share
// a host unless the built-in engine moves to another port. readErr is
// the error reading /proc/net/udp*, if any.
func UDPPort(sockets []UDPSocket, port uint16, readErr error) Finding {
	f := Finding{Check: CheckUDPPort}
	if readErr != nil {
		f.Severity = Warn
		f.What = fmt.Sprintf("cannot tell whether UDP port %d is free: %v", port, readErr)
		f.Fix = fmt.Sprintf(`check by hand: "ss -uanp sport = :%d"`, port)
		return f
	}
	var holders []string
	for _, s := range sockets {
		if s.Local.Port() == port {
			holders = append(holders, fmt.Sprintf("%s (uid %d, inode %d)", s.Local, s.UID, s.Inode))
		}
	}
	if len(holders) == 0 {
		f.Severity = Pass
		f.What = fmt.Sprintf("UDP port %d is free", port)
		return f
	}
	f.Severity = Fail
	f.What = fmt.Sprintf("UDP port %d is bound: %s", port, strings.Join(holders, ", "))
	if port == RoCEv2Port {
		f.What += "; rdma_rxe binds it while a Soft-RoCE device exists"
	}
	f.Fix = fmt.Sprintf(`give the built-in engine another UDP port, or free %d (for rxe: "rdma link delete <rxe dev>")`, port)
	return f
}
