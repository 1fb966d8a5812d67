package oob

import (
	"fmt"
	"strings"
)

// This file describes, program by program and release by release, the
// out-of-band sequence perftest runs: every exchange on the TCP connection,
// in order, with the local steps (connecting the QPs, running one message
// size) placed between them, so that a driver can mirror a given perftest
// program exactly and a test can check a capture against it. The facts come
// from reading linux-rdma/perftest's main() of each program
// (src/{send,write,read,atomic}_{lat,bw}.c) and src/perftest_communication.c
// at the two releases below; docs/perftest-exchange.md has the same as
// tables naming the perftest functions involved.

// Program is one of perftest's eight test programs, named as its binary.
type Program string

// perftest's eight test programs.
const (
	SendLat   Program = "ib_send_lat"
	WriteLat  Program = "ib_write_lat"
	ReadLat   Program = "ib_read_lat"
	AtomicLat Program = "ib_atomic_lat"
	SendBW    Program = "ib_send_bw"
	WriteBW   Program = "ib_write_bw"
	ReadBW    Program = "ib_read_bw"
	AtomicBW  Program = "ib_atomic_bw"
)

// Programs lists the eight programs: the latency ones, then the bandwidth
// ones, each in the order send, write, read, atomic.
var Programs = []Program{SendLat, WriteLat, ReadLat, AtomicLat, SendBW, WriteBW, ReadBW, AtomicBW}

// ProgramFor returns the program of an rperf test command ("write-lat")
// or of a perftest binary name ("ib_write_lat").
func ProgramFor(name string) (Program, bool) {
	n := strings.ReplaceAll(strings.TrimPrefix(name, "ib_"), "-", "_")
	for _, p := range Programs {
		if string(p) == "ib_"+n {
			return p, true
		}
	}
	return "", false
}

// Latency reports whether p is a latency program.
func (p Program) Latency() bool { return strings.HasSuffix(string(p), "_lat") }

// Verb returns the operation p measures: "send", "write", "read" or
// "atomic".
func (p Program) Verb() string {
	v := strings.TrimPrefix(string(p), "ib_")
	return v[:strings.IndexByte(v, '_')]
}

// Release is a perftest release whose exchange this package describes.
type Release struct {
	// Name says where the release comes from.
	Name string
	// Source is the git tag or commit of linux-rdma/perftest read for it.
	Source string
	// Version is the string it announces in the version exchange
	// (configure.ac's AC_INIT version).
	Version string
}

// The releases described. A peer is matched to a release by the version
// it announces (ReleaseFor).
var (
	// Perftest45 is Debian 12's perftest 4.5+0.17.
	Perftest45 = Release{Name: "perftest 4.5+0.17 (Debian 12)", Source: "v4.5-0.17", Version: "6.06"}
	// PerftestUpstream is linux-rdma/perftest's main branch as read for
	// this description.
	PerftestUpstream = Release{Name: "perftest upstream", Source: "00b55b6 (main, 2026-07-27)", Version: "6.29"}
)

// Releases lists the described releases, oldest first.
var Releases = []Release{Perftest45, PerftestUpstream}

// Version thresholds of the sequence, beyond the handshake's (version.go).
const (
	// doneRemovedVersion is the first version whose ctx_close_connection()
	// no longer writes "done\0" after the closing key exchange (commit
	// dbf395e, "Fix race in non-rdmacm ctx_close_connection()"; 6.16 still
	// writes it, 6.17 does not).
	doneRemovedVersion = 6.17
	// duplexSecondBarrierVersion: write_bw and read_bw with -a -b do a
	// second barrier after each size when their own version is at least
	// this (every release described here).
	duplexSecondBarrierVersion = 4.6
	// mtuExchangeVersion: check_mtu() exchanges the MTU with peers from
	// this version on.
	mtuExchangeVersion = 5.1
)

// NegotiateSize is the size of upstream perftest's parameter negotiation
// message (struct perftest_parameters_negotiate on x86-64) when perftest
// was built with mlx5dv, as Debian 12's libibverbs-dev allows; a build
// without mlx5dv sends 312 bytes. rperf never takes part in it: it
// announces Version, below 6.28.
const NegotiateSize = 320

// ReleaseFor returns the described release whose sequence a peer that
// announced version v runs: the newest release not newer than v, or the
// oldest one for older peers (which rperf refuses anyway, below 5.70).
func ReleaseFor(v string) Release {
	r := Releases[0]
	for _, c := range Releases {
		if atof(c.Version) <= atof(v) {
			r = c
		}
	}
	return r
}

