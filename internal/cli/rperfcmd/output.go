package rperfcmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/table"
	"github.com/rperf/rperf/tests/dm"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/pacing"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
)

// Everything rperf writes: the headers of the tests, the comparisons and
// the sweep (perftest's layout, ending with the same Peer and Clock
// lines), their tables, the engine's counters, the JSON document and the
// .hgrm histograms. The text of the tables themselves is reports/table's.

// printer writes a side's report as the run goes: the test header once
// connected, perftest's result line for each size as it completes, then
// the closing blocks.
type printer struct {
	errPrinter
	o       *options
	clk     clock.Info
	prog    *progress
	passive bool // a passive latency server: nothing to tabulate
	mode    reports.Mode
}

func newPrinter(w io.Writer, o *options, clk clock.Info, prog *progress) *printer {
	p := &printer{errPrinter: errPrinter{w: w}, o: o, clk: clk, prog: prog, mode: reports.ModeIterations}
	if o.changed("duration") {
		p.mode = reports.ModeDuration
	}
	return p
}

// connected prints the test header, the QPs' addresses and the column
// header.
func (p *printer) connected(in session.Info) {
	o, v := p.o, p.o.verb()
	p.prog.clear()
	title := o.test.Title()
	if v == session.Atomic {
		op := "FETCH_AND_ADD"
		if o.atomicOp == verbsio.OpAtomicCmpSwp {
			op = "CMP_AND_SWAP"
		}
		title = "Atomic " + op + " " + title[len("Atomic "):]
	}
	if o.bidir {
		title = "Bidirectional " + title
	}
	p.banner(title)
	pair, one, transport := p.pair, p.one, transportName(in.Device)
	pair("Dual-port", "OFF", "Device", in.Device.Name)
	pair("Number of qps", fmt.Sprint(len(in.Local)), "Transport type", transport)
	pair("Connection type", o.qpType.String(), "Using SRQ", "OFF")
	one("TX depth", fmt.Sprint(in.TxDepth))
	if !o.lat() {
		if o.postList > 1 {
			one("Post List", fmt.Sprint(o.postList))
		}
		if o.changed("cq-mod") {
			one("CQ Moderation", fmt.Sprint(o.cqMod))
		} else if o.postList > 1 {
			one("CQ Moderation", fmt.Sprint(o.postList))
		} else {
			one("CQ Moderation", "100 (1 above 8192[B]), at most the TX depth")
		}
	}
	if v == session.Send {
		one("RX depth", fmt.Sprint(in.RxDepth))
	}
	one("Mtu", fmt.Sprintf("%d[B]", in.MTU))
	if v == session.Read || v == session.Atomic {
		one("Outstand reads", fmt.Sprint(in.OutReads))
	} else {
		one("Max inline data", fmt.Sprintf("%d[B]", in.Inline))
	}
	if in.GID.Type == verbsio.GIDTypeRoCEv2 || in.GID.Type == verbsio.GIDTypeRoCEv1 {
		one("GID index", fmt.Sprintf("%d (%s, %s)", in.GID.Index, in.GID.GID, in.GID.Type))
	}
	if in.UDPPort > 0 {
		one("UDP port", fmt.Sprint(in.UDPPort))
	}
	if o.checkData {
		one("Data validation", "ON (every message's bytes checked)")
	}
	if o.rdmaCM {
		one("rdma_cm QPs", "ON")
		one("Data ex. method", "rdma_cm (SENDs on a connection the CM set up, perftest's -R)")
	} else {
		one("Data ex. method", "Ethernet (TCP, perftest's exchange)")
	}
	one("Peer", peerText(in))
	one("Send path", o.pathLine())
	if o.stamps {
		one("Completion clock", fmt.Sprintf("%d kHz (completion timestamps)", o.clockKHz))
	}
	one("Clock", clockText(p.clk))
	p.printf("%s\n", table.ResultLine)
	const shown = 8
	for i := range in.Local {
		if i == shown {
			p.printf(" ... and %d more QPs\n", len(in.Local)-shown)
			break
		}
		p.dest("local", in.Local[i])
		p.dest("remote", in.Remote[i])
	}
	p.printf("%s\n", table.ResultLine)
	p.passive = o.lat() && o.test.Passive() && in.Server
	switch {
	case p.passive:
		p.printf(" This side is passive: the client's %s run against its memory, and the client prints the results.\n", opName(v))
	case o.lat():
		if p.err == nil {
			p.err = table.WriteLatencyHeader(p.w, p.mode)
		}
	default:
		if p.err == nil {
			p.err = table.WriteBandwidthHeader(p.w, o.gbits)
		}
	}
}

