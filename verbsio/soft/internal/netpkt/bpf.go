package netpkt

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Classic BPF ancillary loads (linux/filter.h): the kernel keeps a
// received frame's outer VLAN tag beside the frame, not in it.
const (
	skfAdOff            = 0xfffff000 // SKF_AD_OFF, -0x1000
	skfAdVLANTag        = 44         // SKF_AD_VLAN_TAG
	skfAdVLANTagPresent = 48         // SKF_AD_VLAN_TAG_PRESENT
)

// Scratch memory words of the filter program.
const (
	mHas = iota
	mEType
	mVLAN
	mIEType
	mIVLAN
	mL3
	mL4
	mTun
	mInL2
	mInL3
	mInL4
	mTmp
	mWords
)

// slot of each byte source's offset (srcL2 is 0, srcMeta is not an offset).
var srcSlot = [srcCount]uint32{srcL3: mL3, srcL4: mL4, srcTun: mTun, srcInL2: mInL2, srcInL3: mInL3, srcInL4: mInL4}

// FilterMode says how precisely a socket filter follows the rules.
type FilterMode uint8

// Filter modes, from precise to none.
const (
	FilterExact  FilterMode = iota // accepts exactly the frames some non-drop rule matches
	FilterLayers                   // the rules were too many: accepts frames with the headers some rule needs
	FilterAll                      // accepts every frame (a sniffer or ALL_DEFAULT rule, or too many rule kinds)
)

// String returns "exact", "layers" or "all".
func (m FilterMode) String() string {
	return [...]string{"exact", "layers", "all"}[m]
}

// acceptAll is the filter of FilterAll.
var acceptAll = []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0xffffffff}}

// Filter compiles the union of the installed rules into a classic BPF
// socket filter (SO_ATTACH_FILTER) that passes every frame some rule may
// deliver and drops the rest in the kernel: an exact program while it fits
// in BPF_MAXINSNS instructions, else one that tests only the headers each
// group of rules needs, else one that passes everything. Drop rules add
// nothing (a frame they take is not wanted; a frame they shadow is passed
// and dropped by Match). A table with no rules drops everything.
func (t *Table) Filter() ([]unix.SockFilter, FilterMode) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.snap.Load()
	if len(s.sniffers) > 0 || len(s.allDefault) > 0 {
		return acceptAll, FilterAll
	}
	for _, mode := range []FilterMode{FilterExact, FilterLayers} {
		if mode == FilterExact && exactSize(s) > unix.BPF_MAXINSNS {
			continue // known too big without compiling it
		}
		if prog, err := compileFilter(s, mode); err == nil && len(prog) <= unix.BPF_MAXINSNS {
			return prog, mode
		}
	}
	return acceptAll, FilterAll
}

// exactSize is the length of the exact program's rule checks: an entry's
// check has the same length for every key of its group.
func exactSize(s *snapshot) int {
	n := 0
	var zero [maxKey]byte
	for _, g := range s.groups {
		var a asm
		a.check(g, zero[:len(g.ext)])
		n += len(a.ins) * g.count
	}
	return n
}

type label int

const next label = -1 // the following instruction

type jref struct {
	at     int
	l      label
	isJF   bool
	isLong bool
}

// asm assembles classic BPF with forward labels.
type asm struct {
	ins    []unix.SockFilter
	labels []int
	refs   []jref
}

func (a *asm) label() label { a.labels = append(a.labels, -1); return label(len(a.labels) - 1) }

func (a *asm) mark(l label) { a.labels[l] = len(a.ins) }

func (a *asm) op(code uint16, k uint32) { a.ins = append(a.ins, unix.SockFilter{Code: code, K: k}) }

// jmp is a conditional jump to jt or jf (next: fall through); targets
// must be within 255 instructions.
func (a *asm) jmp(code uint16, k uint32, jt, jf label) {
	at := len(a.ins)
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_JMP | code, K: k})
	if jt != next {
		a.refs = append(a.refs, jref{at: at, l: jt})
	}
	if jf != next {
		a.refs = append(a.refs, jref{at: at, l: jf, isJF: true})
	}
}

// ja jumps to l, however far.
func (a *asm) ja(l label) {
	a.refs = append(a.refs, jref{at: len(a.ins), l: l, isLong: true})
	a.op(unix.BPF_JMP|unix.BPF_JA, 0)
}

