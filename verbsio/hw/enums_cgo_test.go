//go:build linux && cgo && ibverbs

package hw

import (
	"testing"
	"unsafe"

	"github.com/rperf/rperf/verbsio"
	"github.com/rperf/rperf/verbsio/hw/internal/fakeverbs"
)

// TestEnumsMatchLibibverbs checks that every verbsio value this provider
// hands to libibverbs unchanged (or takes from it unchanged) equals the C
// constant of the verbs.h it is built against.
func TestEnumsMatchLibibverbs(t *testing.T) {
	for _, c := range []struct {
		c string
		v int64
	}{
		{"IBV_QP_STATE", int64(verbsio.QPAttrState)},
		{"IBV_QP_CUR_STATE", int64(verbsio.QPAttrCurState)},
		{"IBV_QP_EN_SQD_ASYNC_NOTIFY", int64(verbsio.QPAttrEnSQDAsyncNotify)},
		{"IBV_QP_ACCESS_FLAGS", int64(verbsio.QPAttrAccessFlags)},
		{"IBV_QP_PKEY_INDEX", int64(verbsio.QPAttrPkeyIndex)},
		{"IBV_QP_PORT", int64(verbsio.QPAttrPort)},
		{"IBV_QP_QKEY", int64(verbsio.QPAttrQKey)},
		{"IBV_QP_AV", int64(verbsio.QPAttrAV)},
		{"IBV_QP_PATH_MTU", int64(verbsio.QPAttrPathMTU)},
		{"IBV_QP_TIMEOUT", int64(verbsio.QPAttrTimeout)},
		{"IBV_QP_RETRY_CNT", int64(verbsio.QPAttrRetryCnt)},
		{"IBV_QP_RNR_RETRY", int64(verbsio.QPAttrRNRRetry)},
		{"IBV_QP_RQ_PSN", int64(verbsio.QPAttrRQPSN)},
		{"IBV_QP_MAX_QP_RD_ATOMIC", int64(verbsio.QPAttrMaxQPRdAtomic)},
		{"IBV_QP_ALT_PATH", int64(verbsio.QPAttrAltPath)},
		{"IBV_QP_MIN_RNR_TIMER", int64(verbsio.QPAttrMinRNRTimer)},
		{"IBV_QP_SQ_PSN", int64(verbsio.QPAttrSQPSN)},
		{"IBV_QP_MAX_DEST_RD_ATOMIC", int64(verbsio.QPAttrMaxDestRdAtomic)},
		{"IBV_QP_PATH_MIG_STATE", int64(verbsio.QPAttrPathMigState)},
		{"IBV_QP_CAP", int64(verbsio.QPAttrCap)},
		{"IBV_QP_DEST_QPN", int64(verbsio.QPAttrDestQPN)},
		{"IBV_QP_RATE_LIMIT", int64(verbsio.QPAttrRateLimit)},

		{"IBV_WC_SUCCESS", int64(verbsio.StatusSuccess)},
		{"IBV_WC_LOC_LEN_ERR", int64(verbsio.StatusLocLenErr)},
		{"IBV_WC_LOC_QP_OP_ERR", int64(verbsio.StatusLocQPOpErr)},
		{"IBV_WC_LOC_EEC_OP_ERR", int64(verbsio.StatusLocEECOpErr)},
		{"IBV_WC_LOC_PROT_ERR", int64(verbsio.StatusLocProtErr)},
		{"IBV_WC_WR_FLUSH_ERR", int64(verbsio.StatusWRFlushErr)},
		{"IBV_WC_MW_BIND_ERR", int64(verbsio.StatusMWBindErr)},
		{"IBV_WC_BAD_RESP_ERR", int64(verbsio.StatusBadRespErr)},
		{"IBV_WC_LOC_ACCESS_ERR", int64(verbsio.StatusLocAccessErr)},
		{"IBV_WC_REM_INV_REQ_ERR", int64(verbsio.StatusRemInvReqErr)},
		{"IBV_WC_REM_ACCESS_ERR", int64(verbsio.StatusRemAccessErr)},
		{"IBV_WC_REM_OP_ERR", int64(verbsio.StatusRemOpErr)},
		{"IBV_WC_RETRY_EXC_ERR", int64(verbsio.StatusRetryExcErr)},
		{"IBV_WC_RNR_RETRY_EXC_ERR", int64(verbsio.StatusRNRRetryExcErr)},
		{"IBV_WC_LOC_RDD_VIOL_ERR", int64(verbsio.StatusLocRDDViolErr)},
		{"IBV_WC_REM_INV_RD_REQ_ERR", int64(verbsio.StatusRemInvRDReqErr)},
		{"IBV_WC_REM_ABORT_ERR", int64(verbsio.StatusRemAbortErr)},
		{"IBV_WC_INV_EECN_ERR", int64(verbsio.StatusInvEECNErr)},
		{"IBV_WC_INV_EEC_STATE_ERR", int64(verbsio.StatusInvEECStateErr)},
		{"IBV_WC_FATAL_ERR", int64(verbsio.StatusFatalErr)},
		{"IBV_WC_RESP_TIMEOUT_ERR", int64(verbsio.StatusRespTimeoutErr)},
		{"IBV_WC_GENERAL_ERR", int64(verbsio.StatusGeneralErr)},

		{"IBV_ACCESS_LOCAL_WRITE", int64(verbsio.AccessLocalWrite)},
		{"IBV_ACCESS_REMOTE_WRITE", int64(verbsio.AccessRemoteWrite)},
		{"IBV_ACCESS_REMOTE_READ", int64(verbsio.AccessRemoteRead)},
		{"IBV_ACCESS_REMOTE_ATOMIC", int64(verbsio.AccessRemoteAtomic)},
		{"IBV_ACCESS_ZERO_BASED", int64(verbsio.AccessZeroBased)},

		{"IBV_WR_RDMA_WRITE", int64(verbsio.OpRDMAWrite)},
		{"IBV_WR_RDMA_WRITE_WITH_IMM", int64(verbsio.OpRDMAWriteImm)},
		{"IBV_WR_SEND", int64(verbsio.OpSend)},
		{"IBV_WR_SEND_WITH_IMM", int64(verbsio.OpSendImm)},
		{"IBV_WR_RDMA_READ", int64(verbsio.OpRDMARead)},
		{"IBV_WR_ATOMIC_CMP_AND_SWP", int64(verbsio.OpAtomicCmpSwp)},
		{"IBV_WR_ATOMIC_FETCH_AND_ADD", int64(verbsio.OpAtomicFetchAdd)},

		{"IBV_SEND_FENCE", int64(verbsio.SendFence)},
		{"IBV_SEND_SIGNALED", int64(verbsio.SendSignaled)},
		{"IBV_SEND_SOLICITED", int64(verbsio.SendSolicited)},
		{"IBV_SEND_INLINE", int64(verbsio.SendInline)},

		{"IBV_WC_GRH", int64(verbsio.WCWithGRH)},
		{"IBV_WC_WITH_IMM", int64(verbsio.WCWithImm)},

		// Completion opcodes: equal on the send side; the receive side is
		// mapped by wcOpcodeFromC.
		{"IBV_WC_SEND", int64(verbsio.WCSend)},
		{"IBV_WC_RDMA_WRITE", int64(verbsio.WCRDMAWrite)},
		{"IBV_WC_RDMA_READ", int64(verbsio.WCRDMARead)},
		{"IBV_WC_COMP_SWAP", int64(verbsio.WCCompSwap)},
		{"IBV_WC_FETCH_ADD", int64(verbsio.WCFetchAdd)},
		{"IBV_WC_RECV", cWCRecv},
		{"IBV_WC_RECV_RDMA_WITH_IMM", cWCRecvRDMAWithImm},

		{"IBV_QPT_RC", int64(verbsio.QPTypeRC)},
		{"IBV_QPT_UC", int64(verbsio.QPTypeUC)},
		{"IBV_QPT_UD", int64(verbsio.QPTypeUD)},
		{"IBV_QPT_RAW_PACKET", int64(verbsio.QPTypeRawPacket)},

		{"IBV_QPS_RESET", int64(verbsio.QPStateReset)},
		{"IBV_QPS_INIT", int64(verbsio.QPStateInit)},
		{"IBV_QPS_RTR", int64(verbsio.QPStateRTR)},
		{"IBV_QPS_RTS", int64(verbsio.QPStateRTS)},
		{"IBV_QPS_SQD", int64(verbsio.QPStateSQD)},
		{"IBV_QPS_SQE", int64(verbsio.QPStateSQE)},
		{"IBV_QPS_ERR", int64(verbsio.QPStateErr)},

		{"IBV_MTU_256", int64(verbsio.MTU256)},
		{"IBV_MTU_512", int64(verbsio.MTU512)},
		{"IBV_MTU_1024", int64(verbsio.MTU1024)},
		{"IBV_MTU_2048", int64(verbsio.MTU2048)},
		{"IBV_MTU_4096", int64(verbsio.MTU4096)},

		{"IBV_PORT_NOP", int64(verbsio.PortNop)},
		{"IBV_PORT_DOWN", int64(verbsio.PortDown)},
		{"IBV_PORT_INIT", int64(verbsio.PortInit)},
		{"IBV_PORT_ARMED", int64(verbsio.PortArmed)},
		{"IBV_PORT_ACTIVE", int64(verbsio.PortActive)},
		{"IBV_PORT_ACTIVE_DEFER", int64(verbsio.PortActiveDefer)},

		{"IBV_LINK_LAYER_UNSPECIFIED", int64(verbsio.LinkLayerUnspecified)},
		{"IBV_LINK_LAYER_INFINIBAND", int64(verbsio.LinkLayerInfiniBand)},
		{"IBV_LINK_LAYER_ETHERNET", int64(verbsio.LinkLayerEthernet)},

		{"IBV_GID_TYPE_IB", int64(verbsio.GIDTypeIB)},
		{"IBV_GID_TYPE_ROCE_V1", int64(verbsio.GIDTypeRoCEv1)},
		{"IBV_GID_TYPE_ROCE_V2", int64(verbsio.GIDTypeRoCEv2)},

		{"IBV_ATOMIC_NONE", int64(verbsio.AtomicNone)},
		{"IBV_ATOMIC_HCA", int64(verbsio.AtomicHCA)},
		{"IBV_ATOMIC_GLOB", int64(verbsio.AtomicGlob)},

		{"IBV_RAW_PACKET_CAP_CVLAN_STRIPPING", int64(verbsio.RawCapCVLANStripping)},
		{"IBV_RAW_PACKET_CAP_SCATTER_FCS", int64(verbsio.RawCapScatterFCS)},
		{"IBV_RAW_PACKET_CAP_IP_CSUM", int64(verbsio.RawCapIPCsum)},
		{"IBV_RAW_PACKET_CAP_DELAY_DROP", int64(verbsio.RawCapDelayDrop)},
	} {
		v, ok := fakeverbs.Const[c.c]
		if !ok {
			t.Errorf("%s: not exported by fakeverbs", c.c)
			continue
		}
		if v != c.v {
			t.Errorf("%s = %d in verbs.h, verbsio has %d", c.c, v, c.v)
		}
	}
}

