package netpkt

import (
	"bytes"
	"errors"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/rperf/rperf/verbsio"
)

// Caps is what the matcher steers: every spec but GRE, MPLS and ESP,
// partial masks, tags, drop, DONT_TRAP, sniffer and default rules, any
// priority, 24-bit tags, on a one-port device. Egress rules are not
// steered.
var Caps = verbsio.FlowCaps{
	Features: verbsio.FlowCanETH | verbsio.FlowCanIPv4 | verbsio.FlowCanIPv4Ext | verbsio.FlowCanIPv6 |
		verbsio.FlowCanTCP | verbsio.FlowCanUDP | verbsio.FlowCanVXLAN | verbsio.FlowCanInner |
		verbsio.FlowCanTag | verbsio.FlowCanDrop | verbsio.FlowCanPartialMask | verbsio.FlowCanDontTrap |
		verbsio.FlowCanSniffer | verbsio.FlowCanAllDefault | verbsio.FlowCanMCDefault,
	MaxPriority: 0xffff,
	MaxTag:      1<<24 - 1,
	Ports:       1,
}

// Where a matched byte is read from: the frame at a header's offset, or
// the parsed EtherTypes and VLAN tags (meta).
const (
	srcL2 uint8 = iota
	srcMeta
	srcL3
	srcL4
	srcTun
	srcInL2
	srcInL3
	srcInL4
	srcCount
)

// meta bytes: outer EtherType, outer TCI, inner EtherType, inner TCI.
const (
	metaEType  = 0
	metaVLAN   = 2
	metaIEType = 4
	metaIVLAN  = 6
	metaLen    = 8
)

// maxKey bounds a rule's masked bytes (every field of every spec of one
// rule is 123 bytes at most).
const maxKey = 128

type byteMatch struct{ src, off, mask, val uint8 }

// pattern is a compiled rule: the layers it needs and its masked bytes,
// sorted by (src, off), each with a non-zero mask.
type pattern struct {
	req   uint16
	bytes []byteMatch
}

func (p *pattern) set(src uint8, off int, mask, val uint8) {
	if mask == 0 {
		return
	}
	for i := range p.bytes {
		if b := &p.bytes[i]; b.src == src && b.off == uint8(off) {
			b.mask |= mask
			b.val |= val & mask
			return
		}
	}
	p.bytes = append(p.bytes, byteMatch{src, uint8(off), mask, val & mask})
}

func (p *pattern) setN(src uint8, off int, mask, val []byte) {
	for i := range mask {
		p.set(src, off+i, mask[i], val[i])
	}
}

func (p *pattern) set16(src uint8, off int, mask, val uint16) {
	p.set(src, off, uint8(mask>>8), uint8(val>>8))
	p.set(src, off+1, uint8(mask), uint8(val))
}

// signature names the group of rules with the same layers and masks.
func (p *pattern) signature() string {
	b := make([]byte, 0, 2+3*len(p.bytes))
	b = append(b, byte(p.req>>8), byte(p.req))
	for _, m := range p.bytes {
		b = append(b, m.src, m.off, m.mask)
	}
	return string(b)
}