// unless goes on when the condition holds, else jumps far to fail.
func (a *asm) unless(code uint16, k uint32, fail label) {
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_JMP | code, K: k, Jt: 1})
	a.ja(fail)
}

func (a *asm) link() ([]unix.SockFilter, error) {
	for _, r := range a.refs {
		to := a.labels[r.l]
		if to < 0 {
			return nil, fmt.Errorf("netpkt: bpf: label %d not placed", r.l)
		}
		d := to - r.at - 1
		switch {
		case d < 0:
			return nil, fmt.Errorf("netpkt: bpf: backward jump at %d", r.at)
		case r.isLong:
			a.ins[r.at].K = uint32(d)
		case d > 255:
			return nil, fmt.Errorf("netpkt: bpf: jump of %d at %d", d, r.at)
		case r.isJF:
			a.ins[r.at].Jf = uint8(d)
		default:
			a.ins[r.at].Jt = uint8(d)
		}
	}
	return a.ins, nil
}

// Shorthands.
func (a *asm) ldImm(k uint32)            { a.op(unix.BPF_LD|unix.BPF_IMM, k) }
func (a *asm) ldMem(m uint32)            { a.op(unix.BPF_LD|unix.BPF_MEM, m) }
func (a *asm) st(m uint32)               { a.op(unix.BPF_ST, m) }
func (a *asm) ldxMem(m uint32)           { a.op(unix.BPF_LDX|unix.BPF_MEM, m) }
func (a *asm) ldLen()                    { a.op(unix.BPF_LD|unix.BPF_W|unix.BPF_LEN, 0) }
func (a *asm) tax()                      { a.op(unix.BPF_MISC|unix.BPF_TAX, 0) }
func (a *asm) alu(op uint16, k uint32)   { a.op(unix.BPF_ALU|op|unix.BPF_K, k) }
func (a *asm) ind(size uint16, k uint32) { a.op(unix.BPF_LD|size|unix.BPF_IND, k) }

// setHas ors bits into the presence word.
func (a *asm) setHas(bits uint16) {
	a.ldMem(mHas)
	a.alu(unix.BPF_OR, uint32(bits))
	a.st(mHas)
}

// fits goes on when M[slot]+n <= frame length, else jumps to fail.
func (a *asm) fits(slot, n uint32, fail label) {
	a.ldMem(slot)
	a.alu(unix.BPF_ADD, n)
	a.tax()
	a.ldLen()
	a.unless(unix.BPF_JGE|unix.BPF_X, 0, fail)
}

// ethTags parses up to two tags after an Ethernet header whose EtherType
// field is at M[mTmp]-2 and already in A, as parseEth does; it leaves the
// EtherType after them in M[etSlot] and the next offset in M[mTmp].
func (a *asm) ethTags(etSlot, vlanSlot uint32, hasVLAN uint16) {
	done := a.label()
	for range 2 {
		tagged, skip := a.label(), a.label()
		a.jmp(unix.BPF_JEQ|unix.BPF_K, EtherTypeVLAN, tagged, next)
		a.jmp(unix.BPF_JEQ|unix.BPF_K, EtherTypeQinQ, tagged, next)
		a.st(etSlot)
		a.ja(done)
		a.mark(tagged)
		a.st(etSlot)
		a.fits(mTmp, VLANLen, done)
		a.ldMem(mHas)
		a.jmp(unix.BPF_JSET|unix.BPF_K, uint32(hasVLAN), skip, next)
		a.ldxMem(mTmp)
		a.ind(unix.BPF_H, 0)
		a.st(vlanSlot)
		a.setHas(hasVLAN)
		a.mark(skip)
		a.ldxMem(mTmp)
		a.ind(unix.BPF_H, 2)
		a.st(etSlot)
		a.ldMem(mTmp)
		a.alu(unix.BPF_ADD, VLANLen)
		a.st(mTmp)
		a.ldMem(etSlot)
	}
	a.st(etSlot)
	a.mark(done)
}

