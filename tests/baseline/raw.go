package baseline

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/reports"
)

// NameRawPingPong is the test field of RawPingPong's record.
const NameRawPingPong = "baseline_raw_pingpong"

// RoleRawPong is the peer role that answers RawPingPong's frames.
const RoleRawPong = "raw-pong"

// RawEnd is one end of a raw ping-pong: a packet socket bound to a link
// (OpenRawEnd), and the addresses of the frames that end receives.
type RawEnd struct {
	FD   int
	MAC  [6]byte
	IP   netip.Addr // IPv4
	Port uint16     // the UDP destination port its filter passes
}

// Raw frame layout: Ethernet, IPv4 without options, UDP.
const (
	rawHdrLen = 14 + 20 + 8
	rawMinLen = 60 // a frame without its FCS
	rawEndTag = 0xee
)

// OpenRawEnd opens a packet socket on link in the caller's network
// namespace, as rperf's raw fabric's peers do: bound to the link for IPv4
// frames, with a classic BPF filter that passes only UDP to port. Its MAC
// and first IPv4 address are the link's.
func OpenRawEnd(link string, port uint16) (RawEnd, error) {
	ifc, err := net.InterfaceByName(link)
	if err != nil {
		return RawEnd{}, fmt.Errorf("raw ping-pong: link %s: %w (ip link lists the links of this namespace)", link, err)
	}
	e := RawEnd{FD: -1, Port: port}
	copy(e.MAC[:], ifc.HardwareAddr)
	addrs, _ := ifc.Addrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
			e.IP = p.Addr()
			break
		}
	}
	if !e.IP.IsValid() {
		return RawEnd{}, fmt.Errorf("raw ping-pong: %s has no IPv4 address; give it one (ip addr add)", link)
	}
	proto := uint16(unix.ETH_P_IP<<8&0xff00 | unix.ETH_P_IP>>8) // network order
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return RawEnd{}, fmt.Errorf("raw ping-pong: packet socket (needs CAP_NET_RAW): %w", err)
	}
	// IPv4 protocol byte 23 = UDP, UDP destination port at byte 36 (the
	// frames have no IP options).
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 23},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 3, K: unix.IPPROTO_UDP},
		{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: 36},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: uint32(port)},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0xffff},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0},
	}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
		&unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}); err != nil {
		unix.Close(fd)
		return RawEnd{}, fmt.Errorf("raw ping-pong: socket filter: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifc.Index}); err != nil {
		unix.Close(fd)
		return RawEnd{}, fmt.Errorf("raw ping-pong: bind to %s: %w", link, err)
	}
	e.FD = fd
	return e, nil
}

// rawFrame builds a size-byte UDP/IPv4 frame from a to b (size at least
// 60), its UDP payload zero but for the first byte, tag.
func rawFrame(a, b RawEnd, size int, tag byte) []byte {
	f := make([]byte, size)
	copy(f[0:6], b.MAC[:])
	copy(f[6:12], a.MAC[:])
	binary.BigEndian.PutUint16(f[12:], unix.ETH_P_IP)
	ip := f[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
	src, dst := a.IP.As4(), b.IP.As4()
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := f[34:]
	binary.BigEndian.PutUint16(udp[0:], a.Port)
	binary.BigEndian.PutUint16(udp[2:], b.Port)
	binary.BigEndian.PutUint16(udp[4:], uint16(size-34))
	udp[8] = tag // UDP checksum 0: none, as IPv4 allows
	return f
}

// swapRaw turns a received frame into its answer: MACs, IP addresses and
// UDP ports exchanged (the checksums stay valid).
func swapRaw(f []byte) {
	for _, r := range [][2]int{{0, 6}, {26, 30}, {34, 36}} {
		a, b, n := r[0], r[1], r[1]-r[0]
		for i := 0; i < n; i++ {
			f[a+i], f[b+i] = f[b+i], f[a+i]
		}
	}
}

// RawPingPong measures iters round trips of a size-byte frame (60 bytes
// up to the link's MTU plus 14, without the FCS) from end a, in this
// process, to end b, answered by a peer process with the addresses
// swapped; both busy poll non-blocking packet sockets (recvfrom with
// MSG_DONTWAIT, sendto, without the Go scheduler's system-call hand-off).
// It is the reference for rperf raw-lat: the same frames, over the same
// link, without the engine. b's socket goes to the peer; this function
// closes it.
func RawPingPong(launch Launcher, a, b RawEnd, size, iters int) (reports.Result, error) {
	pf := os.NewFile(uintptr(b.FD), "raw")
	defer pf.Close()
	if size < rawMinLen || size > 9216 {
		return reports.Result{}, fmt.Errorf("raw ping-pong: size %d: must be %d to 9216 bytes (a frame without its FCS)", size, rawMinLen)
	}
	if err := checkCount("raw ping-pong: iterations", iters); err != nil {
		return reports.Result{}, err
	}
	p, err := start(launch, RoleRawPong, pf)
	pf.Close()
	if err != nil {
		return reports.Result{}, fmt.Errorf("raw ping-pong: %w", err)
	}
	res, err := rawPing(p, a, b, size, iters)
	if cerr := p.close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return reports.Result{}, fmt.Errorf("raw ping-pong: %w", err)
	}
	return res, nil
}

func rawPing(p *peer, a, b RawEnd, size, iters int) (reports.Result, error) {
	if err := p.expect("ready", StallTimeout); err != nil {
		return reports.Result{}, err
	}
	rec, err := pings(a.FD, rawFrame(a, b, size, 0), iters)
	if err != nil {
		return reports.Result{}, err
	}
	if e := send(a.FD, rawFrame(a, b, rawMinLen, rawEndTag)); e != 0 {
		return reports.Result{}, fmt.Errorf("send: %w", e)
	}
	if err := p.expect("done", StallTimeout); err != nil {
		return reports.Result{}, err
	}
	return pingPongResult(NameRawPingPong, size, iters, rec)
}

// rawPong answers every frame on fd with its addresses swapped, busy
// polling, until the end frame.
func rawPong(f *os.File, ctl *bufio.Reader, out io.Writer) error {
	return pong("raw pong", f, ctl, out, make([]byte, 9216+1), func(b []byte) (bool, error) {
		if len(b) < rawHdrLen+1 {
			return false, fmt.Errorf("a %d-byte frame passed the filter", len(b))
		}
		if b[rawHdrLen] == rawEndTag {
			return true, nil
		}
		swapRaw(b)
		return false, nil
	})
}
