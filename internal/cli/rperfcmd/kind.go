package rperfcmd

import (
	"github.com/rperf/rperf/tests/bw"
	"github.com/rperf/rperf/tests/latency"
	"github.com/rperf/rperf/verbsio"
)

// kind is one of the eight test commands.
type kind struct {
	lat  bool
	latT latency.Test
	bwT  bw.Test
}

// kinds lists the commands in perftest's order.
var kinds = []kind{
	{lat: true, latT: latency.Send}, {lat: true, latT: latency.Write},
	{lat: true, latT: latency.Read}, {lat: true, latT: latency.Atomic},
	{bwT: bw.Send}, {bwT: bw.Write}, {bwT: bw.Read}, {bwT: bw.Atomic},
}

func (k kind) command() string {
	if k.lat {
		return k.latT.Command()
	}
	return k.bwT.Command()
}

// name is perftest's program name without ib_, e.g. "write_lat".
func (k kind) name() string {
	if k.lat {
		return k.latT.Name()
	}
	return k.bwT.Name()
}

func (k kind) title() string {
	if k.lat {
		return k.latT.Title()
	}
	return k.bwT.Title()
}

func (k kind) send() bool {
	return k.lat && k.latT == latency.Send || !k.lat && k.bwT == bw.Send
}

func (k kind) write() bool {
	return k.lat && k.latT == latency.Write || !k.lat && k.bwT == bw.Write
}

func (k kind) read() bool {
	return k.lat && k.latT == latency.Read || !k.lat && k.bwT == bw.Read
}

func (k kind) atomic() bool {
	return k.lat && k.latT == latency.Atomic || !k.lat && k.bwT == bw.Atomic
}

func (k kind) sendOrWrite() bool { return k.send() || k.write() }

func (k kind) connections() []verbsio.QPType {
	if k.lat {
		return k.latT.Connections()
	}
	return k.bwT.Connections()
}

func (k kind) defaultSize() int {
	switch {
	case k.atomic():
		return latency.AtomicSize
	case k.lat:
		return latency.DefaultSize
	}
	return bw.DefaultSize
}

func (k kind) defaultIters() int {
	switch {
	case k.lat:
		return latency.DefaultIterations
	case k.bwT == bw.Write:
		return bw.DefaultIterationsWrite
	}
	return bw.DefaultIterations
}

func (k kind) defaultTxDepth() int {
	if k.lat {
		return 1
	}
	return bw.DefaultTxDepth
}

// passiveServer reports whether the server side measures nothing by
// itself: one-sided latency tests, and one-sided bandwidth tests unless
// bidirectional.
func (k kind) passiveServer(bidir bool) bool {
	if k.lat {
		return k.latT.Passive()
	}
	return k.bwT.OneSided() && !bidir
}

// short describes the test for help text.
func (k kind) short() string {
	var op, what string
	switch {
	case k.send():
		op = "SEND"
	case k.write():
		op = "RDMA WRITE"
	case k.read():
		op = "RDMA READ"
	default:
		op = "atomic"
	}
	if k.lat {
		what = "latency"
	} else {
		what = "bandwidth"
	}
	return op + " " + what + " (perftest's ib_" + k.name() + ")"
}
