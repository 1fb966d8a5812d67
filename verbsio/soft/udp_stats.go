package soft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The udp fabric's counters live in a small shared-memory file per context
// under StatsDir, so that another process (rdiag counters) can read them
// while the engine runs, as sysfs shows a kernel device's hw_counters. The
// file goes when the context closes; files of processes that died are
// ignored and removed by readers.

// StatsDir is where contexts publish their counters.
var StatsDir = "/dev/shm/rperf-engine"

const (
	statsMagic   = 0x3154415453465052 // "RPFSTAT1"
	statsHdrSize = 128
)

// counterNames are the counters in file order; udpCounters has the same
// fields in the same order.
var counterNames = []string{
	"sent_pkts", "rcvd_pkts", "retransmitted", "duplicate_request", "icrc_errors", "out_of_seq_request",
	"unknown_qp", "bad_pkey", "malformed", "wrong_peer", "rnr_nak_sent", "rnr_nak_rcvd",
	"nak_sent", "nak_rcvd", "timeouts", "acks_sent", "rewinds",
}

type statsHeader struct {
	magic  uint64
	pid    uint32
	nonce  uint32
	port   uint32
	ncount uint32
	device [32]byte
	netdev [32]byte
}

// statsFile is a context's published counters.
type statsFile struct {
	path string
	mem  []byte
}

func init() {
	if unsafe.Sizeof(udpCounters{}) != uintptr(len(counterNames))*8 || unsafe.Sizeof(statsHeader{}) > statsHdrSize {
		panic("soft: counter layout")
	}
}

// openStats creates the counters file; on failure the counters live in
// ordinary memory and are simply not visible to other processes.
func openStats(pid, nonce uint32, device, netdev string, port uint16) (*statsFile, *udpCounters) {
	if err := os.MkdirAll(StatsDir, 0o755); err != nil {
		return nil, new(udpCounters)
	}
	path := filepath.Join(StatsDir, fmt.Sprintf("%d-%08x-%s", pid, nonce, device))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, new(udpCounters)
	}
	defer f.Close()
	size := statsHdrSize + len(counterNames)*8
	if err := f.Truncate(int64(size)); err != nil {
		os.Remove(path)
		return nil, new(udpCounters)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		os.Remove(path)
		return nil, new(udpCounters)
	}
	h := (*statsHeader)(unsafe.Pointer(&mem[0]))
	h.pid, h.nonce, h.port, h.ncount = pid, nonce, uint32(port), uint32(len(counterNames))
	copy(h.device[:], device)
	copy(h.netdev[:], netdev)
	atomic.StoreUint64(&h.magic, statsMagic)
	return &statsFile{path: path, mem: mem}, (*udpCounters)(unsafe.Pointer(&mem[statsHdrSize]))
}

func (s *statsFile) close() {
	if s == nil {
		return
	}
	os.Remove(s.path)
	unix.Munmap(s.mem)
}

// ContextStats are the counters of one running udp-fabric context.
type ContextStats struct {
	PID      int               `json:"pid"`
	Device   string            `json:"device"`
	Netdev   string            `json:"netdev"`
	UDPPort  int               `json:"udp_port"`
	Counters map[string]uint64 `json:"counters"`
}

// LiveStats reads the counters every running udp-fabric context on this
// host publishes, removing files left by processes that are gone.
func LiveStats() ([]ContextStats, error) {
	ents, err := os.ReadDir(StatsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", StatsDir, err)
	}
	var out []ContextStats
	for _, e := range ents {
		path := filepath.Join(StatsDir, e.Name())
		pid, err := strconv.Atoi(strings.SplitN(e.Name(), "-", 2)[0])
		if err != nil {
			continue
		}
		if unix.Kill(pid, 0) == unix.ESRCH {
			os.Remove(path)
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil || len(b) < statsHdrSize {
			continue
		}
		if binary.LittleEndian.Uint64(b) != statsMagic {
			continue
		}
		n := int(binary.LittleEndian.Uint32(b[20:]))
		cs := ContextStats{PID: int(binary.LittleEndian.Uint32(b[8:])), UDPPort: int(binary.LittleEndian.Uint32(b[16:])),
			Device: cstr(b[24:56]), Netdev: cstr(b[56:88]), Counters: map[string]uint64{}}
		for i := 0; i < n && i < len(counterNames) && statsHdrSize+8*i+8 <= len(b); i++ {
			cs.Counters[counterNames[i]] = binary.LittleEndian.Uint64(b[statsHdrSize+8*i:])
		}
		out = append(out, cs)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PID != out[j].PID {
			return out[i].PID < out[j].PID
		}
		return out[i].Device < out[j].Device
	})
	return out, nil
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
