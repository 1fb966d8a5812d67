package bw

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rperf/rperf/reports"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/session"
)

// exchangePair connects two runners of cfg over a real out-of-band
// connection and runs the report exchange of one size with each side's
// own figures (nil: a side that measured nothing).
func exchangePair(t *testing.T, cfg Config, srvLocal, cliLocal *reports.Result) (srv, cli reports.Result, srvErr, cliErr error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := oob.Listen(ctx, "127.0.0.1:0", oob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	side := func(conn *oob.Conn, local *reports.Result) (reports.Result, error) {
		defer conn.Close()
		if _, err := conn.Handshake(ctx, oob.Hello{MTU: oob.MTU1024}); err != nil {
			return reports.Result{}, err
		}
		r := &runner{cfg: &cfg, s: &session.Session{Conn: conn, Server: conn.IsServer()}, role: cfg.role(conn.IsServer())}
		var m measured
		if local != nil {
			m = measured{res: *local, have: true}
		}
		return r.exchange(ctx, int(m.res.Bytes), m)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		conn, err := ln.Accept(ctx)
		if err != nil {
			srvErr = err
			return
		}
		srv, srvErr = side(conn, srvLocal)
	})
	conn, err := oob.Dial(ctx, ln.Addr().String(), oob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cli, cliErr = side(conn, cliLocal)
	wg.Wait()
	return srv, cli, srvErr, cliErr
}

// own is a side's own measurement of 4096-byte messages at mib MiB/s.
func own(mib, peakMiB float64, msgs int64) *reports.Result {
	gb := func(v float64) float64 { return v * (1 << 20) * 8 / 1e9 }
	return &reports.Result{Test: "write_bw", Bytes: 4096, Iterations: msgs, Mode: reports.ModeIterations,
		Bandwidth: &reports.Bandwidth{BWAvgMiBps: mib, BWAvgGbps: gb(mib), BWPeakMiBps: peakMiB, BWPeakGbps: gb(peakMiB),
			MsgRateMpps: mib * (1 << 20) / 4096 / 1e6, PeakStatus: reports.PeakMeasured}}
}

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-9*math.Abs(want) }

// TestBidirectionalSum: each side of a bidirectional run reports its own
// direction plus the peer's, whichever unit the reports travel in; the
// expected sums are worked out here, not by the code under test.
func TestBidirectionalSum(t *testing.T) {
	for _, gbits := range []bool{false, true} {
		cfg := Default(Write)
		cfg.Bidirectional, cfg.ReportGbits = true, gbits
		// 1000 MiB/s and 3000 MiB/s: 8.388608 and 25.165824 Gb/s, 0.256 and
		// 0.768 Mmsg/s of 4 KiB; their sums 4000 MiB/s, 33.554432 Gb/s,
		// 1.024 Mmsg/s, and the peaks 1100 + 3300 MiB/s.
		srv, cli, srvErr, cliErr := exchangePair(t, cfg, own(3000, 3300, 7000), own(1000, 1100, 5000))
		if srvErr != nil || cliErr != nil {
			t.Fatalf("report gbits %v: server %v, client %v", gbits, srvErr, cliErr)
		}
		for side, r := range map[string]reports.Result{"server": srv, "client": cli} {
			b := r.Bandwidth
			if !near(b.BWAvgMiBps, 4000) || !near(b.BWAvgGbps, 33.554432) || !near(b.MsgRateMpps, 1.024) ||
				!near(b.BWPeakMiBps, 4400) || !near(b.BWPeakGbps, 36.9098752) || b.PeakStatus != reports.PeakMeasured {
				t.Errorf("report gbits %v, %s: %+v", gbits, side, b)
			}
		}
		// Each keeps its own message count.
		if srv.Iterations != 7000 || cli.Iterations != 5000 {
			t.Errorf("report gbits %v: iterations server %d, client %d", gbits, srv.Iterations, cli.Iterations)
		}
	}
}

// TestPassiveServerReport: the passive server of a one-sided test reports
// the client's figures, converted from the unit they travelled in.
func TestPassiveServerReport(t *testing.T) {
	for _, gbits := range []bool{false, true} {
		cfg := Default(Read)
		cfg.ReportGbits = gbits
		srv, cli, srvErr, cliErr := exchangePair(t, cfg, nil, own(2000, 2500, 1000))
		if srvErr != nil || cliErr != nil {
			t.Fatalf("server %v, client %v", srvErr, cliErr)
		}
		b := srv.Bandwidth
		if !near(b.BWAvgMiBps, 2000) || !near(b.BWAvgGbps, 16.777216) || !near(b.MsgRateMpps, 0.512) || !near(b.BWPeakMiBps, 2500) ||
			srv.Iterations != 1000 || srv.Bytes != 4096 || srv.Test != "read_bw" {
			t.Errorf("report gbits %v: server %+v %+v", gbits, srv, b)
		}
		if cli.Bandwidth.BWAvgMiBps != 2000 {
			t.Errorf("client %+v", cli.Bandwidth)
		}
	}
}

// TestPeerReportNotAMeasurement: NaN, Inf or a negative rate from the
// peer never becomes a result; the side that would use it fails, saying
// why. A side that does not use the peer's figures ignores them (a
// perftest server of a unidirectional test sends uninitialised memory).
func TestPeerReportNotAMeasurement(t *testing.T) {
	for _, bad := range []float64{math.NaN(), math.Inf(1), -5} {
		cfg := Default(Write)
		cfg.Bidirectional = true
		liar := own(1000, 1000, 5000)
		liar.BWAvgMiBps = bad
		srv, _, srvErr, _ := exchangePair(t, cfg, own(1000, 1000, 5000), liar)
		if srvErr == nil || !errors.Is(srvErr, oob.ErrProtocol) || !strings.Contains(srvErr.Error(), "its average bandwidth is") {
			t.Errorf("average %v: server %+v, %v; want an error naming the figure", bad, srv.Bandwidth, srvErr)
		}
		// The client of a unidirectional test keeps its own figures.
		cfg.Bidirectional = false
		_, cli, _, cliErr := exchangePair(t, cfg, liar, own(1000, 1000, 5000))
		if cliErr != nil || cli.Bandwidth.BWAvgMiBps != 1000 {
			t.Errorf("unidirectional client against a garbage report: %+v, %v", cli.Bandwidth, cliErr)
		}
	}
}
