// Package dm measures latency with the message buffers in device memory
// against host memory, in one run (rperf dm-lat).
//
// Both sides run one latency test of package latency twice over: on the
// generic path, with the buffers in host memory, and on the dm path,
// with them in device memory (verbsio.Context.AllocDM, PD.RegDMMR: a
// zero-based region, so the key exchange carries offsets). On the dm path
// the ping-pong's marker byte is written and polled through 4-byte copies
// (DM.CopyTo, DM.CopyFrom), as device memory is reached; nothing is sent
// inline on either path, so where the buffers live is the only
// difference. The runs are interleaved repetitions (package paths), and
// each record is a path's median repetition for one message size, with
// its ratio to host memory and a verdict.
package dm

import (
	"context"
	"fmt"
	"os"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/latency"
	"github.com/rperf/rperf/tests/paths"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// Paths are the paths compared: host memory (generic), then device
// memory.
var Paths = []sendpath.Path{sendpath.Generic, sendpath.DM}

// DefaultMaxSize is the largest size of the default sweep.
const DefaultMaxSize = 4096

// DefaultIterations is the iterations per run by default.
const DefaultIterations = 10000

// Config describes a comparison: the latency test (its Path and Inline
// are set by Run) and the repetitions per memory.
type Config struct {
	Latency     latency.Config
	Repetitions int // 0 means paths.DefaultRepetitions
	// OnStep and OnConnected are as in paths.Config.
	OnStep      func(paths.Step)
	OnConnected func(session.Info)
}

// Default returns test t with every size from 2 to DefaultMaxSize bytes
// (one, 8 bytes, for atomics) and DefaultIterations iterations.
func Default(t session.Test) Config {
	l := latency.Default(t)
	l.Iterations, l.Inline = DefaultIterations, 0
	if t != latency.Atomic {
		l.Sizes = nil
		for s := 2; s <= DefaultMaxSize; s *= 2 {
			l.Sizes = append(l.Sizes, s)
		}
	}
	return Config{Latency: l}
}

// BufferBytes is the memory a latency session's buffers take for
// messages of up to size bytes: a send and a receive region per QP, each
// rounded up to the page (with the GRH before a UD payload), as
// package session lays them out.
func BufferBytes(size int, typ verbsio.QPType) int {
	if typ == verbsio.QPTypeUD {
		size += session.GRHSize
	}
	page := os.Getpagesize()
	return 2 * ((max(size, 64) + page - 1) / page * page)
}

// Fit returns the sizes whose buffers fit the device's memory
// (DeviceAttr.MaxDMSize), in order.
func Fit(sizes []int, typ verbsio.QPType, attr verbsio.DeviceAttr) []int {
	var fit []int
	for _, s := range sizes {
		if uint64(BufferBytes(s, typ)) <= attr.MaxDMSize {
			fit = append(fit, s)
		}
	}
	return fit
}

// Check reports the problems with c that would stop Run: the latency
// test's on the dm path (which refuses data validation: it reads the
// buffers as host memory).
func (c *Config) Check() error {
	l := c.Latency
	l.Path = sendpath.DM
	if err := l.Check(); err != nil {
		return fmt.Errorf("dm: %w", err)
	}
	return nil
}

// Run runs the comparison over connections from connect on dev. It
// returns, for each size, the host-memory record and then the
// device-memory one (nothing on a passive side). The device must offer
// the dm path and hold the largest size's buffers (Fit).
func Run(ctx context.Context, dev *verbsio.Context, connect paths.Connector, cfg Config) ([]reports.Result, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	attr, err := dev.QueryDevice()
	if err != nil {
		return nil, fmt.Errorf("query device %s: %w", dev.Device.Name, err)
	}
	if err := sendpath.CheckDevice(sendpath.DM, attr, dev.Device.Name); err != nil {
		return nil, err
	}
	l := cfg.Latency
	l.Inline = 0
	if fit := Fit(l.Sizes, l.Connection, attr); len(fit) != len(l.Sizes) {
		largest := l.Sizes[len(l.Sizes)-1]
		return nil, fmt.Errorf("dm: the buffers of %d-byte messages need %d bytes of device memory, more than %s's %d (max_dm_size)",
			largest, BufferBytes(largest, l.Connection), dev.Device.Name, attr.MaxDMSize)
	}
	return paths.Run(ctx, dev, connect, paths.Config{Latency: &l, Paths: Paths, Repetitions: cfg.Repetitions,
		OnStep: cfg.OnStep, OnConnected: cfg.OnConnected})
}

// Label names a record's memory: "host memory" or "device memory".
func Label(r reports.Result) string {
	if r.Path == sendpath.DM.String() {
		return "device memory"
	}
	return "host memory"
}
