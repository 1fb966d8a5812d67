package sysfs

import (
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ptr[T any](v T) *T { return &v }

// errText compares errors by message: a *FileError carries a relative
// path and the bare errno, so its text is stable across machines.
var errText = cmp.Comparer(func(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
})

func mustFS(t *testing.T, machine string) FS {
	t.Helper()
	f, err := NewFS(filepath.Join("testdata", "sys", machine))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func gid(t *testing.T, idx int, s string, typ GIDType, ndev string) GID {
	t.Helper()
	raw, err := ParseGID(s)
	if err != nil {
		t.Fatal(err)
	}
	return GID{Index: idx, Raw: raw, Type: typ, NetDev: ndev}
}

func fileErr(op, p string, err error) error { return &FileError{Op: op, Path: p, Err: err} }

func TestReportFixtures(t *testing.T) {
	rxeGUID := GUID(0x505400fffe770001)
	ibGUID := GUID(0x0c42a10300123456)
	roceGUID := GUID(0xb8cef6030012abcd)
	tests := []struct {
		machine string
		want    Report
	}{
		{
			machine: "rxe",
			want: Report{
				Devices: []Device{{
					Name:         "rxe0",
					NodeType:     &NodeType{Code: 1, Name: "CA"},
					NodeGUID:     &rxeGUID,
					SysImageGUID: &rxeGUID,
					FWVer:        ptr(""),
					NodeDesc:     ptr("rxe"),
					Parent:       ptr("eth0"),
					UVerbs:       &UVerbs{Name: "uverbs0", IBDev: ptr("rxe0"), ABIVersion: ptr(6), Dev: ptr("231:192")},
					Ports: []Port{{
						Number:       1,
						State:        &PortState{Code: 4, Name: "ACTIVE"},
						PhysState:    &PhysState{Code: 5, Name: "LinkUp"},
						Rate:         &Rate{Gbps: 2.5, Width: 1, Speed: "SDR"},
						LinkLayer:    ptr("Ethernet"),
						LID:          ptr[uint32](0),
						SMLID:        ptr[uint32](0),
						SMSL:         ptr[uint8](0),
						LMC:          ptr[uint8](0),
						CapMask:      ptr[uint32](0x00010000),
						GIDTableLen:  1024,
						PKeyTableLen: 1,
						GIDs: []GID{
							gid(t, 0, "fe80:0000:0000:0000:5054:00ff:fe77:0001", GIDTypeRoCEv2, "eth0"),
							gid(t, 1, "0000:0000:0000:0000:0000:ffff:0a4d:0001", GIDTypeRoCEv2, "eth0"),
						},
						HWCounters: map[string]uint64{
							"ack_deferred": 0, "completer_retry_err": 0, "duplicate_request": 0, "lifespan": 12,
							"link_downed": 0, "out_of_seq_request": 0, "rcvd_pkts": 0, "rcvd_rnr_err": 0,
							"rcvd_seq_err": 0, "rdma_recvs": 0, "rdma_sends": 0, "retry_exceeded_err": 0,
							"retry_rnr_exceeded_err": 0, "send_err": 0, "send_rnr_err": 0, "sent_pkts": 0,
						},
					}},
				}},
				UVerbs:     []UVerbs{{Name: "uverbs0", IBDev: ptr("rxe0"), ABIVersion: ptr(6), Dev: ptr("231:192")}},
				ABIVersion: ptr(6),
				NetDevs: []NetDev{
					{Name: "eth0", MTU: ptr(1500), OperState: ptr("up"), Carrier: ptr(true), Address: ptr("52:54:00:77:00:01"), IfIndex: ptr(2), Type: ptr(1)},
					{Name: "lo", MTU: ptr(65536), OperState: ptr("unknown"), Carrier: ptr(true), Address: ptr("00:00:00:00:00:00"), IfIndex: ptr(1), Type: ptr(772)},
				},
			},
		},
		{
			machine: "ib",
			want: Report{
				Devices: []Device{{
					Name:         "mlx5_0",
					NodeType:     &NodeType{Code: 1, Name: "CA"},
					NodeGUID:     &ibGUID,
					SysImageGUID: &ibGUID,
					FWVer:        ptr("16.35.2000"),
					HCAType:      ptr("MT4119"),
					BoardID:      ptr("MT_0000000010"),
					NodeDesc:     ptr("ib-host-01 HCA-1"),
					UVerbs:       &UVerbs{Name: "uverbs0", IBDev: ptr("mlx5_0"), ABIVersion: ptr(1), Dev: ptr("231:192")},
					Ports: []Port{{
						Number:       1,
						State:        &PortState{Code: 4, Name: "ACTIVE"},
						PhysState:    &PhysState{Code: 5, Name: "LinkUp"},
						Rate:         &Rate{Gbps: 100, Width: 4, Speed: "EDR"},
						LinkLayer:    ptr("InfiniBand"),
						LID:          ptr[uint32](7),
						SMLID:        ptr[uint32](1),
						SMSL:         ptr[uint8](0),
						LMC:          ptr[uint8](0),
						CapMask:      ptr[uint32](0xa659e848),
						GIDTableLen:  4,
						PKeyTableLen: 2,
						GIDs:         []GID{gid(t, 0, "fe80:0000:0000:0000:0c42:a103:0012:3456", GIDTypeIB, "")},
						Counters: map[string]uint64{
							"port_rcv_data": 918273645, "port_xmit_data": 817263544,
							"port_rcv_packets": 2211003, "port_xmit_packets": 2110993,
							"symbol_error": 0, "link_downed": 1, "VL15_dropped": 0, "port_xmit_wait": 0,
						},
						HWCounters: map[string]uint64{
							"out_of_buffer": 0, "out_of_sequence": 3, "local_ack_timeout_err": 0, "rnr_nak_retry_err": 0,
						},
					}},
				}},
				UVerbs:     []UVerbs{{Name: "uverbs0", IBDev: ptr("mlx5_0"), ABIVersion: ptr(1), Dev: ptr("231:192")}},
				ABIVersion: ptr(6),
				NetDevs: []NetDev{{
					Name: "ib0", MTU: ptr(4092), OperState: ptr("up"), Carrier: ptr(true),
					Address: ptr("00:00:10:29:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:12:34:56"),
					IfIndex: ptr(4), Type: ptr(32), SpeedMbps: ptr(100000),
				}},
			},
		},
		{
			machine: "roce",
			want: Report{
				Devices: []Device{{
					Name:         "mlx5_2",
					NodeType:     &NodeType{Code: 1, Name: "CA"},
					NodeGUID:     &roceGUID,
					SysImageGUID: &roceGUID,
					FWVer:        ptr("26.36.1010"),
					HCAType:      ptr("MT4127"),
					BoardID:      ptr("MT_0000000531"),
					NodeDesc:     ptr("roce-host-02 mlx5_2"),
					NetDevs:      []string{"ens2f0np0"},
					UVerbs:       &UVerbs{Name: "uverbs2", IBDev: ptr("mlx5_2"), ABIVersion: ptr(1), Dev: ptr("231:194")},
					Ports: []Port{{
						Number:       1,
						State:        &PortState{Code: 4, Name: "ACTIVE"},
						PhysState:    &PhysState{Code: 5, Name: "LinkUp"},
						Rate:         &Rate{Gbps: 25, Width: 1, Speed: "EDR"},
						LinkLayer:    ptr("Ethernet"),
						LID:          ptr[uint32](0),
						SMLID:        ptr[uint32](0),
						SMSL:         ptr[uint8](0),
						LMC:          ptr[uint8](0),
						CapMask:      ptr[uint32](0x04010000),
						GIDTableLen:  10,
						PKeyTableLen: 1,
						GIDs: []GID{
							gid(t, 0, "fe80:0000:0000:0000:bace:f6ff:fe12:abcd", GIDTypeRoCEv1, "ens2f0np0"),
							gid(t, 1, "fe80:0000:0000:0000:bace:f6ff:fe12:abcd", GIDTypeRoCEv2, "ens2f0np0"),
							gid(t, 2, "0000:0000:0000:0000:0000:ffff:c0a8:0a05", GIDTypeRoCEv1, "ens2f0np0"),
							gid(t, 3, "0000:0000:0000:0000:0000:ffff:c0a8:0a05", GIDTypeRoCEv2, "ens2f0np0"),
							gid(t, 4, "2001:0db8:0010:0000:0000:0000:0000:0005", GIDTypeRoCEv1, "ens2f0np0"),
							gid(t, 5, "2001:0db8:0010:0000:0000:0000:0000:0005", GIDTypeRoCEv2, "ens2f0np0"),
							gid(t, 6, "0000:0000:0000:0000:0000:ffff:a9fe:0a05", GIDTypeRoCEv1, "ens2f0np0.100"),
							gid(t, 7, "0000:0000:0000:0000:0000:ffff:a9fe:0a05", GIDTypeRoCEv2, "ens2f0np0.100"),
						},
						Counters: map[string]uint64{
							"port_rcv_data": 123456789, "port_xmit_data": 987654321,
							"port_rcv_packets": 1000, "port_xmit_packets": 2000,
						},
						HWCounters: map[string]uint64{
							"out_of_buffer": 12, "np_cnp_sent": 7, "rp_cnp_handled": 5, "roce_adp_retrans": 0,
						},
					}},
				}},
				UVerbs:     []UVerbs{{Name: "uverbs2", IBDev: ptr("mlx5_2"), ABIVersion: ptr(1), Dev: ptr("231:194")}},
				ABIVersion: ptr(6),
				NetDevs: []NetDev{
					{Name: "ens2f0np0", MTU: ptr(9000), OperState: ptr("up"), Carrier: ptr(true), Address: ptr("b8:ce:f6:12:ab:cd"), IfIndex: ptr(5), Type: ptr(1), SpeedMbps: ptr(25000)},
					{Name: "ens2f0np0.100", MTU: ptr(1500), OperState: ptr("up"), Carrier: ptr(true), Address: ptr("b8:ce:f6:12:ab:cd"), IfIndex: ptr(9), Type: ptr(1), SpeedMbps: ptr(25000)},
				},
			},
		},
		{
			machine: "portdown",
			want: Report{
				Devices: []Device{{
					Name:         "mlx5_1",
					NodeType:     &NodeType{Code: 1, Name: "CA"},
					NodeGUID:     ptr(GUID(0x0c42a10300778899)),
					SysImageGUID: ptr(GUID(0x0c42a10300778898)),
					FWVer:        ptr("16.35.2000"),
					HCAType:      ptr("MT4119"),
					BoardID:      ptr("MT_0000000012"),
					NodeDesc:     ptr("host-03 mlx5_1"),
					UVerbs:       &UVerbs{Name: "uverbs1", IBDev: ptr("mlx5_1"), ABIVersion: ptr(1), Dev: ptr("231:193")},
					Ports: []Port{{
						Number:       1,
						State:        &PortState{Code: 1, Name: "DOWN"},
						PhysState:    &PhysState{Code: 3, Name: "Disabled"},
						Rate:         &Rate{Gbps: 40, Width: 4, Speed: "QDR"},
						LinkLayer:    ptr("Ethernet"),
						LID:          ptr[uint32](0),
						SMLID:        ptr[uint32](0),
						SMSL:         ptr[uint8](0),
						LMC:          ptr[uint8](0),
						CapMask:      ptr[uint32](0x04010000),
						GIDTableLen:  3,
						PKeyTableLen: 1,
						GIDs: []GID{
							gid(t, 0, "fe80:0000:0000:0000:0e42:a1ff:fe77:8899", GIDTypeRoCEv1, "ens1f1np1"),
							gid(t, 1, "fe80:0000:0000:0000:0e42:a1ff:fe77:8899", GIDTypeRoCEv2, "ens1f1np1"),
						},
						Counters: map[string]uint64{"port_rcv_data": 0, "port_xmit_data": 0, "link_downed": 4},
					}},
				}},
				UVerbs:     []UVerbs{{Name: "uverbs1", IBDev: ptr("mlx5_1"), ABIVersion: ptr(1), Dev: ptr("231:193")}},
				ABIVersion: ptr(6),
				// carrier and speed are unreadable while the link is down:
				// unknown, not errors.
				NetDevs: []NetDev{{Name: "ens1f1np1", MTU: ptr(1500), OperState: ptr("down"), Address: ptr("0c:42:a1:77:88:99"), IfIndex: ptr(3), Type: ptr(1)}},
			},
		},
		{
			machine: "missing",
			want: Report{
				Devices: []Device{
					{
						Name:         "bnxt_re0",
						NodeType:     &NodeType{Code: 1, Name: "CA"},
						NodeGUID:     ptr(GUID(0x5e6f69fffe707172)),
						SysImageGUID: ptr(GUID(0x5e6f69fffe707172)),
						HCAType:      ptr("bnxt_re"),
						NodeDesc:     ptr("bnxt_re0"),
						UVerbs:       &UVerbs{Name: "uverbs0", IBDev: ptr("bnxt_re0"), Dev: ptr("231:192")},
						Ports: []Port{{
							Number:      1,
							State:       &PortState{Code: 4, Name: "ACTIVE"},
							PhysState:   &PhysState{Code: 5, Name: "LinkUp"},
							LinkLayer:   ptr("Ethernet"),
							LID:         ptr[uint32](0),
							SMLID:       ptr[uint32](0),
							SMSL:        ptr[uint8](0),
							LMC:         ptr[uint8](0),
							CapMask:     ptr[uint32](0x00010000),
							GIDTableLen: 2,
							GIDs:        []GID{gid(t, 0, "0000:0000:0000:0000:0000:ffff:0a00:0007", GIDTypeUnknown, "")},
							Counters:    map[string]uint64{"port_xmit_data": 42},
							HWCounters: map[string]uint64{
								"rx_pkts": 17,
							},
							Errs: []error{
								fileErr("read", "class/infiniband/bnxt_re0/ports/1/gid_attrs/types/0", syscall.EISDIR),
								fileErr("parse", "class/infiniband/bnxt_re0/ports/1/counters/symbol_error", errors.New(`counter: parse "lots": not a number`)),
							},
						}},
					},
					{
						Name: "broken0",
						Errs: []error{fileErr("read", "class/infiniband/broken0", syscall.ENOTDIR)},
					},
					{
						Name:         "siw0",
						NodeType:     &NodeType{Code: 4, Name: "RNIC"},
						NodeGUID:     ptr(GUID(0x020000fffe000001)),
						SysImageGUID: ptr(GUID(0x020000fffe000001)),
						FWVer:        ptr(""),
						NodeDesc:     ptr("siw"),
						Parent:       ptr("eth1"),
						UVerbs:       &UVerbs{Name: "uverbs1", IBDev: ptr("siw0"), ABIVersion: ptr(1), Dev: ptr("231:193")},
						Ports: []Port{{
							Number:      1,
							State:       &PortState{Code: 4, Name: "ACTIVE"},
							PhysState:   &PhysState{Code: 5, Name: "LinkUp"},
							Rate:        &Rate{Gbps: 2.5, Width: 1, Speed: "SDR"},
							LinkLayer:   ptr("Ethernet"),
							GIDTableLen: 1,
							GIDs:        []GID{gid(t, 0, "0200:0000:0000:0000:0000:0000:0000:0000", GIDTypeRoCEv1, "eth1")},
						}},
					},
				},
				UVerbs: []UVerbs{
					{Name: "uverbs0", IBDev: ptr("bnxt_re0"), Dev: ptr("231:192")},
					{Name: "uverbs1", IBDev: ptr("siw0"), ABIVersion: ptr(1), Dev: ptr("231:193")},
				},
				ABIVersion: ptr(6),
				NetDevs:    []NetDev{{Name: "eth1", MTU: ptr(1500), OperState: ptr("up"), Address: ptr("02:00:00:00:00:01"), IfIndex: ptr(3)}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.machine, func(t *testing.T) {
			got := mustFS(t, tt.machine).Report()
			if diff := cmp.Diff(tt.want, got, errText); diff != "" {
				t.Errorf("Report() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeviceByName(t *testing.T) {
	f := mustFS(t, "roce")
	d, err := f.Device("mlx5_2")
	if err != nil {
		t.Fatal(err)
	}
	if d.UVerbs == nil || d.UVerbs.Name != "uverbs2" {
		t.Errorf("Device(mlx5_2).UVerbs = %+v, want uverbs2", d.UVerbs)
	}
	for _, name := range []string{"nope", "", "..", "a/b"} {
		if _, err := f.Device(name); err == nil {
			t.Errorf("Device(%q) succeeded, want an error", name)
		}
	}
	if _, err := f.Device("nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Device(nope) error = %v, want fs.ErrNotExist", err)
	}
}

func TestNetDevByName(t *testing.T) {
	f := mustFS(t, "roce")
	n, err := f.NetDev("ens2f0np0.100")
	if err != nil {
		t.Fatal(err)
	}
	if n.MTU == nil || *n.MTU != 1500 {
		t.Errorf("MTU = %v, want 1500", n.MTU)
	}
	for _, name := range []string{"nope", "", "..", "a/b"} {
		if _, err := f.NetDev(name); err == nil {
			t.Errorf("NetDev(%q) succeeded, want an error", name)
		}
	}
}

func TestPortNetDev(t *testing.T) {
	tests := []struct {
		machine, want string
	}{
		{"rxe", "eth0"},       // parent file
		{"roce", "ens2f0np0"}, // lowest GID's netdev
		{"ib", ""},            // InfiniBand: none
	}
	for _, tt := range tests {
		t.Run(tt.machine, func(t *testing.T) {
			r := mustFS(t, tt.machine).Report()
			d := r.Devices[0]
			if got := PortNetDev(d, d.Ports[0]); got != tt.want {
				t.Errorf("PortNetDev() = %q, want %q", got, tt.want)
			}
		})
	}
	// Without GID netdevs, a device with a single PCI netdev uses it.
	d := Device{NetDevs: []string{"enp1s0"}}
	if got := PortNetDev(d, Port{}); got != "enp1s0" {
		t.Errorf("PortNetDev(single PCI netdev) = %q", got)
	}
}