// compile turns a valid rule's specs into a pattern.
func compile(a *verbsio.FlowAttr) (p pattern, tag uint32, drop bool) {
	for _, s := range a.Specs {
		in := s.SpecType()&verbsio.FlowSpecInner != 0
		l2, l3, l4, meta, sh := srcL2, srcL3, srcL4, uint8(0), uint16(0)
		if in {
			l2, l3, l4, meta, sh = srcInL2, srcInL3, srcInL4, metaIEType, innerShift
			p.req |= HasInnerETH
		}
		switch s := s.(type) {
		case verbsio.FlowETH:
			p.setN(l2, 0, s.Mask.Dst[:], s.Val.Dst[:])
			p.setN(l2, 6, s.Mask.Src[:], s.Val.Src[:])
			p.set16(srcMeta, int(meta)+metaEType, s.Mask.EtherType, s.Val.EtherType)
			p.set16(srcMeta, int(meta)+metaVLAN, s.Mask.VLANTag, s.Val.VLANTag)
			if s.Mask.VLANTag != 0 {
				if in {
					p.req |= HasInnerVLAN
				} else {
					p.req |= HasVLAN
				}
			}
		case verbsio.FlowIPv4:
			p.req |= HasIPv4 << sh
			p.setN(l3, 12, s.Mask.Src[:], s.Val.Src[:])
			p.setN(l3, 16, s.Mask.Dst[:], s.Val.Dst[:])
			p.set(l3, 9, s.Mask.Proto, s.Val.Proto)
			p.set(l3, 1, s.Mask.TOS, s.Val.TOS)
			p.set(l3, 8, s.Mask.TTL, s.Val.TTL)
			p.set(l3, 6, s.Mask.Flags<<5, s.Val.Flags<<5)
		case verbsio.FlowIPv6:
			p.req |= HasIPv6 << sh
			p.setN(l3, 8, s.Mask.Src[:], s.Val.Src[:])
			p.setN(l3, 24, s.Mask.Dst[:], s.Val.Dst[:])
			m, v := s.Mask.FlowLabel, s.Val.FlowLabel
			p.set(l3, 1, uint8(m>>16)&0x0f, uint8(v>>16))
			p.set(l3, 2, uint8(m>>8), uint8(v>>8))
			p.set(l3, 3, uint8(m), uint8(v))
			tm, tv := s.Mask.TrafficClass, s.Val.TrafficClass
			p.set(l3, 0, tm>>4, tv>>4)
			p.set(l3, 1, tm<<4, tv<<4)
			p.set(l3, 6, s.Mask.NextHdr, s.Val.NextHdr)
			p.set(l3, 7, s.Mask.HopLimit, s.Val.HopLimit)
		case verbsio.FlowTCP:
			p.req |= HasTCP << sh
			p.set16(l4, 0, s.Mask.Src, s.Val.Src)
			p.set16(l4, 2, s.Mask.Dst, s.Val.Dst)
		case verbsio.FlowUDP:
			p.req |= HasUDP << sh
			p.set16(l4, 0, s.Mask.Src, s.Val.Src)
			p.set16(l4, 2, s.Mask.Dst, s.Val.Dst)
		case verbsio.FlowVXLAN:
			p.req |= HasVXLAN | HasUDP
			m, v := s.Mask.TunnelID, s.Val.TunnelID
			p.set(srcTun, 4, uint8(m>>16), uint8(v>>16))
			p.set(srcTun, 5, uint8(m>>8), uint8(v>>8))
			p.set(srcTun, 6, uint8(m), uint8(v))
		case verbsio.FlowTag:
			tag = s.Tag
		case verbsio.FlowDrop:
			drop = true
		}
	}
	if p.req&(HasInnerETH|HasInnerVLAN|HasInnerIPv4|HasInnerIPv6|HasInnerTCP|HasInnerUDP) != 0 {
		p.req |= HasVXLAN | HasUDP | HasInnerETH
	}
	slices.SortFunc(p.bytes, func(a, b byteMatch) int {
		return int(a.src)<<8 + int(a.off) - int(b.src)<<8 - int(b.off)
	})
	return p, tag, drop
}

// Rule is an installed steering rule.
type Rule struct {
	Target   uint32 // who gets the frames (the caller's QP handle)
	Tag      uint32 // flow tag for the completion, 0 for none
	Drop     bool
	DontTrap bool
	Type     verbsio.FlowType
	Priority uint16

	g       *group
	key     [maxKey]byte
	removed bool
}

// Hit is one delivery of a matched frame.
type Hit struct {
	Target uint32
	Tag    uint32
}

// Verdict says what steering did with a frame.
type Verdict uint8

// Verdicts of Match.
const (
	Unmatched Verdict = iota // no normal or default rule took it (sniffers may have)
	Steered                  // normal rules delivered it
	Dropped                  // a drop rule took it
	Defaulted                // an ALL_DEFAULT or MC_DEFAULT rule took it
)

