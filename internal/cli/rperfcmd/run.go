package rperfcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/bw"
	"github.com/rperf/rperf/tests/latency"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/verbsio"
)

// Waits that are not about a silent peer mid-run.
const (
	// acceptWaitFactor times --timeout is how long a server waits for its
	// client to connect.
	acceptWaitFactor = 10
	// loopbackAcceptWait is how long the --loopback server waits for the
	// client, its own parent.
	loopbackAcceptWait = 30 * time.Second
	// maxDialTimeout caps how long a client retries a server that refuses
	// connections (not listening yet).
	maxDialTimeout = 10 * time.Second
)

func run(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	p, err := prepare(o)
	if err != nil {
		return err
	}
	defer p.close()
	if err := p.createHGRM(o); err != nil {
		return err
	}
	if o.loopback {
		return runLoopback(ctx, o, p, stdout, stderr)
	}
	var listening func(int)
	if o.loopbackServer {
		listening = reportPort
	}
	return runSide(ctx, o, p, stdout, stderr, listening)
}

// prepared is what a side needs before it connects: the open device, the
// sizes checked against its limits, the output file, the environment.
type prepared struct {
	dev      *verbsio.Context
	sizes    []int
	jsonFile *os.File
	hgrm     map[int64]*os.File // --hgrm's files by message size, not yet written
	env      reports.Env
	ok       bool // the run succeeded: keep the JSON file
}

// prepare opens the device and checks everything that can be checked
// before connecting, so that bad flags fail at once (and, with --loopback,
// before the server process starts).
func prepare(o *options) (p *prepared, err error) {
	p = &prepared{}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.jsonFile, err = createOutput(o.jsonPath, "--json"); err != nil {
		return p, err
	}
	if p.dev, err = o.openUDPAware(); err != nil {
		return p, err
	}
	if err = o.checkGID(p.dev); err != nil {
		return p, err
	}
	attr, err := p.dev.QueryDevice()
	if err != nil {
		return p, fmt.Errorf("query device %s: %w", o.device, err)
	}
	portAttr, err := p.dev.QueryPort(uint8(o.ibPort))
	if err != nil {
		return p, &cli.EnvironmentError{Err: fmt.Errorf("-i %d: %s has no such port (%v)", o.ibPort, o.device, err)}
	}
	if p.sizes, err = o.sizesFor(attr, portAttr, o.device); err != nil {
		return p, err
	}
	if err = o.checkDevice(attr, o.device); err != nil {
		return p, err
	}
	if err = o.fitValidation(p.sizes); err != nil {
		return p, err
	}
	if err = o.checkPathDevice(attr, p.sizes); err != nil {
		return p, err
	}
	p.env = reports.GatherEnv(reports.System{})
	d := p.dev.Device
	p.env.Provider, p.env.Fabric, p.env.Device, p.env.SendPath = d.Provider, fabricOf(d, portAttr), d.Name, o.path.String()
	return p, nil
}

// close releases the device and removes an unwritten JSON file and
// unwritten .hgrm files.
func (p *prepared) close() {
	if p.jsonFile != nil {
		p.jsonFile.Close()
		if !p.ok {
			os.Remove(p.jsonFile.Name())
		}
		p.jsonFile = nil
	}
	for n, f := range p.hgrm {
		f.Close()
		os.Remove(f.Name())
		delete(p.hgrm, n)
	}
	if p.dev != nil {
		p.dev.Close()
		p.dev = nil
	}
}

