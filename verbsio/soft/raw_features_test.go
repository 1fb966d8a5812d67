package soft_test

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rperf/rperf/internal/testsupport/netns"
	"github.com/rperf/rperf/internal/testsupport/tshark"
	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/soft/internal/netpkt"
	"golang.org/x/sys/unix"
)

// TestRawVLAN sends tagged frames (802.1Q with priorities and IDs): the
// receiver gets them with their tag where it was on the wire (the kernel
// strips it; the engine puts it back), a rule on the VLAN tag steers them,
// and tshark reads the tag and good checksums.
func TestRawVLAN(t *testing.T) {
	tshark.Skip(t)
	w := newRawWire(t, netns.Options{}, verbsio.OpenOptions{}, 0)
	send := w.a.rawQP(t, 64, 1)
	q100 := w.b.rawQP(t, 16, 64)
	qother := w.b.rawQP(t, 16, 64)
	w.b.postRecvs(t, q100, 0, 32, 2048)
	w.b.postRecvs(t, qother, 32*2048, 32, 2048)
	f100 := mustFlow(t, q100, verbsio.FlowAttr{Port: 1, Specs: []verbsio.FlowSpec{verbsio.FlowETH{
		Val: verbsio.ETHFilter{Dst: w.b.mac, VLANTag: 100}, Mask: verbsio.ETHFilter{Dst: allOnes, VLANTag: 0x0fff}}}})
	defer f100.Destroy()
	fo := mustFlow(t, qother, w.b.dstMAC(1))
	defer fo.Destroy()
	tcis := []uint16{5<<13 | 100, 200, 7<<13 | 100, 3<<13 | 4095 - 1, 0<<13 | 100}
	var frames [][]byte
	for i, tci := range tcis {
		h := netpkt.Headers{Dst: w.b.mac, Src: w.a.mac, VLAN: netpkt.Tag{Present: true, TCI: tci}, SrcIP: w.a.ip4, DstIP: w.b.ip4,
			Proto: netpkt.ProtoUDP, SrcPort: uint16(i + 1), DstPort: 7000}
		f, err := h.Append(nil, pattern(50+i, 1))
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
	}
	w.a.sendFrames(t, send, frames)
	got := byQP(t, w.b, len(frames))
	if len(got[q100.QPN()]) != 3 || len(got[qother.QPN()]) != 2 {
		t.Fatalf("VLAN 100 rule took %d frames (want 3), the MAC rule %d (want 2)", len(got[q100.QPN()]), len(got[qother.QPN()]))
	}
	var recv [][]byte
	for _, q := range []*verbsio.QP{q100, qother} {
		for _, wc := range got[q.QPN()] {
			f := w.b.buf[wc.ID : wc.ID+uint64(wc.ByteLen)]
			sport := int(f[netpkt.EthLen+netpkt.VLANLen+20])<<8 | int(f[netpkt.EthLen+netpkt.VLANLen+21])
			if !bytes.Equal(f, frames[sport-1]) {
				t.Errorf("frame %d arrived as\n% x\nsent\n% x", sport-1, f, frames[sport-1])
			}
			recv = append(recv, f)
		}
	}
	rows := tshark.Fields(t, recv, "vlan.id", "vlan.priority", "udp.srcport", "ip.checksum.status", "udp.checksum.status")
	for i, r := range rows {
		sport, _ := strconv.Atoi(r[2])
		tci := tcis[sport-1]
		if r[0] != strconv.Itoa(int(tci&0xfff)) || r[1] != strconv.Itoa(int(tci>>13)) || r[3] != tshark.Good || r[4] != tshark.Good {
			t.Errorf("frame %d: tshark %q, want VLAN %d priority %d, good checksums", i, r, tci&0xfff, tci>>13)
		}
	}
}