// opName names what a passive server's client runs against it.
func opName(v session.Verb) string {
	switch v {
	case session.Read:
		return "RDMA READs"
	case session.Atomic:
		return "atomics"
	}
	return "operations"
}

// peerText is every header's Peer line: the peer's program and version,
// and whether the parameters were checked (only rperf peers check them).
func peerText(in session.Info) string {
	if in.PeerRperf {
		return "rperf (" + in.PeerVersion + "), parameters checked"
	}
	return "perftest " + in.PeerVersion
}

// clockText is every header's Clock line.
func clockText(clk clock.Info) string {
	return fmt.Sprintf("%s, resolution %d ns", clk.Name, clk.ResolutionNs)
}

// dest prints one QP's key message as perftest prints it.
func (p *printer) dest(side string, d oob.Dest) {
	p.printf(" %s address: LID %#04x QPN %#06x PSN %#06x OUT %#04x RKey %#08x VAddr %#016x\n",
		side, d.LID, d.QPN, d.PSN, d.OutReads, d.RKey, d.VAddr)
	if d.HasGID {
		p.printf(" GID: %s\n", gidString(d.GID))
	}
}

// gidString formats a GID as perftest does: decimal bytes, colon
// separated.
func gidString(g [16]byte) string {
	s := ""
	for i, b := range g {
		if i > 0 {
			s += ":"
		}
		s += fmt.Sprintf("%02d", b)
	}
	return s
}

// row prints one size's perftest line.
func (p *printer) row(r reports.Result) {
	p.prog.clear()
	if p.err != nil {
		return
	}
	if r.Latency != nil {
		if r.Clock == reports.ClockCompletion {
			p.printf("%s", p.o.stampsRowLabel())
		}
		if p.err == nil {
			p.err = table.WriteLatencyRow(p.w, r)
		}
	} else {
		p.err = table.WriteBandwidthRow(p.w, r, p.o.gbits)
	}
}

// finish closes perftest's block and adds rperf's: the true statistics
// (latency) or the notes (bandwidth), and the clock line.
func (p *printer) finish(results []reports.Result) error {
	p.prog.clear()
	if p.err != nil {
		return p.err
	}
	if err := table.WriteResultLine(p.w); err != nil {
		return err
	}
	if p.passive {
		return nil
	}
	if p.o.lat() {
		if err := p.o.writeTrueLatencyClocks(&p.errPrinter, results, p.clk); err != nil {
			return err
		}
	} else if err := table.WriteBandwidthNotes(p.w, results, p.clk); err != nil {
		return err
	}
	return table.WriteResultLine(p.w)
}

// header prints the comparison's header block.
func (c *pathsCmd) header(w io.Writer, in session.Info, clk clock.Info) error {
	o := c.o
	ew := &errPrinter{w: w}
	title := "Send path comparison: " + o.test.Title()
	if c.name == "dm-lat" {
		title = "Device memory vs host memory: " + o.test.Title()
	}
	ew.banner(title)
	pair, one, transport := ew.pair, ew.one, transportName(in.Device)
	pair("Device", in.Device.Name, "Transport type", transport)
	pair("Connection type", o.qpType.String(), "Number of qps", strconv.Itoa(len(in.Local)))
	iters := strconv.Itoa(o.iters)
	if !o.lat() {
		iters += " per QP"
	}
	pair("Iterations", iters, "TX depth", strconv.Itoa(in.TxDepth))
	if !o.lat() {
		one("Post list", fmt.Sprintf("%d (each path posts, flushes or rings this many at once)", o.postList))
	}
	one("Mtu", fmt.Sprintf("%d[B]", in.MTU))
	one("Repetitions", fmt.Sprintf("%d per path, interleaved; a connection and QPs per run", c.reps))
	one("Paths", sendpath.Names(c.paths))
	for _, s := range c.skipped {
		one("Not run", s)
	}
	one("Peer", peerText(in))
	one("Clock", clockText(clk))
	ew.printf("%s\n", table.ResultLine)
	return ew.err
}

