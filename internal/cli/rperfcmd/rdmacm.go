package rperfcmd

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/spf13/pflag"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/rdmacm"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/cm"
)

// perftest's -R (--rdma_cm): the out-of-band messages and the test QPs go
// through rdma_cm instead of a TCP connection (package tests/rdmacm).

// rdmacmOptions are the flags of this file.
type rdmacmOptions struct {
	rdmaCM      bool
	peerUDPPort int    // the server engine's UDP port, for the client's CM
	sourceIP    string // --bind_source_ip
}

// Flag names.
const (
	rdmaCMFlag      = "rdma_cm"
	peerUDPPortFlag = "peer-udp-port"
	sourceIPFlag    = "bind_source_ip"
)

func (o *options) registerRDMACM(fs *pflag.FlagSet) {
	fs.BoolVarP(&o.rdmaCM, rdmaCMFlag, "R", false,
		"connect through rdma_cm, as perftest -R: the messages between the sides and the test's QPs (RC, UD) go over connections the CM sets up, not TCP")
	fs.IntVar(&o.peerUDPPort, peerUDPPortFlag, verbsio.RoCEv2Port,
		"with -R on a udp_<netdev> device: the UDP port the server's engine listens on (its --udp-port; 4791 for a Linux RoCE peer)")
	fs.StringVar(&o.sourceIP, sourceIPFlag, "", "with -R, the client's source IP address (perftest's --bind_source_ip)")
}

// validateRDMACM checks this file's flags by themselves.
func (o *options) validateRDMACM() error {
	_, udp := verbsio.UDPNetdev(o.device)
	switch {
	case !o.rdmaCM && o.changed(peerUDPPortFlag):
		return cli.Usagef("--%s applies with -R (--rdma_cm) only", peerUDPPortFlag)
	case !o.rdmaCM && o.changed(sourceIPFlag):
		return cli.Usagef("--%s applies with -R (--rdma_cm) only", sourceIPFlag)
	case o.changed(peerUDPPortFlag) && !udp:
		return cli.Usagef("--%s applies to the udp fabric's devices (-d udp_<netdev>); -d %s does not use UDP", peerUDPPortFlag, o.device)
	case o.peerUDPPort <= 0 || o.peerUDPPort > 65535:
		return cli.Usagef("--%s %d: not a UDP port", peerUDPPortFlag, o.peerUDPPort)
	case o.rdmaCM && o.connection == "UC":
		return cli.Usagef("-R with -c UC: rdma_cm connects RC and UD QPs only (perftest: \"UC is not supported in librdmacm\"); use -c RC or -c UD")
	}
	if o.sourceIP != "" {
		if _, err := netip.ParseAddr(o.sourceIP); err != nil {
			return cli.Usagef("--%s %q: not an IP address", sourceIPFlag, o.sourceIP)
		}
	}
	return nil
}

// cmOptions are the options of this side's CM agent: on the udp fabric
// the client sends its requests to --peer-udp-port.
func (o *options) cmOptions() rdmacm.Options {
	var co cm.Options
	if _, udp := verbsio.UDPNetdev(o.device); udp && o.peerUDPPort != verbsio.RoCEv2Port {
		port := uint16(o.peerUDPPort)
		co.PeerMADPort = func(netip.Addr) uint16 { return port }
	}
	return rdmacm.Options{CM: co, Timeout: max(o.timeout, rdmacm.DefaultTimeout)}
}

// connectCM is connect with -R: the client dials the server's rdma_cm
// port, the server listens on it and accepts one client.
func connectCM(ctx context.Context, o *options, dev *verbsio.Context, out io.Writer, listening func(int)) (*oob.Conn, error) {
	opts := oob.Options{IOTimeout: o.timeout, RDMACM: true}
	if o.host != "" {
		dst, err := resolveHost(ctx, o.host)
		if err != nil {
			return nil, err
		}
		var src netip.Addr
		if o.sourceIP != "" {
			src = netip.MustParseAddr(o.sourceIP)
		}
		dctx, cancel := context.WithTimeout(ctx, min(o.timeout, maxDialTimeout))
		defer cancel()
		ch, err := rdmacm.Dial(dctx, dev, src, netip.AddrPortFrom(dst, uint16(o.port)), o.cmOptions())
		if err != nil {
			return nil, err
		}
		return oob.NewConn(ch, false, opts)
	}
	host, wait := netip.IPv4Unspecified(), time.Duration(acceptWaitFactor)*o.timeout
	if o.loopbackServer {
		host, wait = netip.MustParseAddr("127.0.0.1"), loopbackAcceptWait
	}
	if o.sourceIP != "" {
		host = netip.MustParseAddr(o.sourceIP)
	}
	ln, err := rdmacm.Listen(dev, netip.AddrPortFrom(host, uint16(o.port)), o.cmOptions())
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	port := int(ln.Addr().Port())
	fmt.Fprintf(out, "\n Waiting for a client on rdma_cm port %d (for up to %v) ...\n", port, wait)
	if listening != nil {
		listening(port)
	}
	ch, err := ln.Accept(ctx, wait)
	if err != nil {
		return nil, err
	}
	return oob.NewConn(ch, true, opts)
}

// resolveHost turns the server's name or address into an IP address, an
// IPv4 one when it has both (perftest's rdma_cm asks for AF_INET).
func resolveHost(ctx context.Context, host string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("-R: resolve %q: %v", host, err)
	}
	for _, a := range ips {
		if a.Unmap().Is4() {
			return a.Unmap(), nil
		}
	}
	return ips[0], nil
}
