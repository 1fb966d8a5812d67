// Command udphop measures one hop of a busy-polling UDP ping-pong between
// two processes on loopback in the ways the udp fabric could send and
// receive, to tell the kernel's share of an engine hop from the engine's
// (docs/baseline.md, "The udp fabric against the machine"). It is not part
// of the build (a directory starting with _); run it with
//
//	go build -o /tmp/udphop ./docs/_udphop && /tmp/udphop VARIANT
//
// VARIANT is a string of letters:
//
//	c  connect the sockets (no destination address per send)
//	m  send with sendmmsg (default: sendto)
//	g  send an 80-byte packet and a 20-byte one as one UDP GSO send
//	   (segment size 80), as the engine sends a SEND and its ACK
//	1  with g: from one buffer (default: two)
//	d  send the two packets as two datagrams of one sendmmsg
//	r  receive with recvmmsg (default: recvfrom)
//	6  with r: offer 64 slots (default: 1)
//	G  enable UDP_GRO on the receiving sockets
//	R  raw system calls (default: Go's Syscall)
//
// "c" is rperf baseline's ping-pong; "gr6G" was the engine's SEND+ACK hop
// before one-slot receives. It prints the one-way p50 (half the round
// trip), the p50 of the send call and of the receive call that returned
// data, and the datagrams per receive loop, over 20000 round trips after
// 1000 not measured.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var base = time.Now()

func now() int64 { return int64(time.Since(base)) }

type cfg struct {
	connected bool // sendto without address
	mmsgSend  bool
	two       bool // two datagrams in one sendmmsg
	oneIov    bool // GSO from one buffer
	gso       bool // send 80+20 as GSO
	mmsgRecv  bool
	gro       bool
	slots     int
	raw       bool
}

func sock(port int) int {
	fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, 0)
	unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port})
	return fd
}

func sc(raw bool, tr, a1, a2, a3, a4, a5, a6 uintptr) (uintptr, unix.Errno) {
	if raw {
		r, _, e := unix.RawSyscall6(tr, a1, a2, a3, a4, a5, a6)
		return r, e
	}
	r, _, e := unix.Syscall6(tr, a1, a2, a3, a4, a5, a6)
	return r, e
}

type ep struct {
	c     cfg
	fd    int
	peer  unix.RawSockaddrInet4
	pkt   []byte
	ack   []byte
	shdr  [2]unix.Mmsghdr
	siov  [2]unix.Iovec
	scm   [24]byte
	rbuf  []byte
	rhdr  []unix.Mmsghdr
	riov  []unix.Iovec
	rname []unix.RawSockaddrInet6
	rcm   [][24]byte
}

func newEP(c cfg, fd, peerPort int) *ep {
	e := &ep{c: c, fd: fd, pkt: make([]byte, 100), ack: make([]byte, 20)}
	e.peer = unix.RawSockaddrInet4{Family: unix.AF_INET, Port: uint16(peerPort>>8 | (peerPort&0xff)<<8), Addr: [4]byte{127, 0, 0, 1}}
	if c.connected {
		unix.Connect(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: peerPort})
	}
	if c.gro {
		unix.SetsockoptInt(fd, unix.IPPROTO_UDP, 104, 1)
	}
	slot := 9216
	if c.gro {
		slot = 65535
	}
	e.rbuf = make([]byte, c.slots*slot)
	e.rhdr = make([]unix.Mmsghdr, c.slots)
	e.riov = make([]unix.Iovec, c.slots)
	e.rname = make([]unix.RawSockaddrInet6, c.slots)
	e.rcm = make([][24]byte, c.slots)
	for i := range e.rhdr {
		e.riov[i].Base = &e.rbuf[i*slot]
		e.riov[i].SetLen(slot)
		h := &e.rhdr[i].Hdr
		h.Iov = &e.riov[i]
		h.SetIovlen(1)
		h.Name = (*byte)(unsafe.Pointer(&e.rname[i]))
		h.Namelen = unix.SizeofSockaddrInet6
		if c.gro {
			h.Control = &e.rcm[i][0]
			h.SetControllen(24)
		}
	}
	return e
}

