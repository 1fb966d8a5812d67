package sysfs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Port states as the kernel numbers them (enum ib_port_state), which is
// also libibverbs' enum ibv_port_state.
const (
	PortNop         = 0
	PortDown        = 1
	PortInit        = 2
	PortArmed       = 3
	PortActive      = 4
	PortActiveDefer = 5
)

// Physical port states (IBA PortPhysicalState), as in phys_state.
const (
	PhysSleep              = 1
	PhysPolling            = 2
	PhysDisabled           = 3
	PhysPortConfigTraining = 4
	PhysLinkUp             = 5
	PhysLinkErrorRecovery  = 6
	PhysPhyTest            = 7
)

// PortState is a port's logical state, read from ports/N/state
// ("4: ACTIVE"). Code is the number, Name the kernel's word for it.
type PortState struct {
	Code int
	Name string
}

// PhysState is a port's physical state, read from ports/N/phys_state
// ("5: LinkUp"). Code is the number, Name the kernel's word for it.
type PhysState struct {
	Code int
	Name string
}

// NodeType is a device's node type, read from node_type ("1: CA").
type NodeType struct {
	Code int
	Name string
}

// Node types (enum rdma_node_type).
const (
	NodeCA          = 1
	NodeSwitch      = 2
	NodeRouter      = 3
	NodeRNIC        = 4
	NodeUSNIC       = 5
	NodeUSNICUDP    = 6
	NodeUnspecified = 7
)

// parseCoded parses the kernel's "N: NAME" attribute format.
func parseCoded(s string) (int, string, error) {
	num, name, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return 0, "", fmt.Errorf(`parse %q: want "N: NAME"`, s)
	}
	code, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || code < 0 {
		return 0, "", fmt.Errorf(`parse %q: want "N: NAME"`, s)
	}
	return code, strings.TrimSpace(name), nil
}

// ParsePortState parses the contents of ports/N/state.
func ParsePortState(s string) (PortState, error) {
	c, n, err := parseCoded(s)
	if err != nil {
		return PortState{}, fmt.Errorf("port state: %w", err)
	}
	return PortState{Code: c, Name: n}, nil
}

// ParsePhysState parses the contents of ports/N/phys_state.
func ParsePhysState(s string) (PhysState, error) {
	c, n, err := parseCoded(s)
	if err != nil {
		return PhysState{}, fmt.Errorf("phys state: %w", err)
	}
	return PhysState{Code: c, Name: n}, nil
}

// ParseNodeType parses the contents of node_type.
func ParseNodeType(s string) (NodeType, error) {
	c, n, err := parseCoded(s)
	if err != nil {
		return NodeType{}, fmt.Errorf("node type: %w", err)
	}
	return NodeType{Code: c, Name: n}, nil
}

// Rate is a port's signalling rate, read from ports/N/rate, for example
// "2.5 Gb/sec (1X SDR)" or "100 Gb/sec (4X EDR)".
type Rate struct {
	// Gbps is the total rate in Gb/s (2.5, 100).
	Gbps float64
	// Width is the number of lanes (1, 2, 4, 8 or 12).
	Width int
	// Speed is the per-lane speed name: SDR, DDR, QDR, FDR10, FDR, EDR,
	// HDR, NDR or XDR. Very old kernels omitted "SDR"; it is filled in.
	Speed string
}

// BytesPerSecond is the rate in bytes per second (Gb/s × 125000000), the
// figure prometheus/procfs reports.
func (r Rate) BytesPerSecond() uint64 {
	return uint64(r.Gbps * 125000000)
}

// ParseRate parses the contents of ports/N/rate.
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	bad := func(why string) (Rate, error) {
		return Rate{}, fmt.Errorf("rate: parse %q: %s", s, why)
	}
	num, rest, ok := strings.Cut(s, " Gb/sec")
	if !ok {
		return bad("no \" Gb/sec\"")
	}
	gbps, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || gbps < 0 {
		return bad("bad number")
	}
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
		return bad("no \"(WIDTH SPEED)\"")
	}
	inner := strings.TrimSuffix(strings.TrimPrefix(rest, "("), ")")
	w, speed, _ := strings.Cut(inner, " ")
	lanes, ok := strings.CutSuffix(w, "X")
	if !ok {
		return bad("width without X")
	}
	width, err := strconv.Atoi(lanes)
	if err != nil || width <= 0 {
		return bad("bad width")
	}
	speed = strings.TrimSpace(speed)
	if speed == "" {
		speed = "SDR"
	}
	return Rate{Gbps: gbps, Width: width, Speed: speed}, nil
}

// GUID is a 64-bit node, system image or port GUID.
type GUID uint64

// ParseGUID parses the kernel's "xxxx:xxxx:xxxx:xxxx" GUID format.
func ParseGUID(s string) (GUID, error) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) != 4 {
		return 0, fmt.Errorf("guid: parse %q: want 4 groups", s)
	}
	var g uint64
	for _, p := range parts {
		if len(p) == 0 || len(p) > 4 {
			return 0, fmt.Errorf("guid: parse %q: bad group %q", s, p)
		}
		v, err := strconv.ParseUint(p, 16, 16)
		if err != nil {
			return 0, fmt.Errorf("guid: parse %q: bad group %q", s, p)
		}
		g = g<<16 | v
	}
	return GUID(g), nil
}

// String formats g as sysfs and ibv_devinfo do: "5054:00ff:fe77:0001".
func (g GUID) String() string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", uint16(g>>48), uint16(g>>32), uint16(g>>16), uint16(g))
}

// Hex formats g as ibv_devices does: "505400fffe770001".
func (g GUID) Hex() string {
	return fmt.Sprintf("%016x", uint64(g))
}

// parseHexOrDec parses "0x1f" as hex and anything else as decimal, with
// bits as the size limit. The kernel prints LIDs and masks in hex and the
// rest in decimal.
func parseHexOrDec(s string, bits int) (uint64, error) {
	s = strings.TrimSpace(s)
	if h, ok := strings.CutPrefix(s, "0x"); ok {
		return strconv.ParseUint(h, 16, bits)
	}
	return strconv.ParseUint(s, 10, bits)
}

// errNA marks a counter that reads "N/A ..." (for example "N/A (no PMA)"
// when the port's performance management agent cannot be queried).
var errNA = errors.New("counter not available")

// parseCounter parses a counters/* or hw_counters/* value.
func parseCounter(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "N/A") {
		return 0, errNA
	}
	v, err := parseHexOrDec(s, 64)
	if err != nil {
		return 0, fmt.Errorf("counter: parse %q: not a number", s)
	}
	return v, nil
}
