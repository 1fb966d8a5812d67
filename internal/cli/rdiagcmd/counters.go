package rdiagcmd

import (
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/verbsio/soft"
)

// counterColumns are the counters the table shows, in order, with their
// headers; --json carries every counter.
var counterColumns = []struct{ name, header string }{
	{"sent_pkts", "SENT"}, {"rcvd_pkts", "RCVD"}, {"retransmitted", "RETX"}, {"rewinds", "REWINDS"},
	{"duplicate_request", "DUP"}, {"out_of_seq_request", "OOS"}, {"icrc_errors", "ICRC_ERR"},
	{"timeouts", "TIMEOUTS"}, {"nak_sent", "NAK_TX"}, {"nak_rcvd", "NAK_RX"},
	{"rnr_nak_sent", "RNR_TX"}, {"rnr_nak_rcvd", "RNR_RX"}, {"unknown_qp", "UNKNOWN_QP"},
	{"bad_pkey", "BAD_PKEY"}, {"wrong_peer", "WRONG_PEER"}, {"malformed", "MALFORMED"}, {"socket_drops", "SOCK_DROPS"},
}

func newCountersCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "counters",
		Short: "Show the transport counters of the built-in engine's running udp-fabric contexts",
		Long: `Show the transport counters every running udp-fabric context of the built-in
engine publishes on this host (in ` + soft.StatsDir + `), as sysfs shows a
kernel device's hw_counters: packets sent and received, packets retransmitted and go-back-N rewinds,
duplicate requests, out-of-sequence requests, ICRC errors, timeouts, NAKs
and RNR NAKs sent and received, packets for unknown QPs, with a bad P_Key
or from an address other than the QP's peer, malformed packets, datagrams
the socket dropped.
A context's counters disappear when it closes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stats, err := soft.LiveStats()
			if err != nil {
				return err
			}
			return o.runCounters(cmd.OutOrStdout(), stats)
		},
	}
}

func (o *options) runCounters(w io.Writer, stats []soft.ContextStats) error {
	if stats == nil {
		stats = []soft.ContextStats{}
	}
	if o.json {
		return writeJSON(w, stats)
	}
	if len(stats) == 0 {
		_, err := io.WriteString(w, "no running udp-fabric contexts on this host (counters appear while rperf runs on a udp_* device)\n")
		return err
	}
	header := []string{"PID", "DEVICE", "PORT"}
	for _, c := range counterColumns {
		header = append(header, c.header)
	}
	var rows [][]string
	for _, s := range stats {
		row := []string{strconv.Itoa(s.PID), s.Device, strconv.Itoa(s.UDPPort)}
		for _, c := range counterColumns {
			row = append(row, strconv.FormatUint(s.Counters[c.name], 10))
		}
		rows = append(rows, row)
	}
	return writeTable(w, header, rows)
}