// report prints the comparison table.
func (c *pathsCmd) report(w io.Writer, results []reports.Result, clk clock.Info) error {
	if len(results) == 0 {
		_, err := fmt.Fprintf(w, " This side is passive: the client's %s ran against its memory, and the client prints the comparison.\n%s\n",
			opName(c.o.verb()), table.ResultLine)
		return err
	}
	var label func(reports.Result) string
	if c.name == "dm-lat" {
		label = dm.Label
	}
	if err := table.WritePaths(w, results, label, clk); err != nil {
		return err
	}
	return table.WriteResultLine(w)
}

// header prints the sweep's header block.
func (c *pacingCmd) header(w io.Writer, in session.Info, clk clock.Info, sweep []float64, server bool) error {
	cfg := &c.cfg
	ew := &errPrinter{w: w}
	title := "Packet Pacing Test"
	ew.banner(title)
	pair, one, transport := ew.pair, ew.one, transportName(in.Device)
	pair("Device", in.Device.Name, "Transport type", transport)
	pair("Connection type", "RC", "Message size", fmt.Sprintf("%d[B]", cfg.Size))
	pair("TX depth", strconv.Itoa(in.TxDepth), "RX depth", strconv.Itoa(in.RxDepth))
	one("Mtu", fmt.Sprintf("%d[B]", in.MTU))
	one("Bucket", fmt.Sprintf("%d[B] (max_burst_sz); typical packet %d[B]", pacing.EffectiveBurst(cfg.Burst, cfg.Size), cfg.Size))
	rates := make([]string, len(sweep))
	for i, r := range sweep {
		rates[i] = strconv.FormatFloat(r, 'f', -1, 64)
	}
	what := "Mb/s, each in turn"
	if cfg.Rates == nil {
		what = fmt.Sprintf("Mb/s, until one is achieved more than %v%% short", cfg.Tolerance)
	}
	one("Rates", strings.Join(rates, ", ")+" "+what)
	per := fmt.Sprintf("about %v measured", cfg.RateDuration)
	if cfg.RateBytes > 0 {
		per = fmt.Sprintf("%d bytes measured", cfg.RateBytes)
	}
	one("Per rate", per+"; at most twice the expected time plus 1s")
	if server {
		one("This side", "sends (the client receives and measures)")
	} else {
		one("This side", "receives and measures (the server sends)")
	}
	one("Peer", peerText(in))
	one("Clock", clockText(clk))
	ew.printf("%s\n", table.ResultLine)
	return ew.err
}

// report prints the sweep's table and closes it.
func (c *pacingCmd) report(w io.Writer, results []reports.Result, clk clock.Info) error {
	if err := table.WritePacing(w, results, clk); err != nil {
		return err
	}
	return table.WriteResultLine(w)
}

// writeReport ends a run's report: the engine's counters after the table
// (udp fabric), then the rperf/v1 document to --json.
func writeReport(o *options, p *prepared, env reports.Env, results []reports.Result, out, stdout io.Writer) error {
	if env.EngineCounters = p.dev.Counters(); env.EngineCounters != nil {
		if err := writeCounters(out, o.device, p.dev.UDPPort(), env.EngineCounters); err != nil {
			return fmt.Errorf("write the report: %w", err)
		}
	}
	doc := reports.NewDocument(env)
	doc.Results = append(doc.Results, results...)
	return writeDocument(o, p, doc, stdout)
}

// writeDocument writes doc to --json's file, or stdout for --json -.
func writeDocument(o *options, p *prepared, doc *reports.Document, stdout io.Writer) error {
	if p.jsonFile != nil {
		if err := doc.Write(p.jsonFile); err != nil {
			return fmt.Errorf("--json %s: %w", o.jsonPath, err)
		}
		if err := p.jsonFile.Close(); err != nil {
			return fmt.Errorf("--json %s: %w", o.jsonPath, err)
		}
		p.jsonFile = nil
	} else if o.jsonPath == "-" {
		if err := doc.Write(stdout); err != nil {
			return err
		}
	}
	return nil
}

// errPrinter keeps the first write error.
type errPrinter struct {
	w   io.Writer
	err error
}