func (e *ep) send() {
	if !e.c.mmsgSend {
		var name, nlen uintptr
		if !e.c.connected {
			name, nlen = uintptr(unsafe.Pointer(&e.peer)), unix.SizeofSockaddrInet4
		}
		sc(e.c.raw, unix.SYS_SENDTO, uintptr(e.fd), uintptr(unsafe.Pointer(&e.pkt[0])), 80, 0, name, nlen)
		return
	}
	h := &e.shdr[0].Hdr
	if !e.c.connected {
		h.Name = (*byte)(unsafe.Pointer(&e.peer))
		h.Namelen = unix.SizeofSockaddrInet4
	}
	e.siov[0].Base = &e.pkt[0]
	e.siov[0].SetLen(80)
	h.Iov = &e.siov[0]
	h.SetIovlen(1)
	if e.c.gso {
		e.siov[1].Base = &e.ack[0]
		e.siov[1].SetLen(20)
		h.SetIovlen(2)
		if e.c.oneIov {
			e.siov[0].SetLen(100)
			h.SetIovlen(1)
		}
		ch := (*unix.Cmsghdr)(unsafe.Pointer(&e.scm[0]))
		ch.Level = unix.SOL_UDP
		ch.Type = 103
		ch.SetLen(unix.CmsgLen(2))
		*(*uint16)(unsafe.Pointer(&e.scm[unix.CmsgLen(0)])) = 80
		h.Control = &e.scm[0]
		h.SetControllen(24)
	}
	k := 1
	if e.c.two {
		h2 := &e.shdr[1].Hdr
		*h2 = *h
		e.siov[1].Base = &e.ack[0]
		e.siov[1].SetLen(20)
		h2.Iov = &e.siov[1]
		k = 2
	}
	sc(e.c.raw, unix.SYS_SENDMMSG, uintptr(e.fd), uintptr(unsafe.Pointer(&e.shdr[0])), uintptr(k), 0, 0, 0)
}

var got int

func (e *ep) recv() bool {
	if !e.c.mmsgRecv {
		r, er := sc(e.c.raw, unix.SYS_RECVFROM, uintptr(e.fd), uintptr(unsafe.Pointer(&e.rbuf[0])), 65535, unix.MSG_DONTWAIT, 0, 0)
		if er == 0 {
			got++
		}
		return er == 0 && r >= 80
	}
	n, er := sc(e.c.raw, unix.SYS_RECVMMSG, uintptr(e.fd), uintptr(unsafe.Pointer(&e.rhdr[0])), uintptr(e.c.slots), unix.MSG_DONTWAIT, 0, 0)
	if er != 0 {
		return false
	}
	got += int(n)
	ok := false
	for i := 0; i < int(n); i++ {
		if e.rhdr[i].Len >= 80 {
			ok = true
		}
		e.rhdr[i].Hdr.Namelen = unix.SizeofSockaddrInet6
		if e.c.gro {
			e.rhdr[i].Hdr.SetControllen(24)
		}
	}
	return ok
}

func p50(v []int64) int64 {
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	return v[len(v)/2]
}

func parse(s string) cfg {
	c := cfg{slots: 1}
	for _, ch := range s {
		switch ch {
		case 'c':
			c.connected = true
		case 'm':
			c.mmsgSend = true
		case 'g':
			c.gso, c.mmsgSend = true, true
		case 'r':
			c.mmsgRecv = true
		case 'G':
			c.gro = true
		case '6':
			c.slots = 64
		case 'R':
			c.raw = true
		case '1':
			c.oneIov = true
		case 'd':
			c.two, c.mmsgSend = true, true
		}
	}
	return c
}

func main() {
	iters := 20000
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: udphop VARIANT (letters c m g 1 d r 6 G R; see the package doc)")
		os.Exit(2)
	}
	if os.Args[1] == "pong" {
		c := parse(os.Args[2])
		fd, _ := strconv.Atoi(os.Args[3])
		pp, _ := strconv.Atoi(os.Args[4])
		e := newEP(c, fd, pp)
		for i := 0; i < iters+1000; i++ {
			for !e.recv() {
			}
			e.send()
		}
		return
	}
	c := parse(os.Args[1])
	a, b := sock(0), sock(0)
	sa, _ := unix.Getsockname(a)
	sb, _ := unix.Getsockname(b)
	pa, pb := sa.(*unix.SockaddrInet4).Port, sb.(*unix.SockaddrInet4).Port
	f := os.NewFile(uintptr(b), "b")
	cmd := exec.Command(os.Args[0], "pong", os.Args[1], "3", strconv.Itoa(pa))
	cmd.ExtraFiles = []*os.File{f}
	cmd.Stderr = os.Stderr
	cmd.Start()
	e := newEP(c, a, pb)
	var rtt, sd, rd []int64
	for i := 0; i < iters+1000; i++ {
		t0 := now()
		e.send()
		t1 := now()
		var t2 int64
		for {
			t2 = now()
			if e.recv() {
				break
			}
		}
		t3 := now()
		if i >= 1000 {
			rtt = append(rtt, t3-t0)
			sd = append(sd, t1-t0)
			rd = append(rd, t3-t2)
		}
	}
	cmd.Wait()
	fmt.Printf("%-8s one-way p50 %5d ns  send p50 %5d  recv(data) p50 %5d %s %.2f\n", os.Args[1], p50(rtt)/2, p50(sd), p50(rd), "datagrams/recv-loop", float64(got)/float64(iters+1000))
}
