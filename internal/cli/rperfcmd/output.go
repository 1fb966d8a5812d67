package rperfcmd

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/internal/clock"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/reports/table"
	"github.com/rperf/rperf/tests/latency"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/verbsio"
)

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

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

// connected prints the test header, the QPs' addresses and the column
// header.
func (p *printer) connected(in latency.Info) {
	o, k := p.o, p.o.k
	p.prog.clear()
	title := k.title()
	if k.atomic() {
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
	if !k.lat {
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
	if k.send() {
		one("RX depth", fmt.Sprint(in.RxDepth))
	}
	one("Mtu", fmt.Sprintf("%d[B]", in.MTU))
	if k.read() || k.atomic() {
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
	one("Data ex. method", "Ethernet (TCP, perftest's exchange)")
	peer := "perftest " + in.PeerVersion
	if in.PeerRperf {
		peer = "rperf (" + in.PeerVersion + "), parameters checked"
	}
	one("Peer", peer)
	one("Send path", o.pathLine())
	one("Clock", fmt.Sprintf("%s, resolution %d ns", p.clk.Name, p.clk.ResolutionNs))
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
	p.passive = k.passiveServer(o.bidir) && in.Server && k.lat
	switch {
	case p.passive:
		p.printf(" This side is passive: the client's %s run against its memory, and the client prints the results.\n", opName(k))
	case k.lat:
		if p.err == nil {
			p.err = table.WriteLatencyHeader(p.w, p.mode)
		}
	default:
		if p.err == nil {
			p.err = table.WriteBandwidthHeader(p.w, o.gbits)
		}
	}
}

func opName(k kind) string {
	switch {
	case k.read():
		return "RDMA READs"
	case k.atomic():
		return "atomics"
	}
	return "operations"
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
		p.err = table.WriteLatencyRow(p.w, r)
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
	if p.o.k.lat {
		if err := table.WriteTrueLatency(p.w, results, p.clk); err != nil {
			return err
		}
	} else if err := table.WriteBandwidthNotes(p.w, results, p.clk); err != nil {
		return err
	}
	return table.WriteResultLine(p.w)
}

// progress shows, on a terminal only, which size a long run (-a, -D) is
// at, on stderr, erased before each result line.
type progress struct {
	w       io.Writer
	enabled bool
	mu      sync.Mutex
	shown   bool
	done    chan struct{}
	wg      sync.WaitGroup
}

func newProgress(stderr io.Writer, o *options) *progress {
	p := &progress{w: stderr}
	f, ok := stderr.(*os.File)
	p.enabled = ok && cli.IsTerminal(f) && (o.all || o.changed("duration")) && !o.loopbackServer
	return p
}

// start announces a run; in duration mode it keeps a countdown going.
func (p *progress) start(pr latency.Progress) {
	if !p.enabled {
		return
	}
	p.stopTicker()
	label := fmt.Sprintf(" [%d/%d] %d bytes", pr.Index+1, pr.Count, pr.Bytes)
	p.show(label + " ...")
	if pr.Duration <= 0 {
		return
	}
	p.done = make(chan struct{})
	p.wg.Add(1)
	go func(done chan struct{}, begin time.Time) {
		defer p.wg.Done()
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				el := now.Sub(begin).Truncate(time.Second)
				p.show(fmt.Sprintf("%s: %v of %v", label, min(el, pr.Duration), pr.Duration))
			}
		}
	}(p.done, time.Now())
}

func (p *progress) show(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\033[K%s", s)
	p.shown = true
}

// clear erases the progress line, if one is shown.
func (p *progress) clear() {
	if !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

func (p *progress) stopTicker() {
	if p.done != nil {
		close(p.done)
		p.wg.Wait()
		p.done = nil
	}
}

// stop ends the display.
func (p *progress) stop() {
	if !p.enabled {
		return
	}
	p.stopTicker()
	p.clear()
}
