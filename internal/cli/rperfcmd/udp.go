package rperfcmd

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/tests/bw"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// The built-in engine's udp fabric (devices udp_<netdev>: RoCEv2 over UDP,
// between hosts), GID selection and data validation.
//
// A udp-fabric context binds a UDP port (4791 by default, --udp-port). A
// side on another port announces it as its LID in the key exchange, and
// the peer sends there (LID 0 means 4791, so Linux Soft-RoCE peers
// interoperate); the two sides may therefore use different ports, which
// --loopback relies on: its client takes a free port and its server 4791,
// or a free one when 4791 is taken.

// udpOptions are the flags of this file.
type udpOptions struct {
	udpPort   int
	gidIndex  int
	ipv6      bool
	checkData bool // --validate
}

// Flag names.
const (
	udpPortFlag   = "udp-port"
	gidIndexFlag  = "gid-index"
	validateFlag  = "validate"
	perftestValid = "data_validation" // perftest's spelling of --validate
)

func (o *options) registerUDP(fs *pflag.FlagSet) {
	fs.IntVar(&o.udpPort, udpPortFlag, verbsio.RoCEv2Port,
		"UDP port of a udp_<netdev> device (the built-in engine's RoCEv2 over UDP); 0: any free port. The peer learns it in the key exchange")
	fs.IntVarP(&o.gidIndex, gidIndexFlag, "x", session.AutoGID,
		"GID index (rdiag gids lists the table; default: perftest's choice, an IPv4-mapped RoCE v2 GID on Ethernet)")
	fs.Lookup(gidIndexFlag).DefValue = "auto"
	fs.BoolVar(&o.ipv6, "ipv6", false, "without -x, choose an IPv6 GID (perftest's --ipv6)")
	fs.BoolVar(&o.checkData, validateFlag, false,
		"fill every message with a pattern and check every byte that arrives (both sides must set it); the checks cost time")
	fs.BoolVar(&o.checkData, perftestValid, false, "perftest's spelling of --validate")
	fs.MarkHidden(perftestValid)
}

// validateUDP checks this file's flags by themselves.
func (o *options) validateUDP() error {
	_, udp := verbsio.UDPNetdev(o.device)
	switch {
	case o.udpPort < 0 || o.udpPort > 65535:
		return cli.Usagef("--udp-port %d: not a UDP port (0 picks a free one)", o.udpPort)
	case o.changed(udpPortFlag) && !udp:
		return cli.Usagef("--udp-port applies to the udp fabric's devices (-d udp_<netdev>); -d %s does not use UDP", o.device)
	case o.changed(gidIndexFlag) && o.gidIndex < 0:
		return cli.Usagef("-x %d: GID indexes count from 0 (rdiag gids lists them)", o.gidIndex)
	case o.changed(gidIndexFlag) && o.ipv6:
		return cli.Usagef("-x and --ipv6 conflict: --ipv6 chooses the GID when -x does not; drop one of them")
	}
	return nil
}

// openOptions are the options the device is opened with: the UDP port on
// the udp fabric (a free one for --loopback's client).
func (o *options) openOptions() verbsio.OpenOptions {
	var oo verbsio.OpenOptions
	_, udp := verbsio.UDPNetdev(o.device)
	switch {
	case !udp:
	case o.loopback || o.udpPort == 0:
		oo.UDPPort = -1
	default:
		oo.UDPPort = o.udpPort
	}
	return oo
}

// openUDPAware opens the device; on the udp fabric a port in use is
// explained, and --loopback's server falls back to a free port when the
// default one is taken.
func (o *options) openUDPAware() (*verbsio.Context, error) {
	oo := o.openOptions()
	dev, err := openDevice(o.device, oo)
	if name, udp := verbsio.UDPNetdev(o.device); udp && errors.Is(err, unix.ENODEV) {
		// The engine lists only network devices with an address.
		if ifi, ierr := net.InterfaceByName(name); ierr == nil {
			if addrs, aerr := ifi.Addrs(); aerr == nil && len(addrs) == 0 {
				return nil, &cli.EnvironmentError{Err: fmt.Errorf("-d %s: network device %s has no IP address, and the udp fabric sends from the device's addresses; give it one (ip addr add ADDR/LEN dev %s), or pick a device rdiag devices lists", o.device, name, name)}
			}
		}
	}
	if err == nil || !errors.Is(err, unix.EADDRINUSE) {
		return dev, err
	}
	if o.loopbackServer && !o.changed(udpPortFlag) {
		oo.UDPPort = -1
		return openDevice(o.device, oo)
	}
	port := strconv.Itoa(o.udpPort)
	return nil, fmt.Errorf("-d %s: UDP port %s is already in use on this host (another rperf or engine, or a kernel rxe device); give this side another with --udp-port N, or --udp-port 0 for any free port", o.device, port)
}

// checkGID checks -x against the device's GID table.
func (o *options) checkGID(dev *verbsio.Context) error {
	if !o.changed(gidIndexFlag) {
		return nil
	}
	tbl, err := dev.QueryGIDTable(uint8(o.ibPort))
	if err != nil {
		return fmt.Errorf("-x %d: query the GID table of %s: %w", o.gidIndex, o.device, err)
	}
	for _, e := range tbl {
		if e.Index == o.gidIndex {
			return nil
		}
	}
	have := fmt.Sprintf("%d GIDs, indexes 0 to %d", len(tbl), len(tbl)-1)
	if len(tbl) == 1 {
		have = "one GID, index 0"
	}
	return cli.Usagef("-x %d: port %d of %s has %s (rdiag gids %s lists them)", o.gidIndex, o.ibPort, o.device, have, o.device)
}

// fitValidation lowers, for --validate, the default tx and rx depths of a
// bandwidth test until a buffer for every outstanding message fits
// bw.ValidateBudget; depths the user set are kept, and a run that still
// does not fit is refused with the test's Check.
func (o *options) fitValidation(sizes []int) error {
	if !o.checkData || o.lat() {
		return nil
	}
	for {
		cfg := o.bwConfig(sizes)
		canTx := !o.changed("tx-depth") && o.txDepth/2 >= max(o.postList, 1)
		canRx := o.verb() == session.Send && !o.changed("rx-depth") && o.rxDepth > 1
		switch {
		case cfg.ValidationBytes() <= bw.ValidateBudget:
			return nil
		case canTx && (!canRx || o.txDepth >= o.rxDepth):
			o.txDepth /= 2 // the larger of the two first
		case canRx:
			o.rxDepth /= 2
		default:
			return o.check(sizes)
		}
	}
}
