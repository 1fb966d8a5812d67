package session

import (
	"fmt"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/verbsio"
)

// Family is a kind of test: how its loop runs and what it reports. Each
// family is a package (tests/latency, tests/bw) that runs its tests
// through Run.
type Family uint8

// The test families.
const (
	// Latency tests time round trips one at a time: a ping-pong, or
	// one-sided operations against a passive server; one sample each.
	Latency Family = iota
	// Bandwidth tests stream messages with many outstanding and report
	// rates.
	Bandwidth
	// Raw tests send whole Ethernet frames on RAW_PACKET QPs (package
	// tests/raw), configured from the command line on both sides: no
	// out-of-band exchange, as perftest's raw_ethernet programs.
	Raw
)

var familyNames = [...]string{"latency", "bandwidth", "raw"}

// String returns "latency", "bandwidth" or "raw".
func (f Family) String() string {
	if int(f) < len(familyNames) {
		return familyNames[f]
	}
	return fmt.Sprintf("Family(%d)", f)
}

// Verb is the operation a test measures.
type Verb uint8

// Verbs, as perftest's VerbType (without the _IMM variants).
const (
	Send Verb = iota
	Write
	Read
	Atomic
)

var verbNames = [...]string{"send", "write", "read", "atomic"}

// String returns "send", "write", "read" or "atomic".
func (v Verb) String() string {
	if int(v) < len(verbNames) {
		return verbNames[v]
	}
	return fmt.Sprintf("Verb(%d)", v)
}

// Opcode returns the opcode of the verb's work requests; atomic is the
// given atomic opcode.
func (v Verb) Opcode(atomic verbsio.Opcode) verbsio.Opcode {
	switch v {
	case Send:
		return verbsio.OpSend
	case Write:
		return verbsio.OpRDMAWrite
	case Read:
		return verbsio.OpRDMARead
	}
	return atomic
}

// Connections lists the transports the verb runs over: SEND over RC, UC
// and UD, RDMA WRITE over RC and UC, READ and atomics over RC only.
func (v Verb) Connections() []verbsio.QPType {
	switch v {
	case Send:
		return []verbsio.QPType{verbsio.QPTypeRC, verbsio.QPTypeUC, verbsio.QPTypeUD}
	case Write:
		return []verbsio.QPType{verbsio.QPTypeRC, verbsio.QPTypeUC}
	}
	return []verbsio.QPType{verbsio.QPTypeRC}
}

// Test is one of rperf's tests, perftest's programs: which family runs it
// and the verb it measures, its names, the transports it runs over and
// perftest's defaults for it.
type Test uint8

// The tests, in perftest's order (the order of rperf's commands).
const (
	SendLat Test = iota
	WriteLat
	ReadLat
	AtomicLat
	SendBW
	WriteBW
	ReadBW
	AtomicBW
	// RawBW, RawLat, FSRate and RawBurstLat are perftest's
	// raw_ethernet_bw, raw_ethernet_lat, raw_ethernet_fs_rate and
	// raw_ethernet_burst_lat: family Raw, not in Tests.
	RawBW
	RawLat
	FSRate
	RawBurstLat
)

// Tests lists every test of the connected families (Latency and
// Bandwidth, over perftest's exchange) in order.
var Tests = []Test{SendLat, WriteLat, ReadLat, AtomicLat, SendBW, WriteBW, ReadBW, AtomicBW}

// RawTests lists the raw Ethernet tests (family Raw).
var RawTests = []Test{RawBW, RawLat, RawBurstLat, FSRate}

// Raw Ethernet frame sizes (perftest's raw tests: 64 bytes up to the MTU).
const (
	MinRawSize = 64
)

// Defaults shared by every test (perftest's).
const (
	DefaultRxDepth = 512 // DEF_RX_SEND, -r
	// Default inline sizes of the latency tests (perftest's generic
	// choices); bandwidth tests inline nothing by default.
	DefaultInlineWrite = 220
	DefaultInlineSend  = 236
	DefaultInlineUD    = 188
)

// testInfo is one row of the test table.
type testInfo struct {
	name, command, title string
	family               Family
	verb                 Verb
	size, iters, txDepth int // perftest's defaults: DEF_SIZE_*, DEF_ITERS*, DEF_TX_*
}

