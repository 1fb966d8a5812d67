package rperfcmd

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/tests/rping"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm"
)

// rpingOptions are rping's flags, spelled as rping spells them, with
// rperf's -d for the device.
type rpingOptions struct {
	server, client   bool
	addr, srcAddr    string
	port             int
	count, size      int
	verbose, valid   bool
	selfQP           bool
	device           string
	udpPort, peerUDP int
	timeout          time.Duration
}

func newRpingCommand() *cobra.Command {
	o := &rpingOptions{}
	cmd := &cobra.Command{
		Use:   "rping (-s | -c) [-a ADDR] [flags]",
		Short: "rping over rdma_cm: talks to librdmacm's rping in either role",
		Long: `rping over rdma_cm, speaking librdmacm's rping protocol: the client sends
the address of a buffer, the server RDMA READs it and RDMA WRITEs it back to
the client's second buffer, COUNT times. Either side can be rdma-core's rping.

Examples:
  rperf rping -s -a 10.0.0.1 -v              server (one client, then exit)
  rperf rping -c -a 10.0.0.1 -C 3 -v -V      client, 3 pings, checked
  rperf rping -c -a 10.0.0.1 -C 3 -q         the same with a QP of its own (deferred establish)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return oneLine(o.run(cmd))
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.BoolVarP(&o.server, "server", "s", false, "serve (rping -s)")
	fs.BoolVarP(&o.client, "client", "c", false, "connect (rping -c)")
	fs.StringVarP(&o.addr, "addr", "a", "", "the server's address: where a server listens (default: every address), where a client connects")
	fs.StringVarP(&o.srcAddr, "source", "I", "", "the client's source address (rping -I)")
	fs.IntVarP(&o.port, "port", "p", rping.DefaultPort, "rdma_cm port")
	fs.IntVarP(&o.count, "count", "C", 1, "pings the client sends")
	fs.IntVarP(&o.size, "size", "S", rping.DefaultSize, fmt.Sprintf("ping size in bytes (%d..%d)", rping.MinSize, rping.MaxSize))
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "print each ping's data, as rping -v")
	fs.BoolVarP(&o.valid, "validate", "V", false, "check each echo against what was sent (rping -V)")
	fs.BoolVarP(&o.selfQP, "self-qp", "q", false, "use a self-created, self-modified QP (rping -q): created with verbs, moved to RTS with the CM's attributes (rdma_init_qp_attr); the client completes the connection with rdma_establish")
	fs.StringVarP(&o.device, "ib-dev", "d", DefaultDevice, "device")
	fs.IntVar(&o.udpPort, udpPortFlag, verbsio.RoCEv2Port, "UDP port of a udp_<netdev> device; 0: any free port")
	fs.IntVar(&o.peerUDP, peerUDPPortFlag, verbsio.RoCEv2Port, "the client's target UDP port on a udp_<netdev> device: the server engine's --udp-port (4791 for a Linux RoCE peer)")
	fs.DurationVar(&o.timeout, "timeout", DefaultTimeout, "how long to wait for the peer")
	return cmd
}

func (o *rpingOptions) run(cmd *cobra.Command) error {
	if o.server == o.client {
		return cli.Usagef("give one of -s (server) and -c (client)")
	}
	if o.size < rping.MinSize || o.size > rping.MaxSize {
		return cli.Usagef("-S %d: rping's sizes are %d..%d", o.size, rping.MinSize, rping.MaxSize)
	}
	if o.client && (o.addr == "" || o.count < 1) {
		return cli.Usagef("a client needs the server's address (-a) and a count of at least 1 (-C)")
	}
	if o.port < 0 || o.port > 65535 || o.udpPort < 0 || o.udpPort > 65535 || o.peerUDP < 1 || o.peerUDP > 65535 {
		return cli.Usagef("-p, --udp-port and --peer-udp-port take port numbers")
	}
	var addr, src netip.Addr
	var err error
	if o.addr != "" {
		if addr, err = resolveHost(cmd.Context(), o.addr); err != nil {
			return cli.Usagef("-a %s: %v", o.addr, err)
		}
	}
	if o.srcAddr != "" {
		if src, err = netip.ParseAddr(o.srcAddr); err != nil {
			return cli.Usagef("-I %q: not an IP address", o.srcAddr)
		}
	}
	var oo verbsio.OpenOptions
	if _, udp := verbsio.UDPNetdev(o.device); udp {
		oo.UDPPort = o.udpPort
		if o.udpPort == 0 {
			oo.UDPPort = -1
		}
	}
	dev, err := openDevice(o.device, oo)
	if err != nil {
		return err
	}
	defer dev.Close()
	opts := rping.Options{Count: o.count, Size: o.size, Validate: o.valid, Verbose: o.verbose, SelfQP: o.selfQP, Out: cmd.OutOrStdout(), Timeout: o.timeout}
	if _, udp := verbsio.UDPNetdev(o.device); udp && o.peerUDP != verbsio.RoCEv2Port {
		port := uint16(o.peerUDP)
		opts.CM = cm.Options{PeerMADPort: func(netip.Addr) uint16 { return port }}
	}
	if o.server {
		if !addr.IsValid() {
			addr = netip.IPv4Unspecified()
		}
		// rping says nothing when it listens; this line, on stderr, lets
		// a script (the interop suite) start the client without racing.
		listening := func(a netip.AddrPort) {
			fmt.Fprintf(cmd.ErrOrStderr(), "rperf rping: waiting for a client on rdma_cm port %d (for up to %v)\n", a.Port(), o.timeout)
		}
		_, err := rping.Server(dev, netip.AddrPortFrom(addr, uint16(o.port)), opts, listening)
		return err
	}
	n, err := rping.Client(dev, src, netip.AddrPortFrom(addr, uint16(o.port)), opts)
	if err != nil {
		return fmt.Errorf("%w (after %d of %d pings)", err, n, o.count)
	}
	return nil
}