// ServerDisconnectsFirst reports whether perftest that announced version
// v, at the end of an rdma_cm (-R) run, has its server disconnect the test
// QPs' connections while the client waits for that before it closes
// anything (upstream's rdma_cm_disconnect_nodes, 6.29); 4.5's (6.06)
// client disconnects them itself. A server facing such a client must
// send its DREQs first.
func ServerDisconnectsFirst(v string) bool { return ReleaseFor(v) != Perftest45 }

// ConnType is a connection type as perftest's -c spells it.
type ConnType string

// The connection types rperf runs.
const (
	RC ConnType = "RC"
	UC ConnType = "UC"
	UD ConnType = "UD"
)

// SequenceOptions are the flags and circumstances that change a program's
// sequence.
type SequenceOptions struct {
	// Server is set for the side started without a host (it listens).
	Server bool
	// PeerVersion is the version string the peer announces; "" means the
	// release's own (a perftest against the same perftest).
	PeerVersion string
	// NoVersionExchange is perftest's --dont_xchg_versions: no version,
	// sys-data or MTU exchange (and no negotiation).
	NoVersionExchange bool
	// QPs is -q (bandwidth programs); 0 means 1.
	QPs int
	// All is -a: every size AllSizes gives, one run each.
	All bool
	// Size is -s, the one message size without -a (0: perftest's default).
	Size uint64
	// Sizes, when set, are the sizes run, in order, instead of Size or
	// AllSizes' list (a peer mirroring perftest with its own -a limits);
	// All still says whether -a's per-size steps apply.
	Sizes []uint64
	// MTU is the MTU both sides agreed on; it bounds -a over UD. 0 means
	// 1024 bytes (MTU1024).
	MTU MTU
	// Duplex is -b (bandwidth programs).
	Duplex bool
	// Duration is -D: one timed run instead of -n iterations.
	Duration bool
	// Conn is -c; "" means RC.
	Conn ConnType
	// NoGID selects the 59-byte key message: an InfiniBand port without
	// -x (perftest then leaves gid_index at -1). On an Ethernet (RoCE)
	// port perftest always uses a GID, so the key is 108 bytes.
	NoGID bool
	// Rperf is set when both sides are rperf: their parameter exchange
	// (Params) follows the MTU exchange.
	Rperf bool
}

// StepKind says what a step does.
type StepKind uint8

// The kinds of steps. Exchanges (every kind but StepConnect and StepRun)
// are symmetric: each message goes both ways, the client writing first and
// then reading, the server reading first and then writing.
const (
	// StepVersion exchanges the 16-byte version strings.
	StepVersion StepKind = iota + 1
	// StepSysData exchanges the page size, then the cache line size, each
	// a 4-byte big-endian integer (peers from 5.32 on).
	StepSysData
	// StepMTU exchanges the ibv_mtu value in ASCII with a NUL: 2 bytes for
	// peers from 5.31 on, 4 before.
	StepMTU
	// StepNegotiate exchanges upstream perftest's binary parameter
	// structure (both sides 6.28 or newer; NegotiateSize bytes).
	StepNegotiate
	// StepParams is rperf's own parameter exchange (both sides rperf).
	StepParams
	// StepKey exchanges the key message of QP Step.QP (its address).
	StepKey
	// StepConnect is local: the QPs move to RTR and RTS with the peer's
	// keys.
	StepConnect
	// StepBarrier is a key exchange of QP 0 used to synchronise.
	StepBarrier
	// StepRun is local: the test traffic of one message size (Step.Size).
	StepRun
	// StepReport exchanges a bandwidth report: size and iterations, then
	// peak, average and message rate.
	StepReport
	// StepClose is ctx_close_connection()'s key exchange of QP 0.
	StepClose
	// StepDone: the side writes "done\0" after the closing exchange and
	// closes; the peer never reads it (perftest before 6.17).
	StepDone
)

var stepNames = [...]string{
	StepVersion: "version", StepSysData: "sys-data", StepMTU: "mtu", StepNegotiate: "negotiate",
	StepParams: "rperf-params", StepKey: "key", StepConnect: "connect", StepBarrier: "barrier",
	StepRun: "run", StepReport: "report", StepClose: "close", StepDone: "done",
}

// String returns the kind's short name.
func (k StepKind) String() string {
	if int(k) < len(stepNames) && stepNames[k] != "" {
		return stepNames[k]
	}
	return fmt.Sprintf("StepKind(%d)", k)
}

