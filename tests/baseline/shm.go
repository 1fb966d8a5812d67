package baseline

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
)

// The shared page of SHMPingPong: the ping's slot at its start, the
// pong's half a page further (far enough that neither side's writes touch
// the other's cache lines or their prefetched neighbours). A slot is a
// sequence number, then the message.
const (
	shmPage    = 4096
	pongSlot   = shmPage / 2
	seqBytes   = 8
	MaxSHMSize = pongSlot - seqBytes // the largest SHMPingPong message
	shmStop    = ^uint64(0)          // the sequence number that ends the pong
)

// shmMap maps a shared page from f.
func shmMap(f *os.File) ([]byte, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, shmPage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map the shared page: %w", err)
	}
	return mem, nil
}

// seqAt is the sequence number at the start of a slot.
func seqAt(mem []byte, off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&mem[off]))
}

// SHMPingPong measures iters round trips of a size-byte message through
// memory shared with a peer process (a memfd page), both spinning on the
// other's sequence number (after [Warmup] round trips not measured): the
// ping writes the message into its slot and then the round trip's
// sequence number; the pong, seeing it, copies the message into its own
// slot and publishes the same number, which ends the round trip. Samples
// are round trips; the record's figures are one-way (rtt_factor 2).
func SHMPingPong(launch Launcher, size, iters int) (reports.Result, error) {
	if size < 1 || size > MaxSHMSize {
		return reports.Result{}, fmt.Errorf("shm ping-pong: size %d: must be 1 to %d bytes", size, MaxSHMSize)
	}
	if err := checkCount("shm ping-pong: iterations", iters); err != nil {
		return reports.Result{}, err
	}
	mfd, err := unix.MemfdCreate("rperf-baseline", unix.MFD_CLOEXEC)
	if err != nil {
		return reports.Result{}, fmt.Errorf("shm ping-pong: memfd: %w", err)
	}
	f := os.NewFile(uintptr(mfd), "memfd")
	defer f.Close()
	if err := f.Truncate(shmPage); err != nil {
		return reports.Result{}, fmt.Errorf("shm ping-pong: %w", err)
	}
	mem, err := shmMap(f)
	if err != nil {
		return reports.Result{}, fmt.Errorf("shm ping-pong: %w", err)
	}
	defer unix.Munmap(mem)
	p, err := start(launch, RoleSHMPong, f)
	if err != nil {
		return reports.Result{}, fmt.Errorf("shm ping-pong: %w", err)
	}
	res, err := shmPing(p, mem, size, iters)
	if err != nil {
		seqAt(mem, 0).Store(shmStop)
	}
	if cerr := p.close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return reports.Result{}, fmt.Errorf("shm ping-pong: %w", err)
	}
	return res, nil
}

func shmPing(p *peer, mem []byte, size, iters int) (reports.Result, error) {
	if err := p.expect("ready", StallTimeout); err != nil {
		return reports.Result{}, err
	}
	rec, err := reports.NewRecorder(reports.RecorderOptions{Expected: iters})
	if err != nil {
		return reports.Result{}, err
	}
	if err := p.send("size %d", size); err != nil {
		return reports.Result{}, err
	}
	ping, pong := seqAt(mem, 0), seqAt(mem, pongSlot)
	msg := make([]byte, size)
	for i := 0; i < Warmup+iters; i++ {
		seq := uint64(i) + 1
		msg[0] = byte(seq)
		t0 := clock.Now()
		copy(mem[seqBytes:], msg)
		ping.Store(seq)
		for sp := (spinner{}); pong.Load() != seq; {
			if !sp.spin() {
				return reports.Result{}, fmt.Errorf("round trip %d: no answer within %v", i, StallTimeout)
			}
		}
		if i >= Warmup {
			rec.Record(clock.Now() - t0)
		}
		if mem[pongSlot+seqBytes] != byte(seq) {
			return reports.Result{}, fmt.Errorf("round trip %d: the answer's first byte is %#x, not %#x", i, mem[pongSlot+seqBytes], byte(seq))
		}
	}
	ping.Store(shmStop)
	if err := p.expect("done", StallTimeout); err != nil {
		return reports.Result{}, err
	}
	return pingPongResult(NameSHMPingPong, size, iters, rec)
}

// shmPong answers the ping's messages in the shared page f until the stop
// sequence number. Its first order gives the message size:
// "size N".
func shmPong(f *os.File, ctl *bufio.Reader, out io.Writer) error {
	mem, err := shmMap(f)
	if err != nil {
		return fmt.Errorf("shm pong: %w", err)
	}
	defer unix.Munmap(mem)
	ping, pong := seqAt(mem, 0), seqAt(mem, pongSlot)
	fmt.Fprintln(out, "ready")
	line, err := ctl.ReadString('\n')
	if err != nil {
		return nil // the measuring process gave up
	}
	var size int
	if _, err := fmt.Sscanf(line, "size %d", &size); err != nil || size < 1 || size > MaxSHMSize {
		return fmt.Errorf("shm pong: order %q", line)
	}
	from, to := mem[seqBytes:seqBytes+size], mem[pongSlot+seqBytes:pongSlot+seqBytes+size]
	for seq := uint64(1); ; seq++ {
		var sp spinner
		var got uint64
		for got = ping.Load(); got != seq && got != shmStop; got = ping.Load() {
			if !sp.spin() {
				return fmt.Errorf("shm pong: no message %d within %v", seq, StallTimeout)
			}
		}
		if got == shmStop {
			break
		}
		copy(to, from)
		pong.Store(seq)
	}
	fmt.Fprintln(out, "done")
	return orders(ctl, func(string) error { return nil })
}
