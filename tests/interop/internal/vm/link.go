//go:build linux

// Package vm runs the interop suite's peer: a qemu VM (TCG) with Linux
// Soft-RoCE on its NIC, joined to the host through a bridge inside a
// private network namespace, and commanded through an agent over a
// virtio-serial port; and it runs host-side programs in that namespace.
package vm

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/rperf/rperf/internal/testsupport/netns"
)

// The link's fixed addressing. It exists only inside the namespace and the
// VM: no route leads out.
const (
	Bridge    = "br0"   // the host side's device: rperf's udp_br0
	Tap       = "itap0" // the VM's NIC's host end, on the bridge
	HostAddr  = "10.77.0.9"
	VMAddr    = "10.77.0.1"
	HostAddr6 = "fd00:77::9"
	VMAddr6   = "fd00:77::1"
	prefix4   = "/24"
	prefix6   = "/64"
)

// Link is the private namespace holding the bridge and the VM's tap.
type Link struct {
	NS string
}

// NewLink creates the namespace (named so that netns.CleanupStale removes
// it should this process die) with the bridge, its addresses and the tap.
func NewLink() (*Link, error) {
	if err := netns.Available(); err != nil {
		return nil, err
	}
	netns.CleanupStale()
	l := &Link{NS: netns.Prefix + strconv.Itoa(os.Getpid()) + "-interop"}
	if err := ip("netns", "add", l.NS); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", Bridge, "type", "bridge", "mcast_snooping", "0"},
		{"addr", "add", HostAddr + prefix4, "dev", Bridge},
		{"-6", "addr", "add", HostAddr6 + prefix6, "dev", Bridge, "nodad"},
		{"tuntap", "add", "dev", Tap, "mode", "tap"},
		{"link", "set", Tap, "master", Bridge},
		{"link", "set", Tap, "up"},
		{"link", "set", Bridge, "up"},
	}
	for _, s := range steps {
		if err := ip(append([]string{"-n", l.NS}, s...)...); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// Close deletes the namespace, which takes the bridge and tap with it.
func (l *Link) Close() error {
	return ip("netns", "delete", l.NS)
}

// Command returns cmd to run inside the namespace.
func (l *Link) Command(name string, args ...string) *exec.Cmd {
	return netns.Command(l.NS, name, args...)
}

func ip(args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