// entry holds the rules of one group with one key: they have the same
// priority and match the same frames, and each gets a copy.
type entry struct {
	hash  uint64
	key   [maxKey]byte
	rules []*Rule // creation order; immutable once published
	trap  bool    // some rule traps (not DONT_TRAP), or drops
	drop  bool    // some rule drops
}

var tomb = new(entry) // a removed entry's slot

type slots struct {
	s    []atomic.Pointer[entry]
	mask uint64
}

// group is every rule of one priority with one set of masked bytes
// (hardware's flow group): a hash table from the masked bytes to entries,
// read without locks while writers replace entries atomically.
type group struct {
	prio  uint16
	seq   uint64
	req   uint16
	ext   []byteMatch // val unused
	sig   string
	tab   atomic.Pointer[slots]
	used  int // entries and tombstones (writer side)
	count int // entries
}

type snapshot struct {
	groups     []*group
	sniffers   []*Rule
	allDefault []*Rule
	mcDefault  []*Rule
	rules      int
}

// Table is a port's steering rules. Match runs per frame, allocation
// free and without locks, concurrently with Add and Remove (which
// serialize on a mutex); a rule Remove returned for is in no Match that
// starts afterwards.
type Table struct {
	mu     sync.Mutex
	snap   atomic.Pointer[snapshot]
	bySig  map[string]*group
	seed   maphash.Seed
	groups uint64
}

// NewTable returns an empty table.
func NewTable() *Table {
	t := &Table{bySig: map[string]*group{}, seed: maphash.MakeSeed()}
	t.snap.Store(&snapshot{})
	return t
}

// Len is the number of installed rules.
func (t *Table) Len() int { return t.snap.Load().rules }

// ErrRemoved is returned by Remove for a rule that is not installed.
var ErrRemoved = errors.New("netpkt: the rule is not in the table")

// Add installs a rule delivering to target. The rule is validated against
// Caps (verbsio.FlowAttr.Validate's errors).
func (t *Table) Add(a *verbsio.FlowAttr, target uint32) (*Rule, error) {
	if err := a.Validate(Caps); err != nil {
		return nil, err
	}
	r := &Rule{Target: target, DontTrap: a.Flags&verbsio.FlowDontTrap != 0, Type: a.Type, Priority: a.Priority}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.snap.Load()
	next := *old
	next.rules++
	switch a.Type {
	case verbsio.FlowSniffer:
		next.sniffers = append(slices.Clip(old.sniffers), r)
		t.snap.Store(&next)
		return r, nil
	case verbsio.FlowAllDefault:
		next.allDefault = append(slices.Clip(old.allDefault), r)
		t.snap.Store(&next)
		return r, nil
	case verbsio.FlowMCDefault:
		next.mcDefault = append(slices.Clip(old.mcDefault), r)
		t.snap.Store(&next)
		return r, nil
	}
	p, tag, drop := compile(a)
	r.Tag, r.Drop = tag, drop
	sig := string([]byte{byte(a.Priority >> 8), byte(a.Priority)}) + p.signature()
	g := t.bySig[sig]
	if g == nil {
		t.groups++
		g = &group{prio: a.Priority, seq: t.groups, req: p.req, ext: p.bytes, sig: sig}
		g.tab.Store(&slots{s: make([]atomic.Pointer[entry], 8), mask: 7})
		t.bySig[sig] = g
		next.groups = append(slices.Clip(old.groups), g)
		slices.SortStableFunc(next.groups, func(a, b *group) int {
			if a.prio != b.prio {
				return int(a.prio) - int(b.prio)
			}
			return int(a.seq - b.seq)
		})
	}
	for i, m := range p.bytes {
		r.key[i] = m.val
	}
	r.g = g
	g.insert(t.seed, r)
	t.snap.Store(&next)
	return r, nil
}

