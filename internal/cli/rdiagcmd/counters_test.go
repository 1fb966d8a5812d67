package rdiagcmd

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft"
	"github.com/rperf/rperf/verbsio/verbstest"
)

// TestCountersLive runs traffic on a udp-fabric pair in this process and
// reads its counters through the command, as table and as JSON.
func TestCountersLive(t *testing.T) {
	p := verbstest.NewPair(t, verbstest.PairConfig{Device: "udp_lo", Open: verbsio.OpenOptions{UDPPort: -1}})
	p.A.QP.PostSend([]verbsio.SendWR{{Opcode: verbsio.OpRDMAWrite, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{p.A.MR.SGE(0, 64)},
		Remote: verbsio.RemoteAddr{Addr: p.B.MR.Addr(), RKey: p.B.MR.RKey()}}})
	verbstest.PollOne(t, p.A.CQ)
	stats, err := soft.LiveStats()
	if err != nil {
		t.Fatal(err)
	}
	var mine []soft.ContextStats
	for _, s := range stats {
		if s.PID == os.Getpid() {
			mine = append(mine, s)
		}
	}
	if len(mine) != 2 {
		t.Fatalf("%d live contexts of this process, want 2", len(mine))
	}
	var out bytes.Buffer
	o := &options{}
	if err := o.runCounters(&out, mine); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "udp_lo") || !strings.Contains(out.String(), "ICRC_ERR") {
		t.Errorf("table:\n%s", out.String())
	}
	out.Reset()
	o.json = true
	if err := o.runCounters(&out, mine); err != nil {
		t.Fatal(err)
	}
	var back []soft.ContextStats
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[0].Counters["sent_pkts"]+back[1].Counters["sent_pkts"] < 2 {
		t.Errorf("json: %s", out.String())
	}
	out.Reset()
	o.json = false
	if err := o.runCounters(&out, nil); err != nil || !strings.Contains(out.String(), "no running") {
		t.Errorf("empty: %q %v", out.String(), err)
	}
}
