package rdiagcmd

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/internal/diag/devinfo"
)

// portJSON is one entry of `rdiag ports --json`. Null is unknown.
type portJSON struct {
	Device          string   `json:"device"`
	Port            int      `json:"port"`
	Provider        string   `json:"provider"`
	State           *string  `json:"state"`
	StateCode       *int     `json:"state_code"`
	PhysState       *string  `json:"phys_state"`
	PhysStateCode   *int     `json:"phys_state_code"`
	LinkLayer       *string  `json:"link_layer"`
	RateGbps        *float64 `json:"rate_gbps"`
	Width           *string  `json:"width"`
	Speed           *string  `json:"speed"`
	ActiveMTU       *int     `json:"active_mtu"`
	ActiveMTUSource *string  `json:"active_mtu_source"`
	MaxMTU          *int     `json:"max_mtu"`
	MaxMTUSource    *string  `json:"max_mtu_source"`
	Netdev          string   `json:"netdev"`
	NetdevMTU       *int     `json:"netdev_mtu"`
	LID             *uint32  `json:"lid"`
	SMLID           *uint32  `json:"sm_lid"`
}

func newPortsCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "ports [DEV]",
		Short: "Show port state, physical state, link layer, speed, width and MTU",
		Long: `Show every port of one device or all: logical and physical state, link
layer, rate (speed per lane and width), active and max MTU, and the netdev
with its MTU. For kernel devices read from sysfs, the active MTU of a RoCE
port is derived from its netdev's MTU and marked so; without a verbs query
the max MTU is unknown (except rxe's, a driver constant).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			inv, devs, err := o.argDevices(args)
			if err != nil {
				return err
			}
			return o.runPorts(cmd.OutOrStdout(), inv, devs)
		},
	}
}

func (o *options) runPorts(w io.Writer, inv *inventory, devs []device) error {
	out := []portJSON{}
	var notes []string
	for _, d := range devs {
		v := o.view(inv, d)
		for _, p := range v.desc.Ports {
			out = append(out, newPortJSON(d, p))
			if p.ActiveMTUFrom == devinfo.FromNetdevMTU && p.ActiveMTU.OK && v.desc.Attr == nil {
				notes = append(notes, fmt.Sprintf("%s/%d: active MTU derived from netdev %s MTU %d (sysfs has no MTU)", d.info.Name, p.Number, p.Netdev, *p.NetdevMTU))
			}
		}
		if len(v.desc.Ports) == 0 && d.info.Ports > 0 {
			for _, n := range v.notes {
				notes = append(notes, d.info.Name+": "+n)
			}
		}
	}
	if o.json {
		return writeJSON(w, out)
	}
	header := []string{"DEVICE", "PORT", "STATE", "PHYS_STATE", "LINK_LAYER", "RATE", "SPEED", "WIDTH", "ACTIVE_MTU", "MAX_MTU", "NETDEV", "NETDEV_MTU"}
	var rows [][]string
	for _, p := range out {
		rate := "-"
		if p.RateGbps != nil {
			rate = fmt.Sprintf("%g Gb/s", *p.RateGbps)
		}
		rows = append(rows, []string{p.Device, strconv.Itoa(p.Port), strOr(p.State, "unknown"), strOr(p.PhysState, "unknown"),
			strOr(p.LinkLayer, "unknown"), rate, strOr(p.Speed, "-"), strOr(p.Width, "-"),
			intOr(p.ActiveMTU, "unknown"), intOr(p.MaxMTU, "unknown"), orDash(p.Netdev), intOr(p.NetdevMTU, "-")})
	}
	if err := writeTable(w, header, rows); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	writeWarnings(w, inv.warnings)
	return nil
}

func newPortJSON(d device, p devinfo.Port) portJSON {
	j := portJSON{Device: d.info.Name, Port: p.Number, Provider: d.info.Provider, Netdev: p.Netdev,
		NetdevMTU: p.NetdevMTU, LID: p.LID.Ptr(), SMLID: p.SMLID.Ptr(),
		ActiveMTU: mtuBytes(p.ActiveMTU), MaxMTU: mtuBytes(p.MaxMTU)}
	if p.State.OK {
		j.State, j.StateCode = ptr(portStateName(p.State.V)), ptr(p.State.V)
	}
	if p.PhysState.OK {
		j.PhysState, j.PhysStateCode = ptr(physStateName(p.PhysState.V)), ptr(p.PhysState.V)
	}
	j.LinkLayer = p.LinkLayer.Ptr()
	if r := p.Rate; r.OK {
		j.RateGbps = ptr(r.V.Gbps)
		j.Width = ptr(strconv.Itoa(r.V.Width) + "X")
		j.Speed = ptr(devinfo.LaneSpeedText(r.V))
	}
	if j.ActiveMTU != nil {
		j.ActiveMTUSource = ptr(p.ActiveMTUFrom)
	}
	if j.MaxMTU != nil {
		j.MaxMTUSource = ptr(p.MaxMTUFrom)
	}
	return j
}

func strOr(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

func intOr(p *int, def string) string {
	if p == nil {
		return def
	}
	return strconv.Itoa(*p)
}