var tests = [...]testInfo{
	SendLat:     {"send_lat", "send-lat", "Send Latency Test", Latency, Send, 2, 1000, 1},
	WriteLat:    {"write_lat", "write-lat", "RDMA_Write Latency Test", Latency, Write, 2, 1000, 1},
	ReadLat:     {"read_lat", "read-lat", "RDMA_Read Latency Test", Latency, Read, 2, 1000, 1},
	AtomicLat:   {"atomic_lat", "atomic-lat", "Atomic Latency Test", Latency, Atomic, AtomicSize, 1000, 1},
	SendBW:      {"send_bw", "send-bw", "Send BW Test", Bandwidth, Send, 65536, 1000, 128},
	WriteBW:     {"write_bw", "write-bw", "RDMA_Write BW Test", Bandwidth, Write, 65536, 5000, 128},
	ReadBW:      {"read_bw", "read-bw", "RDMA_Read BW Test", Bandwidth, Read, 65536, 1000, 128},
	AtomicBW:    {"atomic_bw", "atomic-bw", "Atomic BW Test", Bandwidth, Atomic, AtomicSize, 1000, 128},
	RawBW:       {"raw_ethernet_bw", "raw-bw", "Raw Ethernet BW Test", Raw, Send, MinRawSize, 1000, 128},
	RawLat:      {"raw_ethernet_lat", "raw-lat", "Raw Ethernet Latency Test", Raw, Send, MinRawSize, 1000, 1},
	RawBurstLat: {"raw_ethernet_burst_lat", "raw-burst-lat", "Raw Ethernet Burst Latency Test", Raw, Send, MinRawSize, 1000, 128},
	FSRate:      {"raw_ethernet_fs_rate", "fs-rate", "Raw Ethernet Flow Steering Rate Test", Raw, Send, MinRawSize, 1000, 1},
}

// Valid reports whether t is one of Tests.
func (t Test) Valid() bool { return int(t) < len(tests) }

// String returns the test's Name.
func (t Test) String() string {
	if !t.Valid() {
		return fmt.Sprintf("Test(%d)", t)
	}
	return t.Name()
}

// Name is perftest's program name without "ib_", e.g. "write_lat"; the
// test field of its results.
func (t Test) Name() string { return tests[t].name }

// Command is the rperf command, e.g. "write-lat".
func (t Test) Command() string { return tests[t].command }

// Program is the perftest program of the test (oob.ProgramFor), "" for
// an invalid test.
func (t Test) Program() oob.Program {
	if !t.Valid() {
		return ""
	}
	p, _ := oob.ProgramFor(t.Command())
	return p
}

// Title is the banner line perftest prints for the test.
func (t Test) Title() string { return tests[t].title }

// Family is the family that runs the test.
func (t Test) Family() Family { return tests[t].family }

// Verb is the operation the test measures.
func (t Test) Verb() Verb { return tests[t].verb }

// Connections lists the transports the test runs over (Verb.Connections;
// RAW_PACKET for family Raw).
func (t Test) Connections() []verbsio.QPType {
	if tests[t].family == Raw {
		return []verbsio.QPType{verbsio.QPTypeRawPacket}
	}
	return tests[t].verb.Connections()
}

// Passive reports whether the test's server only serves the client's
// operations and measures nothing: read_lat and atomic_lat, and the
// bandwidth tests of one-sided verbs (WRITE, READ, atomics) unless they
// run bidirectionally.
func (t Test) Passive() bool {
	v := tests[t].verb
	if tests[t].family == Latency {
		return v == Read || v == Atomic
	}
	return v != Send
}

// RTTFactor is what a latency test divides each sample by: 2 for the
// ping-pongs (SEND, WRITE), 1 for one-sided round trips (READ, atomics).
func (t Test) RTTFactor() int {
	if v := tests[t].verb; v == Send || v == Write {
		return reports.RTTFactorRoundTrip
	}
	return reports.RTTFactorOneSided
}

// PathTest describes the test over transport typ for sendpath.Applies.
func (t Test) PathTest(typ verbsio.QPType) sendpath.Test {
	return sendpath.Test{Op: tests[t].verb.Opcode(verbsio.OpAtomicFetchAdd), Bandwidth: tests[t].family == Bandwidth, Type: typ}
}

// DefaultSize is perftest's message size for the test: 2 bytes for
// latency, 64 KiB for bandwidth, AtomicSize for atomics.
func (t Test) DefaultSize() int { return tests[t].size }

// DefaultIterations is perftest's iteration count for the test.
func (t Test) DefaultIterations() int { return tests[t].iters }

// DefaultTxDepth is perftest's send queue depth for the test: 1 for
// latency, 128 for bandwidth.
func (t Test) DefaultTxDepth() int { return tests[t].txDepth }

// DefaultInline is perftest's inline size for the test over transport
// typ: the latency tests of SENDs and WRITEs inline small messages
// (DefaultInlineSend, DefaultInlineUD, DefaultInlineWrite), every other
// test nothing.
func (t Test) DefaultInline(typ verbsio.QPType) int {
	if tests[t].family != Latency {
		return 0
	}
	switch tests[t].verb {
	case Write:
		return DefaultInlineWrite
	case Send:
		if typ == verbsio.QPTypeUD {
			return DefaultInlineUD
		}
		return DefaultInlineSend
	}
	return 0
}