// l3 parses the IP and transport headers as parseL3 does, the EtherType in
// M[etSlot], the IP header at M[l3]; sh shifts the presence bits (inner).
// For the outer headers (vxlan true) it goes on into VXLAN.
func (a *asm) l3(etSlot, l3, l4 uint32, sh uint16, vxlan bool, done label) {
	v4, v6, proto := a.label(), a.label(), a.label()
	a.ldMem(etSlot)
	a.jmp(unix.BPF_JEQ|unix.BPF_K, EtherTypeIPv4, v4, next)
	a.jmp(unix.BPF_JEQ|unix.BPF_K, EtherTypeIPv6, v6, next)
	a.ja(done)

	a.mark(v4)
	a.fits(l3, IPv4Len, done)
	a.ldxMem(l3)
	a.ind(unix.BPF_B, 0)
	a.alu(unix.BPF_RSH, 4)
	a.unless(unix.BPF_JEQ|unix.BPF_K, 4, done)
	a.ind(unix.BPF_B, 0)
	a.alu(unix.BPF_AND, 0x0f)
	a.alu(unix.BPF_LSH, 2)
	a.unless(unix.BPF_JGE|unix.BPF_K, IPv4Len, done)
	a.op(unix.BPF_ALU|unix.BPF_ADD|unix.BPF_X, 0)
	a.st(l4)
	a.tax()
	a.ldLen()
	a.unless(unix.BPF_JGE|unix.BPF_X, 0, done)
	a.setHas(HasIPv4 << sh)
	a.ldxMem(l3)
	a.ind(unix.BPF_H, 6)
	notFrag := a.label()
	a.jmp(unix.BPF_JSET|unix.BPF_K, 0x1fff, next, notFrag)
	if sh == 0 {
		a.setHas(HasFragment)
	}
	a.ja(done)
	a.mark(notFrag)
	a.ind(unix.BPF_B, 9)
	a.ja(proto)

	a.mark(v6)
	a.fits(l3, IPv6Len, done)
	a.ldxMem(l3)
	a.ind(unix.BPF_B, 0)
	a.alu(unix.BPF_RSH, 4)
	a.unless(unix.BPF_JEQ|unix.BPF_K, 6, done)
	a.ldMem(l3)
	a.alu(unix.BPF_ADD, IPv6Len)
	a.st(l4)
	a.setHas(HasIPv6 << sh)
	a.ldxMem(l3)
	a.ind(unix.BPF_B, 6)

	a.mark(proto)
	tcp, udp := a.label(), a.label()
	a.jmp(unix.BPF_JEQ|unix.BPF_K, ProtoTCP, tcp, next)
	a.jmp(unix.BPF_JEQ|unix.BPF_K, ProtoUDP, udp, next)
	a.ja(done)

	a.mark(tcp)
	a.fits(l4, TCPLen, done)
	a.ldxMem(l4)
	a.ind(unix.BPF_B, 12)
	a.alu(unix.BPF_RSH, 4)
	a.alu(unix.BPF_LSH, 2)
	a.unless(unix.BPF_JGE|unix.BPF_K, TCPLen, done)
	a.op(unix.BPF_ALU|unix.BPF_ADD|unix.BPF_X, 0)
	a.tax()
	a.ldLen()
	a.unless(unix.BPF_JGE|unix.BPF_X, 0, done)
	a.setHas(HasTCP << sh)
	a.ja(done)

	a.mark(udp)
	a.fits(l4, UDPLen, done)
	a.setHas(HasUDP << sh)
	if !vxlan {
		a.ja(done)
		return
	}
	a.ldxMem(l4)
	a.ind(unix.BPF_H, 2)
	a.unless(unix.BPF_JEQ|unix.BPF_K, VXLANPort, done)
	a.fits(l4, UDPLen+VXLANLen+EthLen, done)
	a.ldxMem(l4)
	a.ind(unix.BPF_B, UDPLen)
	a.unless(unix.BPF_JSET|unix.BPF_K, 0x08, done)
	a.setHas(HasVXLAN | HasInnerETH)
	a.ldMem(l4)
	a.alu(unix.BPF_ADD, UDPLen)
	a.st(mTun)
	a.alu(unix.BPF_ADD, VXLANLen)
	a.st(mInL2)
	a.alu(unix.BPF_ADD, EthLen)
	a.st(mTmp)
	a.ldxMem(mInL2)
	a.ind(unix.BPF_H, 12)
	a.ethTags(mIEType, mIVLAN, HasInnerVLAN)
	a.ldMem(mTmp)
	a.st(mInL3)
	a.l3(mIEType, mInL3, mInL4, innerShift, false, done)
}

// metaSlot maps a meta byte offset to its scratch word.
var metaSlot = [metaLen / 2]uint32{mEType, mVLAN, mIEType, mIVLAN}

