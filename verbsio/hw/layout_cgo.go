//go:build linux && cgo && ibverbs

package hw

/*
#include "shim.h"
*/
import "C"

import (
	"unsafe"

	"github.com/rperf/rperf/verbsio"
)

// Compile-time layout checks: the fast path writes the Go mirrors of
// layout.go into C memory that libibverbs reads as its own structs, so each
// mirror must have its C struct's size and field offsets. Every pair of
// lines below fails to compile ("constant ... overflows uintptr") unless
// the two sides are equal. The union members that cgo flattens to byte
// arrays are compared by the tests, against offsetof.
var (
	_ [unsafe.Sizeof(cSendWR{}) - C.sizeof_struct_ibv_send_wr]byte
	_ [C.sizeof_struct_ibv_send_wr - unsafe.Sizeof(cSendWR{})]byte
	_ [unsafe.Offsetof(cSendWR{}.next) - unsafe.Offsetof(C.struct_ibv_send_wr{}.next)]byte
	_ [unsafe.Offsetof(C.struct_ibv_send_wr{}.next) - unsafe.Offsetof(cSendWR{}.next)]byte
	_ [unsafe.Offsetof(cSendWR{}.sgList) - unsafe.Offsetof(C.struct_ibv_send_wr{}.sg_list)]byte
	_ [unsafe.Offsetof(C.struct_ibv_send_wr{}.sg_list) - unsafe.Offsetof(cSendWR{}.sgList)]byte
	_ [unsafe.Offsetof(cSendWR{}.numSGE) - unsafe.Offsetof(C.struct_ibv_send_wr{}.num_sge)]byte
	_ [unsafe.Offsetof(C.struct_ibv_send_wr{}.num_sge) - unsafe.Offsetof(cSendWR{}.numSGE)]byte
	_ [unsafe.Offsetof(cSendWR{}.opcode) - unsafe.Offsetof(C.struct_ibv_send_wr{}.opcode)]byte
	_ [unsafe.Offsetof(C.struct_ibv_send_wr{}.opcode) - unsafe.Offsetof(cSendWR{}.opcode)]byte
	_ [unsafe.Offsetof(cSendWR{}.flags) - unsafe.Offsetof(C.struct_ibv_send_wr{}.send_flags)]byte
	_ [unsafe.Offsetof(C.struct_ibv_send_wr{}.send_flags) - unsafe.Offsetof(cSendWR{}.flags)]byte
	_ [unsafe.Offsetof(cSendWR{}.wr) - unsafe.Offsetof(C.struct_ibv_send_wr{}.wr)]byte
	_ [unsafe.Offsetof(C.struct_ibv_send_wr{}.wr) - unsafe.Offsetof(cSendWR{}.wr)]byte
	_ [unsafe.Sizeof(cSendWR{}.wr) - unsafe.Sizeof(C.struct_ibv_send_wr{}.wr)]byte
	_ [unsafe.Sizeof(C.struct_ibv_send_wr{}.wr) - unsafe.Sizeof(cSendWR{}.wr)]byte
	_ [unsafe.Offsetof(cSendWR{}.qpType) - unsafe.Offsetof(C.struct_ibv_send_wr{}.qp_type)]byte
	_ [unsafe.Offsetof(C.struct_ibv_send_wr{}.qp_type) - unsafe.Offsetof(cSendWR{}.qpType)]byte

	_ [unsafe.Sizeof(cRecvWR{}) - C.sizeof_struct_ibv_recv_wr]byte
	_ [C.sizeof_struct_ibv_recv_wr - unsafe.Sizeof(cRecvWR{})]byte
	_ [unsafe.Offsetof(cRecvWR{}.next) - unsafe.Offsetof(C.struct_ibv_recv_wr{}.next)]byte
	_ [unsafe.Offsetof(C.struct_ibv_recv_wr{}.next) - unsafe.Offsetof(cRecvWR{}.next)]byte
	_ [unsafe.Offsetof(cRecvWR{}.sgList) - unsafe.Offsetof(C.struct_ibv_recv_wr{}.sg_list)]byte
	_ [unsafe.Offsetof(C.struct_ibv_recv_wr{}.sg_list) - unsafe.Offsetof(cRecvWR{}.sgList)]byte
	_ [unsafe.Offsetof(cRecvWR{}.numSGE) - unsafe.Offsetof(C.struct_ibv_recv_wr{}.num_sge)]byte
	_ [unsafe.Offsetof(C.struct_ibv_recv_wr{}.num_sge) - unsafe.Offsetof(cRecvWR{}.numSGE)]byte

	_ [unsafe.Sizeof(verbsio.SGE{}) - C.sizeof_struct_ibv_sge]byte
	_ [C.sizeof_struct_ibv_sge - unsafe.Sizeof(verbsio.SGE{})]byte
	_ [unsafe.Offsetof(verbsio.SGE{}.Length) - unsafe.Offsetof(C.struct_ibv_sge{}.length)]byte
	_ [unsafe.Offsetof(C.struct_ibv_sge{}.length) - unsafe.Offsetof(verbsio.SGE{}.Length)]byte
	_ [unsafe.Offsetof(verbsio.SGE{}.LKey) - unsafe.Offsetof(C.struct_ibv_sge{}.lkey)]byte
	_ [unsafe.Offsetof(C.struct_ibv_sge{}.lkey) - unsafe.Offsetof(verbsio.SGE{}.LKey)]byte

	_ [unsafe.Sizeof(cWC{}) - C.sizeof_struct_ibv_wc]byte
	_ [C.sizeof_struct_ibv_wc - unsafe.Sizeof(cWC{})]byte
	_ [unsafe.Offsetof(cWC{}.status) - unsafe.Offsetof(C.struct_ibv_wc{}.status)]byte
	_ [unsafe.Offsetof(C.struct_ibv_wc{}.status) - unsafe.Offsetof(cWC{}.status)]byte
	_ [unsafe.Offsetof(cWC{}.opcode) - unsafe.Offsetof(C.struct_ibv_wc{}.opcode)]byte
	_ [unsafe.Offsetof(C.struct_ibv_wc{}.opcode) - unsafe.Offsetof(cWC{}.opcode)]byte
	_ [unsafe.Offsetof(cWC{}.vendorErr) - unsafe.Offsetof(C.struct_ibv_wc{}.vendor_err)]byte
	_ [unsafe.Offsetof(C.struct_ibv_wc{}.vendor_err) - unsafe.Offsetof(cWC{}.vendorErr)]byte
	_ [unsafe.Offsetof(cWC{}.byteLen) - unsafe.Offsetof(C.struct_ibv_wc{}.byte_len)]byte
	_ [unsafe.Offsetof(C.struct_ibv_wc{}.byte_len) - unsafe.Offsetof(cWC{}.byteLen)]byte
	_ [unsafe.Offsetof(cWC{}.qpNum) - unsafe.Offsetof(C.struct_ibv_wc{}.qp_num)]byte
	_ [unsafe.Offsetof(C.struct_ibv_wc{}.qp_num) - unsafe.Offsetof(cWC{}.qpNum)]byte
	_ [unsafe.Offsetof(cWC{}.srcQP) - unsafe.Offsetof(C.struct_ibv_wc{}.src_qp)]byte
	_ [unsafe.Offsetof(C.struct_ibv_wc{}.src_qp) - unsafe.Offsetof(cWC{}.srcQP)]byte
	_ [unsafe.Offsetof(cWC{}.wcFlags) - unsafe.Offsetof(C.struct_ibv_wc{}.wc_flags)]byte
	_ [unsafe.Offsetof(C.struct_ibv_wc{}.wc_flags) - unsafe.Offsetof(cWC{}.wcFlags)]byte
	_ [unsafe.Offsetof(cWC{}.pkeyIndex) - unsafe.Offsetof(C.struct_ibv_wc{}.pkey_index)]byte
	_ [unsafe.Offsetof(C.struct_ibv_wc{}.pkey_index) - unsafe.Offsetof(cWC{}.pkeyIndex)]byte
	_ [unsafe.Offsetof(cWC{}.slid) - unsafe.Offsetof(C.struct_ibv_wc{}.slid)]byte
	_ [unsafe.Offsetof(C.struct_ibv_wc{}.slid) - unsafe.Offsetof(cWC{}.slid)]byte
	_ [unsafe.Offsetof(cWC{}.sl) - unsafe.Offsetof(C.struct_ibv_wc{}.sl)]byte
	_ [unsafe.Offsetof(C.struct_ibv_wc{}.sl) - unsafe.Offsetof(cWC{}.sl)]byte
)
