package soft

import (
	"hash/fnv"
	"os"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// Limits of the shm fabric's contexts.
const (
	shmMaxQPWR     = 1 << 15
	shmMaxCQE      = 1 << 17
	shmMaxSGE      = 32
	shmMaxInline   = 1024
	shmMaxMsgSize  = 1 << 30
	shmMaxRdAtomic = 128
)

// FWVersion is the engine version devices report as firmware.
const FWVersion = "rperf-engine 1.0"

func hostGUID() uint64 {
	h := fnv.New64a()
	name, _ := os.Hostname()
	h.Write([]byte("rperf-shm:" + name))
	// Mark it as a locally administered EUI-64.
	return h.Sum64()&^(0xff<<56) | 0x02<<56
}

func shmDeviceAttr() verbsio.DeviceAttr {
	return verbsio.DeviceAttr{
		FWVer:           FWVersion,
		NodeGUID:        hostGUID(),
		SysImageGUID:    hostGUID(),
		MaxMRSize:       1 << 40,
		PageSizeCap:     uint64(unix.Getpagesize()),
		MaxQP:           maxQP,
		MaxQPWR:         shmMaxQPWR,
		DeviceCapFlags:  devCapRCRNRNAKGen | devCapSRQResize | devCapPortActiveEvent | devCapSysImageGUID,
		MaxSGE:          shmMaxSGE,
		MaxSGERD:        shmMaxSGE,
		MaxCQ:           maxCQ,
		MaxCQE:          shmMaxCQE,
		MaxMR:           maxMR,
		MaxPD:           maxPD,
		MaxQPRdAtom:     shmMaxRdAtomic,
		MaxQPInitRdAtom: shmMaxRdAtomic,
		MaxResRdAtom:    shmMaxRdAtomic * maxQP,
		// Atomics are CPU atomic instructions on shared memory: atomic with
		// respect to the CPUs as well as to the engine.
		AtomicCap:     verbsio.AtomicGlob,
		MaxSRQ:        maxSRQ,
		MaxSRQWR:      shmMaxQPWR,
		MaxSRQSGE:     shmMaxSGE,
		MaxAH:         maxAH,
		MaxPkeys:      1,
		PhysPortCnt:   1,
		MaxInlineData: shmMaxInline,
		MaxMsgSize:    shmMaxMsgSize,
		MaxDMSize:     DMSize,
		PacketPacing: verbsio.PacingCaps{RateLimitMinKbps: paceMinKbps, RateLimitMaxKbps: paceMaxKbps,
			SupportedQP: []verbsio.QPType{verbsio.QPTypeRC, verbsio.QPTypeUC, verbsio.QPTypeUD}},
		Interfaces: []verbsio.InterfaceCap{{Family: verbsio.FamilyQPBurst, Version: familyVersion[verbsio.FamilyQPBurst]},
			{Family: verbsio.FamilyCQPoll, Version: familyVersion[verbsio.FamilyCQPoll]}},
		SendPaths: []string{"generic", "burst", "inline", "dm", "dv"},
	}
}

// Device capability bits (IBV_DEVICE_*) the engine sets.
const (
	devCapPortActiveEvent = 1 << 10
	devCapSysImageGUID    = 1 << 11
	devCapRCRNRNAKGen     = 1 << 12
	devCapSRQResize       = 1 << 13
)

func shmPortAttr() verbsio.PortAttr {
	return verbsio.PortAttr{
		State:      verbsio.PortActive,
		MaxMTU:     verbsio.MTU4096,
		ActiveMTU:  verbsio.MTU4096,
		GIDTblLen:  1,
		MaxMsgSize: shmMaxMsgSize,
		PkeyTblLen: 1,
		MaxVLNum:   1,
		PhysState:  5, // LINK_UP
		LinkLayer:  verbsio.LinkLayerUnspecified,
	}
}