// compileFilter writes the program: parse, then one check per entry (or
// per group, in FilterLayers mode), accepting on the first that matches.
func compileFilter(s *snapshot, mode FilterMode) ([]unix.SockFilter, error) {
	var a asm
	a.ldImm(0)
	for m := uint32(0); m < mWords; m++ {
		a.st(m)
	}
	rules := a.label()
	a.ldLen()
	reject := a.label()
	a.unless(unix.BPF_JGE|unix.BPF_K, EthLen, reject)
	noTag := a.label()
	a.op(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, skfAdOff+skfAdVLANTagPresent)
	a.jmp(unix.BPF_JEQ|unix.BPF_K, 0, noTag, next)
	a.op(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, skfAdOff+skfAdVLANTag)
	a.st(mVLAN)
	a.setHas(HasVLAN)
	a.mark(noTag)
	a.ldImm(EthLen)
	a.st(mTmp)
	a.op(unix.BPF_LD|unix.BPF_H|unix.BPF_ABS, 12)
	a.ethTags(mEType, mVLAN, HasVLAN)
	a.ldMem(mTmp)
	a.st(mL3)
	a.l3(mEType, mL3, mL4, 0, true, rules)
	a.mark(rules)

	for _, g := range s.groups {
		tab := g.tab.Load()
		if mode == FilterLayers {
			for i := range tab.s {
				if e := tab.s[i].Load(); e != nil && e != tomb && !e.drop {
					a.check(g, nil)
					break
				}
			}
			continue
		}
		for i := range tab.s {
			if e := tab.s[i].Load(); e != nil && e != tomb && !e.drop {
				a.check(g, e.key[:len(g.ext)])
			}
		}
		if len(a.ins) > unix.BPF_MAXINSNS {
			return nil, fmt.Errorf("netpkt: bpf: more than %d instructions", unix.BPF_MAXINSNS)
		}
	}
	if len(s.mcDefault) > 0 {
		a.op(unix.BPF_LD|unix.BPF_B|unix.BPF_ABS, 0)
		skip := a.label()
		a.jmp(unix.BPF_JSET|unix.BPF_K, 1, next, skip)
		a.op(unix.BPF_RET|unix.BPF_K, 0xffffffff)
		a.mark(skip)
	}
	a.mark(reject)
	a.op(unix.BPF_RET|unix.BPF_K, 0)
	return a.link()
}

// check accepts the frame when it has g's layers and (key non-nil) its
// masked bytes equal key.
func (a *asm) check(g *group, key []byte) {
	fail := a.label()
	if g.req != 0 {
		a.ldMem(mHas)
		a.alu(unix.BPF_AND, uint32(g.req))
		a.jmp(unix.BPF_JEQ|unix.BPF_K, uint32(g.req), next, fail)
	}
	for i := 0; key != nil && i < len(g.ext); {
		e := g.ext[i]
		// A run of up to 4 bytes at consecutive offsets of one source (2
		// for meta words, which hold 16-bit values).
		n := 1
		maxRun := 4
		if e.src == srcMeta {
			maxRun = 2 - int(e.off)%2
		}
		for n < maxRun && i+n < len(g.ext) && g.ext[i+n].src == e.src && g.ext[i+n].off == e.off+uint8(n) {
			n++
		}
		if n == 3 {
			n = 2
		}
		var mask, val uint32
		for j := range n {
			mask = mask<<8 | uint32(g.ext[i+j].mask)
			val = val<<8 | uint32(key[i+j])
		}
		full := uint32(1)<<(8*n) - 1
		switch {
		case e.src == srcMeta:
			a.ldMem(metaSlot[e.off/2])
			if e.off%2 == 0 && n == 1 { // the high byte of the word
				a.alu(unix.BPF_RSH, 8)
			}
			full = 0xffffffff // the word is wider than the run
		case e.src == srcL2:
			a.op(unix.BPF_LD|sizeOf(n)|unix.BPF_ABS, uint32(e.off))
		default:
			a.ldxMem(srcSlot[e.src])
			a.ind(sizeOf(n), uint32(e.off))
		}
		if mask != full {
			a.alu(unix.BPF_AND, mask)
		}
		a.jmp(unix.BPF_JEQ|unix.BPF_K, val, next, fail)
		i += n
	}
	a.op(unix.BPF_RET|unix.BPF_K, 0xffffffff)
	a.mark(fail)
}

func sizeOf(n int) uint16 {
	switch n {
	case 4:
		return unix.BPF_W
	case 2:
		return unix.BPF_H
	}
	return unix.BPF_B
}
