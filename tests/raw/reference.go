package raw

import (
	"context"
	"fmt"
	"net"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
)

// PathAFPacket is the Path of Reference's results: the frames sent from
// a plain packet socket, the reference of the raw send paths.
const PathAFPacket = "afpacket"

// Reference sends c's frames of size bytes (flow 0's) from a plain
// AF_PACKET socket bound to link in the caller's network namespace, one
// write(2) per frame, Warmup then Iterations of them, and returns the
// rate over the Iterations, from the first write to the last: what a
// program sending the same frames without rperf's engine achieves, to
// which rperf paths compares the raw send paths. A write the kernel
// refuses for want of room (ENOBUFS, EAGAIN) is retried; the loop is
// bounded by the context and by c's stall timeout without progress.
func Reference(ctx context.Context, link string, c *Config, size int) (reports.Result, error) {
	ifc, err := net.InterfaceByName(link)
	if err != nil {
		return reports.Result{}, fmt.Errorf("raw reference: link %s: %w", link, err)
	}
	frame := make([]byte, size)
	if err := c.Frame.Build(frame, 0); err != nil {
		return reports.Result{}, fmt.Errorf("raw reference: %w", err)
	}
	// Protocol 0: the socket sends and receives nothing.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return reports.Result{}, fmt.Errorf("raw reference: packet socket (needs CAP_NET_RAW): %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifc.Index}); err != nil {
		return reports.Result{}, fmt.Errorf("raw reference: bind to %s: %w", link, err)
	}
	var w waiter
	w.begin(ctx, "sending from the packet socket", c.stall())
	var first int64
	for i := 0; i < c.Warmup+c.Iterations; {
		if i == c.Warmup && first == 0 {
			first = clock.Now()
		}
		_, err := unix.Write(fd, frame)
		switch {
		case err == nil:
			i++
			if i&1023 == 0 {
				w.progress(clock.Now())
			}
		case err == unix.ENOBUFS || err == unix.EAGAIN || err == unix.EINTR:
			if err := w.idle(); err != nil {
				return reports.Result{}, err
			}
		default:
			return reports.Result{}, fmt.Errorf("raw reference: write frame %d: %w", i, err)
		}
	}
	res, err := reports.NewBandwidthResult(reports.BWSpec{Test: c.Test.Name(), Bytes: int64(size), Iterations: int64(c.Iterations),
		ElapsedNs: clock.Now() - first, NoPeak: true})
	if err != nil {
		return reports.Result{}, err
	}
	res.Path = PathAFPacket
	return res, nil
}
