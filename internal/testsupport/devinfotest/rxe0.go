package devinfotest

import "github.com/rperf/rperf/verbsio"

// RXE0 is rxe0 of the rxe VM as rperf's ibverbs provider answers for it
// (QueryDevice, QueryPort(1), QueryGIDTable(1)): the values its
// ibv_devinfo -v printed (testdata/rxe0/ibv_devinfo-v.txt), and the 512
// bytes of inline data rxe grants an RC QP at most.
func RXE0() (verbsio.DeviceAttr, verbsio.PortAttr, []verbsio.GIDEntry) {
	const guid = 0x505400fffe770001
	attr := verbsio.DeviceAttr{
		FWVer: "0.0.0", NodeGUID: guid, SysImageGUID: guid, VendorID: 0xffffff,
		MaxMRSize: ^uint64(0), PageSizeCap: 0xfffff000, MaxQP: 1048560, MaxQPWR: 1048576,
		DeviceCapFlags: 0x01223c76, MaxSGE: 32, MaxSGERD: 32, MaxCQ: 1048576, MaxCQE: 32767, MaxMR: 524287,
		MaxPD: 1048576, MaxQPRdAtom: 128, MaxQPInitRdAtom: 128, MaxResRdAtom: 258048,
		AtomicCap: verbsio.AtomicHCA, MaxSRQ: 917503, MaxSRQWR: 1048576, MaxSRQSGE: 27, MaxAH: 32767,
		MaxPkeys: 64, LocalCAAckDelay: 15, PhysPortCnt: 1,
		MaxInlineData: 512, MaxMsgSize: 0x800000, SendPaths: []string{"generic", "inline"},
		Ext: &verbsio.DeviceAttrEx{MaxMW: 524287, MaxMcastGrp: 8192, MaxMcastQPAttach: 56,
			MaxTotalMcastQPAttach: 458752, DeviceCapFlagsEx: 0x1223c76, NumCompVectors: 1},
	}
	port := verbsio.PortAttr{State: verbsio.PortActive, MaxMTU: verbsio.MTU4096, ActiveMTU: verbsio.MTU1024,
		GIDTblLen: 1024, PortCapFlags: 0x00010000, MaxMsgSize: 0x800000, PkeyTblLen: 1, MaxVLNum: 1,
		ActiveWidth: 1, ActiveSpeed: 1, PhysState: 5, LinkLayer: verbsio.LinkLayerEthernet, Netdev: "eth0",
		Ext: &verbsio.PortAttrEx{}}
	gids := []verbsio.GIDEntry{
		{Index: 0, GID: verbsio.GID{0xfe, 0x80, 6: 0, 8: 0x50, 9: 0x54, 10: 0, 11: 0xff, 12: 0xfe, 13: 0x77, 14: 0, 15: 1},
			Type: verbsio.GIDTypeRoCEv2, Netdev: "eth0"},
		{Index: 1, GID: verbsio.GID{10: 0xff, 11: 0xff, 12: 10, 13: 77, 14: 0, 15: 1}, Type: verbsio.GIDTypeRoCEv2, Netdev: "eth0"},
	}
	return attr, port, gids
}