// Local reports whether the step puts nothing on the TCP connection.
func (k StepKind) Local() bool { return k == StepConnect || k == StepRun }

// Step is one step of a sequence.
type Step struct {
	Kind StepKind
	// QP is the QP whose key message StepKey exchanges.
	QP int
	// Size is the message size of StepRun, and of the barriers and
	// reports that belong to one size of an -a loop; 0 elsewhere.
	Size uint64
	// Wire is the size in bytes of each message of the step, in order;
	// each goes both ways (StepDone: each side writes one, nobody reads).
	// Empty for local steps and for StepParams (length-prefixed).
	Wire []int
	// PeerRuns is set where this side waits while the peer runs its
	// traffic (a passive server): the wait lasts the peer's whole run, so
	// a driver needs a long timeout there.
	PeerRuns bool
	// Where says where perftest's main() does it and why.
	Where string
}

func (s Step) String() string {
	var b strings.Builder
	b.WriteString(s.Kind.String())
	switch {
	case s.Kind == StepKey:
		fmt.Fprintf(&b, " qp%d", s.QP)
	case s.Size != 0:
		fmt.Fprintf(&b, " %dB", s.Size)
	}
	if s.PeerRuns {
		b.WriteString(" (waits for the peer's run)")
	}
	return b.String()
}

// Sequence is one side's sequence of one program: every step in order.
type Sequence struct {
	Program Program
	Release Release
	Options SequenceOptions
	Steps   []Step
}

// Wire returns the sizes of every message the sequence exchanges, in order.
// Both directions carry the same sizes.
func (q Sequence) Wire() []int {
	var w []int
	for _, s := range q.Steps {
		w = append(w, s.Wire...)
	}
	return w
}

// Count returns how many steps of kind k the sequence has.
func (q Sequence) Count(k StepKind) int {
	n := 0
	for _, s := range q.Steps {
		if s.Kind == k {
			n++
		}
	}
	return n
}

// String lists the steps on one line, runs of one kind folded ("key qp0,
// key qp1, connect, ...").
func (q Sequence) String() string {
	parts := make([]string, 0, len(q.Steps))
	for _, s := range q.Steps {
		parts = append(parts, s.String())
	}
	return strings.Join(parts, ", ")
}

// DefaultSize is perftest's message size without -s: 2 bytes for latency
// programs, 65536 for bandwidth programs, 8 for the atomic ones.
func DefaultSize(p Program) uint64 {
	switch {
	case p.Verb() == "atomic":
		return 8
	case p.Latency():
		return 2
	}
	return 65536
}

// maxAllSize is perftest's MAX_SIZE: -a runs up to 8 MiB.
const maxAllSize = 8 << 20

// AllSizes returns the sizes perftest's -a runs for p, smallest first:
// 2 bytes to 8 MiB in powers of two, or over UD (send programs only) 2
// bytes to the MTU both sides agreed on. Atomic programs refuse -a and get
// nil.
func AllSizes(p Program, conn ConnType, mtu MTU) []uint64 {
	if p.Verb() == "atomic" {
		return nil
	}
	top := uint64(maxAllSize)
	if conn == UD && p.Verb() == "send" {
		if !mtu.Valid() {
			mtu = MTU1024
		}
		top = uint64(mtu.Bytes())
	}
	var s []uint64
	for n := uint64(2); n <= top; n *= 2 {
		s = append(s, n)
	}
	return s
}

// Check returns perftest's own refusal of options for p, as its parser
// words it, or nil when perftest accepts them. Both releases refuse the
// same combinations.
func Check(p Program, o SequenceOptions) error {
	verb := p.Verb()
	conn := o.Conn
	if conn == "" {
		conn = RC
	}
	switch {
	case o.QPs < 0:
		return fmt.Errorf("%s: -q %d: the number of QPs must be at least 1", p, o.QPs)
	case o.QPs > 1 && p.Latency():
		return fmt.Errorf("%s: -q %d: perftest says \"Multiple QPs only available on bw tests\"", p, o.QPs)
	case o.Duplex && p.Latency():
		return fmt.Errorf("%s: -b: perftest says \"Bidirectional is only available in BW test\"", p)
	case o.All && verb == "atomic":
		return fmt.Errorf("%s: -a: perftest says \"Message size cannot be changed for Atomic tests\"", p)
	case o.All && o.Duration:
		return fmt.Errorf("%s: -a with -D: perftest says \"Duration mode currently doesn't support running on all sizes.\"", p)
	case conn == UC && (verb == "read" || verb == "atomic"):
		return fmt.Errorf("%s: -c UC: perftest says \"UC connection not possible in READ/ATOMIC verbs\"", p)
	case conn == UD && verb != "send":
		return fmt.Errorf("%s: -c UD: perftest says \"UD connection only possible in SEND verb\"", p)
	case conn != RC && conn != UC && conn != UD:
		return fmt.Errorf("%s: -c %s: only RC, UC and UD are described", p, conn)
	}
	return nil
}