// TestUnionOffsets compares the union members of the mirrors, which the
// compile-time checks cannot name, with offsetof in C.
func TestUnionOffsets(t *testing.T) {
	var w cSendWR
	base := uintptr(unsafe.Pointer(&w))
	rdma := (*cRDMAWR)(unsafe.Pointer(&w.wr))
	ud := (*cUDWR)(unsafe.Pointer(&w.wr))
	var wc cWC
	for _, c := range []struct {
		name string
		got  uintptr
	}{
		{"ibv_send_wr.imm_data", uintptr(unsafe.Pointer(&w.imm)) - base},
		{"ibv_send_wr.wr.rdma.remote_addr", uintptr(unsafe.Pointer(&rdma.remoteAddr)) - base},
		{"ibv_send_wr.wr.rdma.rkey", uintptr(unsafe.Pointer(&rdma.rkey)) - base},
		{"ibv_send_wr.wr.atomic.remote_addr", uintptr(unsafe.Pointer(&w.wr.remoteAddr)) - base},
		{"ibv_send_wr.wr.atomic.compare_add", uintptr(unsafe.Pointer(&w.wr.compareAdd)) - base},
		{"ibv_send_wr.wr.atomic.swap", uintptr(unsafe.Pointer(&w.wr.swap)) - base},
		{"ibv_send_wr.wr.atomic.rkey", uintptr(unsafe.Pointer(&w.wr.rkey)) - base},
		{"ibv_send_wr.wr.ud.ah", uintptr(unsafe.Pointer(&ud.ah)) - base},
		{"ibv_send_wr.wr.ud.remote_qpn", uintptr(unsafe.Pointer(&ud.remoteQPN)) - base},
		{"ibv_send_wr.wr.ud.remote_qkey", uintptr(unsafe.Pointer(&ud.remoteQKey)) - base},
		{"ibv_wc.imm_data", unsafe.Offsetof(wc.imm)},
		{"ibv_wc.dlid_path_bits", unsafe.Offsetof(wc.dlidPathBits)},
	} {
		if want := fakeverbs.Offsets[c.name]; c.got != want {
			t.Errorf("%s: mirror offset %d, C offsetof %d", c.name, c.got, want)
		}
	}
}

func TestBuiltWithIbverbs(t *testing.T) {
	if !Built {
		t.Errorf("Built is false in the ibverbs build")
	}
}