func (e *errPrinter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// banner prints perftest's dashed line and the title centred under it.
func (e *errPrinter) banner(title string) {
	line := table.ResultLine
	e.printf("%s\n%*s\n", line, (len(line)+len(title))/2, title)
}

// pair prints two header fields on one line, as perftest aligns them.
func (e *errPrinter) pair(a, av, b, bv string) { e.printf(" %-16s: %-16s %-15s: %s\n", a, av, b, bv) }

// one prints one header field.
func (e *errPrinter) one(a, av string) { e.printf(" %-16s: %s\n", a, av) }

// transportName is the header's transport type: the device's, with the
// provider and fabric of a built-in one.
func transportName(d verbsio.DeviceInfo) string {
	t := d.Transport
	if d.Provider != "" {
		t += " (" + d.Provider
		if d.Fabric != "" {
			t += ", " + d.Fabric + " fabric"
		}
		t += ")"
	}
	return t
}

// counterLine lists the counters a reader of a udp-fabric run wants to
// see, in this order, with their labels.
var counterLine = []struct{ name, label string }{
	{"sent_pkts", "sent"}, {"rcvd_pkts", "received"}, {"retransmitted", "retransmitted"},
	{"rewinds", "rewinds"}, {"duplicate_request", "duplicates"}, {"icrc_errors", "ICRC errors"}, {"out_of_seq_request", "out of sequence"},
	{"timeouts", "timeouts"},
}

// writeCounters prints the engine's counters on one line, with the UDP
// port it bound (if any).
func writeCounters(w io.Writer, device string, port int, c map[string]uint64) error {
	if c == nil {
		return nil
	}
	var parts []string
	for _, f := range counterLine {
		parts = append(parts, fmt.Sprintf("%s %d", f.label, c[f.name]))
	}
	where := ""
	if port > 0 {
		where = fmt.Sprintf(" (UDP port %d)", port)
	}
	_, err := fmt.Fprintf(w, " engine %s%s packets: %s\n", device, where, strings.Join(parts, ", "))
	return err
}

// createOutput creates an output file early, so that a bad path fails
// before the test runs. "" and "-" create nothing. --json and --hgrm use it.
func createOutput(path, flag string) (*os.File, error) {
	if path == "" || path == "-" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, cli.Usagef("%s %s: cannot create the file (%v); give a writable path", flag, path, errors.Unwrap(err))
	}
	return f, nil
}

// hgrmName is --hgrm's file for a size: FILE for one size, FILE-<size>.hgrm
// (before the extension) for several.
func hgrmName(path string, size int64, several bool) string {
	if !several {
		return path
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-" + strconv.FormatInt(size, 10) + ext
}

// createHGRM creates --hgrm's files, one per size, before the test runs,
// as --json's file is: a path that cannot be written fails at once.
func (p *prepared) createHGRM(o *options) error {
	var err error
	p.hgrm, err = createHGRMFiles(o.hgrmPath, p.sizes)
	return err
}

// createHGRMFiles creates --hgrm path's files for sizes, one per size;
// none for "" and "-". On an error the map holds the files created so
// far, for removeHGRM.
func createHGRMFiles(path string, sizes []int) (map[int64]*os.File, error) {
	if path == "" || path == "-" {
		return nil, nil
	}
	files := make(map[int64]*os.File, len(sizes))
	for _, n := range sizes {
		f, err := createOutput(hgrmName(path, int64(n), len(sizes) > 1), "--hgrm")
		if err != nil {
			return files, err
		}
		files[int64(n)] = f
	}
	return files, nil
}

// removeHGRM closes and removes the .hgrm files not written.
func removeHGRM(files map[int64]*os.File) {
	for n, f := range files {
		f.Close()
		os.Remove(f.Name())
		delete(files, n)
	}
}

// writeHGRM writes each latency result's histogram, to stdout for
// --hgrm - or else to the file createHGRM made for its size.
func writeHGRM(path string, files map[int64]*os.File, results []reports.Result, stdout, out io.Writer) error {
	if path == "" || len(results) == 0 {
		return nil
	}
	if path == "-" {
		for _, r := range results {
			if err := reports.WriteResultHGRM(stdout, r); err != nil {
				return fmt.Errorf("--hgrm -: %w", err)
			}
		}
		return nil
	}
	var written []string
	for _, r := range results {
		f := files[r.Bytes]
		if f == nil {
			var err error
			if f, err = createOutput(hgrmName(path, r.Bytes, len(results) > 1), "--hgrm"); err != nil {
				return err
			}
		}
		delete(files, r.Bytes)
		err := reports.WriteResultHGRM(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("--hgrm %s: %w", f.Name(), err)
		}
		written = append(written, f.Name())
	}
	if len(written) > 1 {
		fmt.Fprintf(out, " histograms: %s\n", strings.Join(written, ", "))
	}
	return nil
}