// Sequence returns the sequence release r's p runs on one side with the
// given options: what a peer must mirror step for step. It fails with
// perftest's own words (Check) where perftest refuses the options, and for
// a peer older than 5.70, which perftest refuses.
func (r Release) Sequence(p Program, o SequenceOptions) (Sequence, error) {
	if _, ok := ProgramFor(string(p)); !ok {
		return Sequence{}, fmt.Errorf("unknown perftest program %q", p)
	}
	if err := Check(p, o); err != nil {
		return Sequence{}, err
	}
	if o.QPs == 0 {
		o.QPs = 1
	}
	if o.Conn == "" {
		o.Conn = RC
	}
	if !o.MTU.Valid() {
		o.MTU = MTU1024
	}
	if o.PeerVersion == "" {
		o.PeerVersion = r.Version
	}
	self, peer := atof(r.Version), atof(o.PeerVersion)
	if !o.NoVersionExchange && peer < minPeerVersion {
		return Sequence{}, fmt.Errorf("%s %s refuses a peer announcing %q: \"Current implementation is not compatible with versions older than 5.70\"", p, r.Version, o.PeerVersion)
	}
	b := builder{p: p, o: o, keyLen: KeySizeGID}
	if o.NoGID {
		b.keyLen = KeySize
	}
	sizes := []uint64{o.Size}
	if o.Size == 0 {
		sizes[0] = DefaultSize(p)
	}
	if o.All {
		sizes = AllSizes(p, o.Conn, o.MTU)
	}
	if len(o.Sizes) > 0 {
		sizes = o.Sizes
	}
	b.sizes = sizes

	// Opening: establish_connection, then the three version-dependent
	// exchanges every program does in this order.
	if !o.NoVersionExchange {
		b.add(Step{Kind: StepVersion, Wire: []int{VersionSize}, Where: "exchange_versions()"})
		if peer >= sysDataVersion {
			b.add(Step{Kind: StepSysData, Wire: []int{4, 4}, Where: "check_sys_data(): page size, then cache line size; both keep the larger"})
		}
		switch {
		case peer >= mtuShortVersion:
			b.add(Step{Kind: StepMTU, Wire: []int{2}, Where: "check_mtu(): both keep the smaller"})
		case peer >= mtuExchangeVersion:
			b.add(Step{Kind: StepMTU, Wire: []int{4}, Where: "check_mtu(): both keep the smaller"})
		}
		if self >= negotiateVersion && peer >= negotiateVersion {
			b.add(Step{Kind: StepNegotiate, Wire: []int{NegotiateSize}, Where: "negotiate_params(), after alloc_ctx(): symmetric parameters and device caps compared"})
		}
		if o.Rperf {
			b.add(Step{Kind: StepParams, Where: "rperf only: the test parameters, length-prefixed JSON"})
		}
	}

	switch p {
	case SendLat:
		b.keys("send_set_up_connection(): each QP's address")
		b.add(Step{Kind: StepConnect, Where: "ctx_connect()"})
		b.barrier(0, false, "after ctx_connect()")
		b.keys("the peer's addresses again, printed as \"remote address\"")
		for _, sz := range sizes {
			b.barrier(sz, false, "receives posted for this size: the client must not send before (UC/UD would drop)")
			b.run(sz)
		}
		b.close(self, false)
	case WriteLat:
		b.barrier(0, false, "before the per-QP loop: write_lat's extra exchange of QP 0")
		b.keys("each QP's address")
		b.add(Step{Kind: StepConnect, Where: "ctx_connect()"})
		b.keys("the peer's addresses again, printed as \"remote address\"")
		b.barrier(0, false, "\"additional handshake ... after moving qp to RTR\"")
		for _, sz := range sizes {
			b.run(sz)
		}
		// write_lat returns without ctx_close_connection(): the socket
		// closes when the process exits.
	case ReadLat, AtomicLat:
		b.barrier(0, false, "before the per-QP loop: the extra exchange of QP 0")
		b.keys("each QP's address")
		b.add(Step{Kind: StepConnect, Where: "ctx_connect()"})
		b.keys("the peer's addresses again, printed as \"remote address\"")
		b.barrier(0, false, "\"additional handshake ... after moving qp to RTR\"")
		if o.Server {
			// The passive server goes straight to the close, which the
			// client reaches only after all its sizes.
			b.close(self, true)
			break
		}
		for _, sz := range sizes {
			b.run(sz)
		}
		b.close(self, false)
	case SendBW:
		b.keys("each QP's address")
		b.add(Step{Kind: StepConnect, Where: "ctx_connect()"})
		b.barrier(0, false, "after ctx_connect()")
		b.keys("the peer's addresses again, printed as \"remote address\"")
		for _, sz := range sizes {
			b.barrier(sz, false, "receives posted for this size: the client must not send before")
			b.run(sz)
			if o.Duplex && !o.Duration {
				b.report(sz, false, "-b: each side adds the peer's report to its own")
			}
			if o.All {
				b.barrier(sz, false, "after each size of -a")
			}
		}
		b.close(self, false)
	case WriteBW, ReadBW, AtomicBW:
		b.keys("each QP's address")
		b.add(Step{Kind: StepConnect, Where: "ctx_connect()"})
		b.keys("the peer's addresses again, printed as \"remote address\"")
		b.barrier(0, false, "\"additional handshake ... after moving qp to RTR\"")
		switch {
		case o.Duplex && o.All:
			// atomic_bw refuses -a, so only write_bw and read_bw get here.
			for _, sz := range sizes {
				b.barrier(sz, false, "-b: before each size")
				b.run(sz)
				if self >= duplexSecondBarrierVersion {
					b.barrier(sz, false, "-b -a: after each size")
				}
				b.report(sz, false, "-b: each side adds the peer's report to its own")
			}
		case o.Duplex:
			b.barrier(sizes[0], false, "-b: before the run")
			b.run(sizes[0])
			b.report(sizes[0], false, "-b: each side adds the peer's report to its own")
		case o.Server:
			// "For half duplex tests, server just waits for client to
			// exit": it prints the client's report.
			b.barrier(0, true, "the passive server waits for the client's run (all sizes)")
			b.report(0, false, "the client's report, printed by the server; the server's is uninitialised memory")
		default:
			for _, sz := range sizes {
				b.run(sz)
			}
			b.barrier(0, false, "end of the run, every size")
			b.report(0, false, "the last size's report, printed by the server")
		}
		b.close(self, false)
	}
	return Sequence{Program: p, Release: r, Options: o, Steps: b.steps}, nil
}

