package rdiagcmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/roce/flows"
)

// pcapJSON is `rdiag pcap --json`. Each element of flows has the fields
// of internal/roce/flows.Flow (src, dst, dest_qp, src_qp, udp_src_port,
// packets, payload_bytes, requests, responses, opcodes, psn_first,
// psn_last, psn_gaps, psn_missing, retransmissions, acks, naks,
// nak_syndromes, rnr_naks, cnps, fecn, becn, icrc_errors,
// first_timestamp, last_timestamp). cm_mads are the connection manager's
// MADs (UD SEND_ONLY to QP 1), decoded: time, src, dst, attr, tid,
// summary, and error when one does not decode.
type pcapJSON struct {
	File             string         `json:"file"`
	Format           string         `json:"format"`
	Frames           int            `json:"frames"`
	Packets          int            `json:"packets"`
	PayloadBytes     int64          `json:"payload_bytes"`
	ICRCErrors       int            `json:"icrc_errors"`
	NonRoCEFrames    int            `json:"non_roce_frames"`
	TruncatedFrames  int            `json:"truncated_frames"`
	MalformedFrames  int            `json:"malformed_frames"`
	MalformedReasons map[string]int `json:"malformed_reasons"`
	FlowCount        int            `json:"flow_count"`
	FirstTimestamp   *time.Time     `json:"first_timestamp"`
	LastTimestamp    *time.Time     `json:"last_timestamp"`
	Flows            []*flows.Flow  `json:"flows"`
	CMMADs           []flows.MAD    `json:"cm_mads"`
	CMMADsOmitted    int            `json:"cm_mads_omitted"`
	// Error is set when the capture is damaged after its header: the
	// summary covers the frames before the damage.
	Error *string `json:"error"`
}