// Remove uninstalls r.
func (t *Table) Remove(r *Rule) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r == nil || r.removed {
		return ErrRemoved
	}
	old := t.snap.Load()
	next := *old
	del := func(rs []*Rule) ([]*Rule, bool) {
		i := slices.Index(rs, r)
		if i < 0 {
			return rs, false
		}
		return slices.Delete(slices.Clone(rs), i, i+1), true
	}
	var ok bool
	switch r.Type {
	case verbsio.FlowSniffer:
		next.sniffers, ok = del(old.sniffers)
	case verbsio.FlowAllDefault:
		next.allDefault, ok = del(old.allDefault)
	case verbsio.FlowMCDefault:
		next.mcDefault, ok = del(old.mcDefault)
	default:
		ok = r.g.remove(t.seed, r)
		if ok && r.g.count == 0 {
			delete(t.bySig, r.g.sig)
			next.groups = slices.DeleteFunc(slices.Clone(old.groups), func(g *group) bool { return g == r.g })
		}
	}
	if !ok {
		return ErrRemoved
	}
	r.removed = true
	next.rules--
	t.snap.Store(&next)
	return nil
}

func (g *group) hash(seed maphash.Seed, key []byte) uint64 { return maphash.Bytes(seed, key) }

// find returns the slot index of key's entry, or -1 and the first free
// (nil or tombstone) slot on its probe path.
func (g *group) find(tab *slots, h uint64, key []byte) (at, free int) {
	free = -1
	for i, n := h&tab.mask, uint64(0); n <= tab.mask; i, n = (i+1)&tab.mask, n+1 {
		e := tab.s[i].Load()
		switch {
		case e == nil:
			if free < 0 {
				free = int(i)
			}
			return -1, free
		case e == tomb:
			if free < 0 {
				free = int(i)
			}
		case e.hash == h && bytes.Equal(e.key[:len(key)], key):
			return int(i), free
		}
	}
	return -1, free
}

func newEntry(h uint64, key []byte, rules []*Rule) *entry {
	e := &entry{hash: h, rules: rules}
	copy(e.key[:], key)
	for _, r := range rules {
		e.trap = e.trap || !r.DontTrap || r.Drop
		e.drop = e.drop || r.Drop
	}
	return e
}

func (g *group) insert(seed maphash.Seed, r *Rule) {
	key := r.key[:len(g.ext)]
	h := g.hash(seed, key)
	tab := g.tab.Load()
	if at, _ := g.find(tab, h, key); at >= 0 {
		e := tab.s[at].Load()
		tab.s[at].Store(newEntry(h, key, append(slices.Clip(e.rules), r)))
		return
	}
	if (g.used+1)*4 > len(tab.s)*3 {
		tab = g.rehash(seed, tab)
	}
	_, free := g.find(tab, h, key)
	if tab.s[free].Load() == nil {
		g.used++
	}
	g.count++
	tab.s[free].Store(newEntry(h, key, []*Rule{r}))
}

// rehash publishes a table twice as large when most slots hold entries
// (the same size when tombstones filled it).
func (g *group) rehash(seed maphash.Seed, old *slots) *slots {
	n := len(old.s)
	if (g.count+1)*2 > n {
		n *= 2
	}
	tab := &slots{s: make([]atomic.Pointer[entry], n), mask: uint64(n - 1)}
	for i := range old.s {
		if e := old.s[i].Load(); e != nil && e != tomb {
			for j := e.hash & tab.mask; ; j = (j + 1) & tab.mask {
				if tab.s[j].Load() == nil {
					tab.s[j].Store(e)
					break
				}
			}
		}
	}
	g.used = g.count
	g.tab.Store(tab)
	return tab
}