// builder collects a sequence's steps.
type builder struct {
	p      Program
	o      SequenceOptions
	keyLen int
	sizes  []uint64
	steps  []Step
}

func (b *builder) add(s Step) { b.steps = append(b.steps, s) }

// keys adds one key exchange per QP.
func (b *builder) keys(where string) {
	for i := 0; i < b.o.QPs; i++ {
		b.add(Step{Kind: StepKey, QP: i, Wire: []int{b.keyLen}, Where: where})
	}
}

func (b *builder) barrier(size uint64, peerRuns bool, where string) {
	b.add(Step{Kind: StepBarrier, Size: size, Wire: []int{b.keyLen}, PeerRuns: peerRuns, Where: where})
}

func (b *builder) run(size uint64) {
	b.add(Step{Kind: StepRun, Size: size, Where: "the test traffic"})
}

// report adds xchg_bw_reports(): size (8 bytes), iterations (8 bytes for
// peers from 5.33 on, else 4), then three doubles.
func (b *builder) report(size uint64, peerRuns bool, where string) {
	iters := 8
	if b.o.NoVersionExchange || atof(b.o.PeerVersion) < reportIters64 {
		iters = 4
	}
	b.add(Step{Kind: StepReport, Size: size, Wire: []int{8, iters, 8, 8, 8}, PeerRuns: peerRuns, Where: where})
}

// close adds ctx_close_connection(): a key exchange of QP 0, then for
// releases before 6.17 the "done\0" nobody reads.
func (b *builder) close(self float64, peerRuns bool) {
	where := "ctx_close_connection()"
	if peerRuns {
		where = "ctx_close_connection(): the passive server waits here for the client's run (all sizes)"
	}
	b.add(Step{Kind: StepClose, Wire: []int{b.keyLen}, PeerRuns: peerRuns, Where: where})
	if self < doneRemovedVersion {
		b.add(Step{Kind: StepDone, Wire: []int{len(doneMessage)}, Where: "ctx_close_connection() before 6.17: write(\"done\"), then close; never read"})
	}
}