// runSide runs one side: the server when o.host is empty, else the client.
// listening, if set, learns the server's port once it listens.
func runSide(ctx context.Context, o *options, p *prepared, stdout, stderr io.Writer, listening func(port int)) error {
	out := stdout
	if o.jsonPath == "-" || o.hgrmPath == "-" {
		out = stderr // stdout carries the document
	}
	env := p.env
	conn, err := connect(ctx, o, out, listening)
	if err != nil {
		return err
	}
	role := "client"
	if conn.IsServer() {
		role = "server"
	}
	env.Extra = map[string]string{"role": role, "peer": conn.RemoteAddr().String()}

	pr := newPrinter(out, o, env.Clock, newProgress(stderr, o))
	defer pr.prog.stop()
	var results []reports.Result
	onConnected := func(in latency.Info) {
		env.MTU = in.MTU
		fillExtra(env.Extra, o, in)
		o.pathExtra(env.Extra, p.dev)
		pr.connected(in)
	}
	if o.k.lat {
		cfg := o.latencyConfig(p.sizes)
		cfg.OnConnected, cfg.OnProgress, cfg.OnResult = onConnected, pr.prog.start, pr.row
		results, err = latency.Run(ctx, p.dev, conn, cfg)
	} else {
		cfg := o.bwConfig(p.sizes)
		cfg.OnConnected, cfg.OnProgress, cfg.OnResult = onConnected, pr.prog.start, pr.row
		results, err = bw.Run(ctx, p.dev, conn, cfg)
	}
	pr.prog.stop()
	if err != nil {
		return runError(err)
	}
	if err := pr.finish(results); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	if err := writeReport(o, p, env, results, out, stdout); err != nil {
		return err
	}
	if err := writeHGRM(o, p.hgrm, results, stdout, out); err != nil {
		return err
	}
	p.ok = true
	return nil
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

// openDevice opens the device, classifying failures as the machine's.
func openDevice(name string, oo verbsio.OpenOptions) (*verbsio.Context, error) {
	dev, err := verbsio.OpenWith(name, oo)
	if err == nil {
		return dev, nil
	}
	var ve *verbsio.Error
	if errors.Is(err, verbsio.ErrNotSupported) || errors.As(err, &ve) && ve.Errno == unix.ENODEV {
		return nil, &cli.EnvironmentError{Err: fmt.Errorf("-d %s: %w", name, err)}
	}
	return nil, fmt.Errorf("-d %s: %w", name, err)
}

// fabricOf names the transport under the provider.
func fabricOf(d verbsio.DeviceInfo, p verbsio.PortAttr) string {
	if d.Fabric != "" {
		return d.Fabric
	}
	switch p.LinkLayer {
	case verbsio.LinkLayerEthernet:
		return "roce"
	case verbsio.LinkLayerInfiniBand:
		return "ib"
	}
	return "unknown"
}

// connect listens and accepts one client (no host) or dials the server.
func connect(ctx context.Context, o *options, out io.Writer, listening func(int)) (*oob.Conn, error) {
	opts := oob.Options{IOTimeout: o.timeout, DialTimeout: min(o.timeout, maxDialTimeout)}
	if o.host != "" {
		return oob.Dial(ctx, net.JoinHostPort(o.host, strconv.Itoa(o.port)), opts)
	}
	host, wait := "", time.Duration(acceptWaitFactor)*o.timeout
	if o.loopbackServer {
		host, wait = "127.0.0.1", loopbackAcceptWait
	}
	ln, err := oob.Listen(ctx, net.JoinHostPort(host, strconv.Itoa(o.port)), opts)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	fmt.Fprintf(out, "\n Waiting for a client on TCP port %d (for up to %v) ...\n", port, wait)
	if listening != nil {
		listening(port)
	}
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return ln.Accept(actx)
}

// runError classifies a failed run for the exit code.
func runError(err error) error {
	if errors.Is(err, oob.ErrIncompatible) {
		return &cli.ExitError{Code: cli.ExitUsage, Msg: err.Error()}
	}
	return err
}

// fillExtra records the test's settings in the document's env.extra.
func fillExtra(x map[string]string, o *options, in latency.Info) {
	x["connection"] = o.qpType.String()
	x["tx_depth"] = strconv.Itoa(in.TxDepth)
	x["inline_size"] = strconv.Itoa(in.Inline)
	if o.k.send() {
		x["rx_depth"] = strconv.Itoa(in.RxDepth)
	}
	if o.k.read() || o.k.atomic() {
		x["out_reads"] = strconv.Itoa(in.OutReads)
	}
	if !o.k.lat {
		x["qps"] = strconv.Itoa(o.qps)
		x["post_list"] = strconv.Itoa(o.postList)
		x["bidirectional"] = strconv.FormatBool(o.bidir)
		if o.changed("cq-mod") {
			x["cq_mod"] = strconv.Itoa(o.cqMod)
		}
	}
	if o.k.atomic() {
		x["atomic_type"] = o.atomicOp.String()
	}
	if o.warmup > 0 {
		x["warmup"] = strconv.Itoa(o.warmup)
	}
	x["peer_version"] = in.PeerVersion
	x["gid_index"] = strconv.Itoa(in.GID.Index)
	x["gid"] = in.GID.GID.String()
	if o.checkData {
		x["validate"] = "true"
	}
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
	if o.hgrmPath == "" || o.hgrmPath == "-" {
		return nil
	}
	p.hgrm = make(map[int64]*os.File, len(p.sizes))
	for _, n := range p.sizes {
		f, err := createOutput(hgrmName(o.hgrmPath, int64(n), len(p.sizes) > 1), "--hgrm")
		if err != nil {
			return err
		}
		p.hgrm[int64(n)] = f
	}
	return nil
}

// writeHGRM writes each latency result's histogram, to stdout for
// --hgrm - or else to the file createHGRM made for its size.
func writeHGRM(o *options, files map[int64]*os.File, results []reports.Result, stdout, out io.Writer) error {
	if o.hgrmPath == "" || len(results) == 0 {
		return nil
	}
	if o.hgrmPath == "-" {
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
			if f, err = createOutput(hgrmName(o.hgrmPath, r.Bytes, len(results) > 1), "--hgrm"); err != nil {
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
