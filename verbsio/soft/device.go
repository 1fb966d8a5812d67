package soft

import (
	"hash/fnv"
	"os"

	"github.com/rperf/rperf/verbsio"
	"golang.org/x/sys/unix"
)

// Limits of the engine's contexts, on every fabric (what QueryDevice
// reports; the udp fabric's messages may be longer: udpMaxMsgSize).
const (
	maxQPWR     = 1 << 15 // work requests per queue
	maxCQE      = 1 << 17 // entries per completion queue
	maxSGEs     = 32      // scatter/gather entries per request
	maxInline   = 1024    // inline bytes per request
	maxMsg      = 1 << 30 // bytes per message
	maxRdAtomic = 128     // outstanding READs and atomics per QP
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

// engineDeviceAttr is what every fabric's device reports, before the
// fabric's own changes.
func engineDeviceAttr() verbsio.DeviceAttr {
	return verbsio.DeviceAttr{
		FWVer:           FWVersion,
		NodeGUID:        hostGUID(),
		SysImageGUID:    hostGUID(),
		MaxMRSize:       1 << 40,
		PageSizeCap:     uint64(unix.Getpagesize()),
		MaxQP:           maxQP,
		MaxQPWR:         maxQPWR,
		DeviceCapFlags:  engineCapFlags,
		MaxSGE:          maxSGEs,
		MaxSGERD:        maxSGEs,
		MaxCQ:           maxCQ,
		MaxCQE:          maxCQE,
		MaxMR:           maxMR,
		MaxPD:           maxPD,
		MaxQPRdAtom:     maxRdAtomic,
		MaxQPInitRdAtom: maxRdAtomic,
		MaxResRdAtom:    maxRdAtomic * maxQP,
		// Atomics are CPU atomic instructions on shared memory: atomic with
		// respect to the CPUs as well as to the engine.
		AtomicCap:     verbsio.AtomicGlob,
		MaxSRQ:        maxSRQ,
		MaxSRQWR:      maxQPWR,
		MaxSRQSGE:     maxSGEs,
		MaxAH:         maxAH,
		MaxPkeys:      1,
		PhysPortCnt:   1,
		MaxInlineData: maxInline,
		MaxMsgSize:    maxMsg,
		MaxDMSize:     DMSize,
		PacketPacing: verbsio.PacingCaps{RateLimitMinKbps: paceMinKbps, RateLimitMaxKbps: paceMaxKbps,
			SupportedQP: []verbsio.QPType{verbsio.QPTypeRC, verbsio.QPTypeUC, verbsio.QPTypeUD}},
		Interfaces: []verbsio.InterfaceCap{{Family: verbsio.FamilyQPBurst, Version: familyVersion[verbsio.FamilyQPBurst]},
			{Family: verbsio.FamilyCQPoll, Version: familyVersion[verbsio.FamilyCQPoll]}},
		SendPaths: []string{"generic", "burst", "inline", "dm", "dv"},
		Ext:       engineAttrEx(),
	}
}

// engineAttrEx is the extended part of every engine device's attributes:
// what ibv_query_device_ex adds. The engine stamps completions (a CQ
// created with verbsio.WCExCompletionTimestamp) in nanoseconds of
// CLOCK_REALTIME: a 64-bit clock at 1 GHz. It has no memory windows,
// multicast groups, on-demand paging, RSS, tag matching or CQ
// moderation, and one completion vector; fabrics add what they have
// (raw: max_raw_ethy_qp).
func engineAttrEx() *verbsio.DeviceAttrEx {
	return &verbsio.DeviceAttrEx{
		CompletionTimestampMask: ^uint64(0),
		HCACoreClock:            engineClockKHz,
		DeviceCapFlagsEx:        engineCapFlags,
		NumCompVectors:          1,
	}
}

// engineClockKHz is the completion clock's rate: nanoseconds (1 GHz).
const engineClockKHz = 1_000_000

// Device capability bits (IBV_DEVICE_*) the engine sets.
const (
	devCapPortActiveEvent = 1 << 10
	devCapSysImageGUID    = 1 << 11
	devCapRCRNRNAKGen     = 1 << 12
	devCapSRQResize       = 1 << 13

	engineCapFlags = devCapRCRNRNAKGen | devCapSRQResize | devCapPortActiveEvent | devCapSysImageGUID
)