func newPcapCmd(o *options) *cobra.Command {
	var mtu int
	cmd := &cobra.Command{
		Use:   "pcap FILE",
		Short: "Decode the RoCEv2 packets of a capture, verify their ICRC and summarise each QP flow",
		Long: `Read a packet capture (pcap or pcapng; "-" reads standard input), decode
every RoCEv2 packet (UDP port 4791 over IPv4 or IPv6), verify its ICRC, and
summarise each QP flow (one direction of traffic to one destination QP):
packets, payload bytes, opcodes, PSN range, PSN gaps, retransmissions, ACKs,
NAKs with their syndromes, RNR NAKs and ICRC failures. Connection manager
MADs (UD SEND_ONLY to QP 1: REQ, REP, RTU, REJ, MRA, DREQ, DREP, SIDR_REQ,
SIDR_REP, as rdma_cm sends them) are decoded and listed one per line.

--mtu gives the path MTU so that an RDMA READ request's PSN span is exact;
without it a gap is reported only beyond the widest span any MTU allows.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if mtu != 0 && !slices.Contains([]int{256, 512, 1024, 2048, 4096}, mtu) {
				return cli.Usagef("--mtu %d: want 256, 512, 1024, 2048 or 4096", mtu)
			}
			return o.runPcap(cmd.OutOrStdout(), cmd.InOrStdin(), args[0], mtu)
		},
	}
	cmd.Flags().IntVar(&mtu, "mtu", 0, "path MTU of the captured traffic (256..4096); 0: unknown")
	return cmd
}

func (o *options) runPcap(w io.Writer, stdin io.Reader, file string, mtu int) error {
	var r io.Reader = stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return cleanPathErr(err)
		}
		defer f.Close()
		r = f
	}
	sum, err := flows.SummariseOptions(r, flows.Options{MTU: mtu})
	if err != nil && sum.Format == "" {
		return fmt.Errorf("%s: %w", file, err)
	}
	out := pcapJSON{
		File: file, Format: sum.Format, Frames: sum.Frames, Packets: sum.Packets,
		PayloadBytes: sum.PayloadBytes, ICRCErrors: sum.ICRCErrors, NonRoCEFrames: sum.NonRoCEFrames,
		TruncatedFrames: sum.TruncatedFrames, MalformedFrames: sum.MalformedFrames,
		MalformedReasons: sum.MalformedReasons, FlowCount: sum.FlowCount,
		FirstTimestamp: sum.FirstTimestamp, LastTimestamp: sum.LastTimestamp, Flows: sum.Flows,
		CMMADs: sum.MADs, CMMADsOmitted: sum.MADsOmitted,
	}
	if out.CMMADs == nil {
		out.CMMADs = []flows.MAD{}
	}
	if out.MalformedReasons == nil {
		out.MalformedReasons = map[string]int{}
	}
	if out.Flows == nil {
		out.Flows = []*flows.Flow{}
	}
	if err != nil {
		out.Error = ptr(err.Error())
	}
	if o.json {
		if werr := writeJSON(w, out); werr != nil {
			return werr
		}
	} else if werr := writePcapTable(w, out); werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("%s: capture damaged after %d frames (the summary covers them): %w", file, sum.Frames, err)
	}
	return nil
}

// cleanPathErr turns an *os.PathError into "open FILE: REASON", a plain
// message without the path error's type.
func cleanPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s %s: %w", pe.Op, pe.Path, pe.Err)
	}
	return err
}

func writePcapTable(w io.Writer, s pcapJSON) error {
	fmt.Fprintf(w, "capture %s (%s): %d frames, %d RoCEv2 packets, %d payload bytes, %d ICRC errors, %d flows\n",
		s.File, s.Format, s.Frames, s.Packets, s.PayloadBytes, s.ICRCErrors, s.FlowCount)
	fmt.Fprintf(w, "skipped: %d non-RoCE, %d truncated, %d malformed frames\n", s.NonRoCEFrames, s.TruncatedFrames, s.MalformedFrames)
	for _, reason := range sortedKeys(s.MalformedReasons) {
		fmt.Fprintf(w, "  malformed: %s (%d)\n", reason, s.MalformedReasons[reason])
	}
	if s.FirstTimestamp != nil && s.LastTimestamp != nil {
		fmt.Fprintf(w, "time: %s to %s (%s)\n", s.FirstTimestamp.UTC().Format(time.RFC3339Nano),
			s.LastTimestamp.UTC().Format(time.RFC3339Nano), s.LastTimestamp.Sub(*s.FirstTimestamp))
	}
	if len(s.Flows) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	header := []string{"FLOW", "SRC", "DST", "DEST_QP", "PACKETS", "BYTES", "REQ", "RESP", "OPCODES", "PSN_FIRST", "PSN_LAST",
		"GAPS", "MISSING", "RETX", "ACKS", "NAKS", "RNR_NAKS", "ICRC_ERR"}
	var rows [][]string
	for i, f := range s.Flows {
		qp := fmt.Sprintf("0x%06x", f.DestQP)
		if f.SrcQP != nil {
			qp += fmt.Sprintf(" (from 0x%06x)", *f.SrcQP)
		}
		naks := strconv.Itoa(f.NAKs)
		if len(f.NAKSyndromes) > 0 {
			naks += " (" + countsText(f.NAKSyndromes) + ")"
		}
		rows = append(rows, []string{strconv.Itoa(i + 1), f.Src.String(), f.Dst.String(), qp,
			strconv.Itoa(f.Packets), strconv.FormatInt(f.PayloadBytes, 10), strconv.Itoa(f.Requests), strconv.Itoa(f.Responses),
			countsText(f.Opcodes), psnText(f.PSNFirst), psnText(f.PSNLast),
			strconv.Itoa(f.PSNGaps), strconv.FormatInt(f.PSNMissing, 10), strconv.Itoa(f.Retransmits),
			strconv.Itoa(f.ACKs), naks, strconv.Itoa(f.RNRNAKs), strconv.Itoa(f.ICRCErrors)})
	}
	if err := writeTable(w, header, rows); err != nil {
		return err
	}
	return writeMADs(w, s)
}

// writeMADs lists the CM MADs, timed from the capture's first packet.
func writeMADs(w io.Writer, s pcapJSON) error {
	if len(s.CMMADs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nconnection manager MADs: %d", len(s.CMMADs)+s.CMMADsOmitted)
	if s.CMMADsOmitted > 0 {
		fmt.Fprintf(w, " (the first %d listed)", len(s.CMMADs))
	}
	fmt.Fprintln(w)
	var rows [][]string
	for _, m := range s.CMMADs {
		at := "-"
		if s.FirstTimestamp != nil {
			at = fmt.Sprintf("+%.6f", m.Time.Sub(*s.FirstTimestamp).Seconds())
		}
		what := m.Summary
		if m.Error != "" {
			what = fmt.Sprintf("%s tid %#x: does not decode: %s", orDash(m.Attr), m.TID, m.Error)
		}
		rows = append(rows, []string{at, m.Src.String(), m.Dst.String(), what})
	}
	return writeTable(w, []string{"TIME", "SRC", "DST", "MAD"}, rows)
}

// countsText prints a count map as "A=1 B=2", by key.
func countsText(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return orDash(strings.Join(parts, " "))
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func psnText(p *uint32) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatUint(uint64(*p), 10)
}