func (g *group) remove(seed maphash.Seed, r *Rule) bool {
	key := r.key[:len(g.ext)]
	h := g.hash(seed, key)
	tab := g.tab.Load()
	at, _ := g.find(tab, h, key)
	if at < 0 {
		return false
	}
	e := tab.s[at].Load()
	i := slices.Index(e.rules, r)
	if i < 0 {
		return false
	}
	if len(e.rules) == 1 {
		tab.s[at].Store(tomb)
		g.count--
		return true
	}
	tab.s[at].Store(newEntry(h, key, slices.Delete(slices.Clone(e.rules), i, i+1)))
	return true
}

// Match steers one received frame (tag: the VLAN tag the kernel took out
// of it, if any): it writes the deliveries into hits and returns how many
// and what happened. Sniffer rules get every frame, dropped ones too.
// Normal rules are tried by priority (lowest value first), group by group
// within a priority (a group is the rules with one set of masked fields,
// in the order the groups were first created); every rule of the first
// matching entry gets the frame, and matching stops there unless all of
// them are DONT_TRAP rules. A drop rule in the entry drops it for all. A
// frame no normal rule took goes to the MC_DEFAULT rules if it is
// multicast and there are some, else to the ALL_DEFAULT rules. A target
// is delivered to once (with the first tag that reached it); deliveries
// beyond len(hits) are not reported. Match does not allocate.
func (t *Table) Match(frame []byte, tag Tag, hits []Hit) (int, Verdict) {
	s := t.snap.Load()
	n := 0
	for _, r := range s.sniffers {
		n = addHit(hits, n, r.Target, 0)
	}
	if len(frame) < EthLen {
		return n, Unmatched
	}
	var l Layers
	Parse(frame, tag, &l)
	var meta [metaLen]byte
	meta[metaEType], meta[metaEType+1] = byte(l.EtherType>>8), byte(l.EtherType)
	meta[metaVLAN], meta[metaVLAN+1] = byte(l.VLAN>>8), byte(l.VLAN)
	meta[metaIEType], meta[metaIEType+1] = byte(l.InnerEtherType>>8), byte(l.InnerEtherType)
	meta[metaIVLAN], meta[metaIVLAN+1] = byte(l.InnerVLAN>>8), byte(l.InnerVLAN)
	base := [srcCount]int{srcL3: int(l.L3), srcL4: int(l.L4), srcTun: int(l.Tunnel), srcInL2: int(l.InnerL2), srcInL3: int(l.InnerL3), srcInL4: int(l.InnerL4)}
	var key [maxKey]byte
	steered := false
	for _, g := range s.groups {
		if l.Has&g.req != g.req {
			continue
		}
		for j, e := range g.ext {
			var b byte
			if e.src == srcMeta {
				b = meta[e.off]
			} else {
				b = frame[base[e.src]+int(e.off)]
			}
			key[j] = b & e.mask
		}
		k := key[:len(g.ext)]
		tab := g.tab.Load()
		h := maphash.Bytes(t.seed, k)
		var e *entry
		for i, c := h&tab.mask, uint64(0); c <= tab.mask; i, c = (i+1)&tab.mask, c+1 {
			x := tab.s[i].Load()
			if x == nil {
				break
			}
			if x != tomb && x.hash == h && bytes.Equal(x.key[:len(k)], k) {
				e = x
				break
			}
		}
		if e == nil {
			continue
		}
		if e.drop {
			return n, Dropped
		}
		steered = true
		for _, r := range e.rules {
			n = addHit(hits, n, r.Target, r.Tag)
		}
		if e.trap {
			return n, Steered
		}
	}
	if steered {
		return n, Steered
	}
	def := s.allDefault
	if frame[0]&1 != 0 && len(s.mcDefault) > 0 {
		def = s.mcDefault
	}
	if len(def) == 0 {
		return n, Unmatched
	}
	for _, r := range def {
		n = addHit(hits, n, r.Target, 0)
	}
	return n, Defaulted
}

func addHit(hits []Hit, n int, target, tag uint32) int {
	for i := range hits[:min(n, len(hits))] {
		if hits[i].Target == target {
			return n
		}
	}
	if n < len(hits) {
		hits[n] = Hit{Target: target, Tag: tag}
		return n + 1
	}
	return n
}