// TestRawTimestamps: a timestamped CQ's receive completions carry the
// kernel's receive stamp of the frame (veth gives software stamps: the
// rx_ts_* counters say which kind), which lies between the send and the
// poll; send completions are stamped by the engine when the frame left.
// A CQ without the flag carries none.
func TestRawTimestamps(t *testing.T) {
	for _, flags := range []verbsio.CQWCFlags{verbsio.WCExTS, verbsio.WCExStandard} {
		t.Run(flags.String(), func(t *testing.T) {
			w := newRawWire(t, netns.Options{}, verbsio.OpenOptions{}, flags)
			qa := w.a.rawQP(t, 16, 1)
			qb := w.b.rawQP(t, 16, 64)
			fl := mustFlow(t, qb, w.b.udpTo(7000, 0))
			defer fl.Destroy()
			w.b.postRecvs(t, qb, 0, 64, 2048)
			for i := 0; i < 50; i++ {
				f := udpFrame(t, w.a, w.b, 1, 7000, 0, 64)
				before := uint64(time.Now().UnixNano())
				w.a.postFrame(t, qa, uint64(i), 0, f, sendOneSGE)
				s, err := pollN(w.a.cq, 1, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				r, err := pollN(w.b.cq, 1, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				after := uint64(time.Now().UnixNano())
				if flags == verbsio.WCExStandard {
					if s[0].Timestamp != 0 || r[0].Timestamp != 0 {
						t.Fatalf("stamps %d, %d on a CQ without the timestamp flag", s[0].Timestamp, r[0].Timestamp)
					}
					continue
				}
				for _, c := range []struct {
					what string
					ts   uint64
				}{{"send", s[0].Timestamp}, {"receive", r[0].Timestamp}} {
					if c.ts < before || c.ts > after {
						t.Fatalf("frame %d: %s stamped %d, outside [%d, %d]", i, c.what, c.ts, before, after)
					}
				}
			}
			if flags == verbsio.WCExTS {
				c := w.b.ctx.Impl().(counterer).Counters()
				if c["rx_ts_software"]+c["rx_ts_hardware"]+c["rx_ts_ring"] < 50 {
					t.Errorf("timestamp kinds counted: %v", c)
				}
				t.Logf("receive stamps: %d software, %d hardware, %d ring", c["rx_ts_software"], c["rx_ts_hardware"], c["rx_ts_ring"])
			}
		})
	}
}

// TestRawDeviceMemory sends frames out of device memory (ibv_alloc_dm):
// they arrive as written.
func TestRawDeviceMemory(t *testing.T) {
	w := newRawWire(t, netns.Options{}, verbsio.OpenOptions{}, 0)
	qa := w.a.rawQP(t, 16, 1)
	qb := w.b.rawQP(t, 16, 16)
	fl := mustFlow(t, qb, w.b.udpTo(7000, 0))
	defer fl.Destroy()
	w.b.postRecvs(t, qb, 0, 16, 2048)
	dm, err := w.a.ctx.AllocDM(4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dm.Free()
	mr, err := w.a.pd.RegDMMR(dm, 0, 4096, verbsio.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Dereg()
	f := udpFrame(t, w.a, w.b, 9, 7000, 0, 998) // 1040 bytes: device memory is copied in 4-byte words
	if err := dm.CopyTo(0, f); err != nil {
		t.Fatal(err)
	}
	if _, err := qa.PostSend([]verbsio.SendWR{{ID: 1, Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: []verbsio.SGE{mr.SGE(0, len(f))}}}); err != nil {
		t.Fatal(err)
	}
	if wc, err := pollN(w.a.cq, 1, 5*time.Second); err != nil || wc[0].Status != verbsio.StatusSuccess {
		t.Fatalf("send from device memory: %+v %v", wc, err)
	}
	r, err := pollN(w.b.cq, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.b.buf[r[0].ID : r[0].ID+uint64(r[0].ByteLen)]; !bytes.Equal(got, f) {
		t.Errorf("frame from device memory arrived as % x, want % x", got, f)
	}
}

// TestRawNoAlloc: posting a frame (one SGE, three SGEs with IP_CSUM,
// inline, an engine-cut TSO send), sending it and receiving it (the ring,
// steering, delivery, a timestamped completion) allocate nothing.
func TestRawNoAlloc(t *testing.T) {
	w := newRawWire(t, netns.Options{}, verbsio.OpenOptions{}, verbsio.WCExTS)
	qa := w.a.rawQP(t, 64, 1)
	qb := w.b.rawQP(t, 16, 1024)
	fl := mustFlow(t, qb, w.b.dstMAC(0))
	defer fl.Destroy()
	f := udpFrame(t, w.a, w.b, 1, 7000, 0, 200)
	copy(w.a.buf, f)
	hdr, _ := (&netpkt.Headers{Dst: w.b.mac, Src: w.a.mac, SrcIP: w.a.ip4, DstIP: w.b.ip4, DF: true, Proto: netpkt.ProtoTCP, SrcPort: 1, DstPort: 2}).AppendHeader(nil, 0)
	third := len(f) / 3
	one := []verbsio.SGE{w.a.mr.SGE(0, len(f))}
	three := []verbsio.SGE{w.a.mr.SGE(0, third), w.a.mr.SGE(third, third), w.a.mr.SGE(2*third, len(f)-2*third)}
	tsoPayload := []verbsio.SGE{w.a.mr.SGE(4096, 4000)}
	wrs := map[string][]verbsio.SendWR{
		"one SGE":        {{Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled, SGL: one}},
		"IP_CSUM, SGEs":  {{Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled | verbsio.SendIPCsum, SGL: three}},
		"inline":         {{Opcode: verbsio.OpSend, Flags: verbsio.SendSignaled | verbsio.SendInline, SGL: one}},
		"TSO (4 frames)": {{Opcode: verbsio.OpTSO, Flags: verbsio.SendSignaled, SGL: tsoPayload, TSO: verbsio.TSO{Hdr: hdr, MSS: 1000}}},
	}
	rwr := []verbsio.RecvWR{{SGL: []verbsio.SGE{w.b.mr.SGE(0, 2048)}}}
	for i := 0; i < 1024; i++ {
		qb.PostRecv(rwr)
	}
	wcs := make([]verbsio.WC, 8)
	for name, wr := range wrs {
		t.Run(name, func(t *testing.T) {
			frames := 1
			if wr[0].Opcode == verbsio.OpTSO {
				frames = 4
			}
			run := func() {
				if _, err := qa.PostSend(wr); err != nil {
					t.Fatal(err)
				}
				deadline := time.Now().Add(5 * time.Second)
				for got := 0; got < 1; {
					n, _ := w.a.cq.Poll(wcs[:1])
					got += n
					if time.Now().After(deadline) {
						t.Fatal("no send completion in 5 s")
					}
				}
				for got := 0; got < frames; {
					n, _ := w.b.cq.Poll(wcs)
					for i := 0; i < n; i++ {
						qb.PostRecv(rwr)
					}
					got += n
					if time.Now().After(deadline) {
						t.Fatalf("%d of %d frames in 5 s", got, frames)
					}
				}
			}
			run() // warm up
			if a := testing.AllocsPerRun(200, run); a != 0 {
				t.Errorf("%v allocations per frame sent and received", a)
			}
		})
	}
}

// TestRawNoCapNetRaw: without CAP_NET_RAW the raw devices are still listed,
// and opening one fails with one line naming the capability (EPERM). The
// thread that dropped the capability is discarded, not reused.
func TestRawNoCapNetRaw(t *testing.T) {
	p := netns.Setup(t, netns.Options{})
	err := p.A.Run(func() error {
		runtime.LockOSThread() // left locked: the runtime discards the thread after Run
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			return err
		}
		data[0].Effective &^= 1 << unix.CAP_NET_RAW
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			return err
		}
		if _, err := verbsio.LookupDevice("raw_" + p.A.Link); err != nil {
			return fmt.Errorf("raw device not listed without CAP_NET_RAW: %v", err)
		}
		_, err := verbsio.Open("raw_" + p.A.Link)
		if !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("open without CAP_NET_RAW: %v, want EPERM", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "CAP_NET_RAW") || strings.Contains(msg, "\n") {
			return fmt.Errorf("error %q is not one line naming CAP_NET_RAW", msg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
