package rdiagcmd

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/internal/diag/devinfo"
	"github.com/rperf/rperf/internal/sysfs"
)

// gidJSON is one entry of `rdiag gids --json` (and of a port's "gids" in
// `rdiag info --json`).
type gidJSON struct {
	Device       string `json:"device"`
	Port         int    `json:"port"`
	Index        int    `json:"index"`
	GID          string `json:"gid"`
	Raw          string `json:"raw"`
	Type         string `json:"type"`
	Netdev       string `json:"netdev"`
	PerftestPick bool   `json:"perftest_pick"`
}

func newGIDJSON(dev string, p devinfo.Port, g sysfs.GID, pick bool) gidJSON {
	return gidJSON{Device: dev, Port: p.Number, Index: g.Index, GID: g.String(), Raw: g.SysfsString(),
		Type: g.Type.String(), Netdev: g.NetDev, PerftestPick: pick}
}

// perftestPick is the GID perftest chooses on p without -x: only on
// RoCE ports, where it always uses a GID; on InfiniBand ports it uses
// none unless told, and iWARP connects through rdma_cm by IP address.
// ipv6 is perftest's --ipv6.
func perftestPick(p devinfo.Port, ipv6 bool) (sysfs.GID, bool) {
	if p.LinkLayer.V != sysfs.LinkLayerEthernet || p.IWARP {
		return sysfs.GID{}, false
	}
	return sysfs.BestGID(p.GIDs, ipv6)
}

func newGIDsCmd(o *options) *cobra.Command {
	var ipv6 bool
	cmd := &cobra.Command{
		Use:   "gids [DEV]",
		Short: "Show the GID tables, marking the GID perftest would pick",
		Long: `Show the non-zero entries of every port's GID table: index (perftest's -x),
address, type (IB, RoCE v1, RoCE v2) and netdev. On RoCE ports the GID
perftest picks by itself (no -x) is marked with "*": the highest score of
+100 for an IPv4-mapped address (IPv6 with --ipv6), +10 for a routable one
(not link-local), +2 for RoCE v2 (+1 v1), the lowest index on a tie.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			inv, devs, err := o.argDevices(args)
			if err != nil {
				return err
			}
			return o.runGIDs(cmd.OutOrStdout(), inv, devs, ipv6)
		},
	}
	cmd.Flags().BoolVar(&ipv6, "ipv6", false, "mark the GID perftest picks with --ipv6")
	return cmd
}

func (o *options) runGIDs(w io.Writer, inv *inventory, devs []device, ipv6 bool) error {
	out := []gidJSON{}
	picked := false
	for _, d := range devs {
		v := o.view(inv, d)
		for _, p := range v.desc.Ports {
			best, ok := perftestPick(p, ipv6)
			for _, g := range p.GIDs {
				pick := ok && g.Index == best.Index
				picked = picked || pick
				out = append(out, newGIDJSON(d.info.Name, p, g, pick))
			}
		}
	}
	if o.json {
		return writeJSON(w, out)
	}
	var rows [][]string
	for _, g := range out {
		mark := ""
		if g.PerftestPick {
			mark = "*"
		}
		rows = append(rows, []string{g.Device, strconv.Itoa(g.Port), strconv.Itoa(g.Index), g.GID, g.Type, orDash(g.Netdev), mark})
	}
	if err := writeTable(w, []string{"DEVICE", "PORT", "INDEX", "GID", "TYPE", "NETDEV", "PERFTEST"}, rows); err != nil {
		return err
	}
	if picked {
		family := "IPv4"
		if ipv6 {
			family = "IPv6"
		}
		fmt.Fprintf(w, "* the GID perftest picks without -x (%s preferred, then routable, then RoCE v2)\n", family)
	}
	writeWarnings(w, inv.warnings)
	return nil
}
