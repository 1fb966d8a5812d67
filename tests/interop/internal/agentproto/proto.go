// Package agentproto is the control protocol between the interop suite on
// the host and its agent in the VM: JSON lines over a virtio-serial port
// (no control traffic crosses the network link under test).
//
// The agent speaks first, with a "hello" event, when it is ready. Then the
// host sends requests, each with an id of its choosing, and the agent
// answers with events carrying the same id: "started" then, whenever the
// process ends, "exit" for a start request; "listening" or "error" for a
// wait-listen request; "ok" or "error" for the others. Events of different
// requests interleave.
package agentproto

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Port is the name of the virtio-serial port the agent opens.
const Port = "interop.0"

// Request operations.
const (
	// OpStart runs Argv with Env added, its stdout and stderr appended to
	// Output (a path in the guest), and kills it after Timeout seconds.
	OpStart = "start"
	// OpKill kills the process group of request Target with SIGKILL.
	OpKill = "kill"
	// OpWaitListen waits up to Timeout seconds for a TCP socket listening
	// on Port (IPv4 or IPv6), or with Space SpaceRDMACM for an rdma_cm
	// identifier listening on Port (rdma_cm's TCP port space is not
	// TCP's: such a listener is not in /proc/net/tcp).
	OpWaitListen = "wait-listen"
	// OpPowerOff syncs and powers the VM off.
	OpPowerOff = "poweroff"
)

// Event kinds.
const (
	EventHello     = "hello"
	EventStarted   = "started"
	EventExit      = "exit"
	EventListening = "listening"
	EventOK        = "ok"
	EventError     = "error"
)

// Request is one host-to-agent message.
type Request struct {
	ID      int      `json:"id"`
	Op      string   `json:"op"`
	Argv    []string `json:"argv,omitempty"`
	Env     []string `json:"env,omitempty"`
	Output  string   `json:"output,omitempty"`
	Timeout float64  `json:"timeout,omitempty"`
	Port    int      `json:"port,omitempty"`
	Target  int      `json:"target,omitempty"`
	// Space is OpWaitListen's port space: "" for TCP, SpaceRDMACM.
	Space string `json:"space,omitempty"`
}

// SpaceRDMACM is the rdma_cm port space of OpWaitListen.
const SpaceRDMACM = "rdma_cm"

// Usage is what the kernel counted for an ended process and its waited-for
// children (getrusage's fields the bench reads).
type Usage struct {
	UserSec   float64 `json:"utime"`
	SystemSec float64 `json:"stime"`
	MajFlt    int64   `json:"majflt"` // page faults that waited for I/O
	MinFlt    int64   `json:"minflt"`
	VolCtxSw  int64   `json:"nvcsw"`  // the process gave up the CPU (waits, sleeps)
	InvCtxSw  int64   `json:"nivcsw"` // it was preempted
}

// String is the usage in one line.
func (u *Usage) String() string {
	if u == nil {
		return "usage unknown"
	}
	return fmt.Sprintf("user %.2fs sys %.2fs, major faults %d, minor %d, context switches %d voluntary %d involuntary",
		u.UserSec, u.SystemSec, u.MajFlt, u.MinFlt, u.VolCtxSw, u.InvCtxSw)
}

// Event is one agent-to-host message.
type Event struct {
	ID   int    `json:"id"`
	Kind string `json:"kind"`
	// RC is the exit code of an "exit" event: the process's, 128+signal
	// when a signal ended it, or -1 when it could not start.
	RC int `json:"rc,omitempty"`
	// Killed is set on "exit" when the agent killed the process (its
	// timeout, or OpKill).
	Killed bool `json:"killed,omitempty"`
	// Wall is the process's run time in seconds ("exit").
	Wall float64 `json:"wall,omitempty"`
	// Usage is the process's resource use ("exit"), from wait4.
	Usage *Usage `json:"usage,omitempty"`
	// Err describes an "error" event, or why a start failed.
	Err string `json:"err,omitempty"`
	// Info carries the "hello" event's description of the guest.
	Info string `json:"info,omitempty"`
}

// Listening reports whether the TCP tables in netDir (/proc/net, or
// /proc/PID/net for another process's namespace) show a socket listening
// on port, IPv4 or IPv6. It reads the tables only: connecting to find out
// would use up a perftest server's one accept.
func Listening(netDir string, port int) bool {
	want := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"tcp", "tcp6"} {
		b, _ := os.ReadFile(filepath.Join(netDir, f))
		for _, line := range strings.Split(string(b), "\n") {
			fs := strings.Fields(line)
			if len(fs) > 3 && strings.HasSuffix(fs[1], want) && fs[3] == "0A" {
				return true
			}
		}
	}
	return false
}

// CMListening reports whether out, the output of iproute2's "rdma res
// show cm_id", shows an identifier in state LISTEN whose source address
// has port port (a wildcard listener shows once per device it was cloned
// onto, e.g. "link rxe0/1 cm-idn 0 state LISTEN ps TCP pid 251 comm rping
// src-addr 0.0.0.0:7174 dst-addr 0.0.0.0:0").
func CMListening(out string, port int) bool {
	want := ":" + strconv.Itoa(port)
	for _, line := range strings.Split(out, "\n") {
		fs := strings.Fields(line)
		listen, match := false, false
		for i := 0; i+1 < len(fs); i++ {
			switch fs[i] {
			case "state":
				listen = fs[i+1] == "LISTEN"
			case "src-addr":
				match = strings.HasSuffix(fs[i+1], want)
			}
		}
		if listen && match {
			return true
		}
	}
	return false
}
