package mad

import "fmt"

// RejectReason is a REJ's reason code (IBTA Table 109).
type RejectReason uint16

// Reject reasons, with the numbers Linux uses (enum ib_cm_rej_reason).
const (
	RejNoQP                      RejectReason = 1
	RejNoEEC                     RejectReason = 2
	RejNoResources               RejectReason = 3
	RejTimeout                   RejectReason = 4
	RejUnsupported               RejectReason = 5
	RejInvalidCommID             RejectReason = 6
	RejInvalidCommInstance       RejectReason = 7
	RejInvalidServiceID          RejectReason = 8
	RejInvalidTransportType      RejectReason = 9
	RejStaleConn                 RejectReason = 10
	RejRDCNotExist               RejectReason = 11
	RejInvalidGID                RejectReason = 12
	RejInvalidLID                RejectReason = 13
	RejInvalidSL                 RejectReason = 14
	RejInvalidTrafficClass       RejectReason = 15
	RejInvalidHopLimit           RejectReason = 16
	RejInvalidPacketRate         RejectReason = 17
	RejInvalidAltGID             RejectReason = 18
	RejInvalidAltLID             RejectReason = 19
	RejInvalidAltSL              RejectReason = 20
	RejInvalidAltTrafficClass    RejectReason = 21
	RejInvalidAltHopLimit        RejectReason = 22
	RejInvalidAltPacketRate      RejectReason = 23
	RejPortCMRedirect            RejectReason = 24
	RejPortRedirect              RejectReason = 25
	RejInvalidMTU                RejectReason = 26
	RejInsufficientRespResources RejectReason = 27
	RejConsumerDefined           RejectReason = 28
	RejInvalidRNRRetry           RejectReason = 29
	RejDuplicateLocalCommID      RejectReason = 30
	RejInvalidClassVersion       RejectReason = 31
	RejInvalidFlowLabel          RejectReason = 32
	RejInvalidAltFlowLabel       RejectReason = 33
)

var rejNames = [...]string{
	RejNoQP: "no QP", RejNoEEC: "no EEC", RejNoResources: "no resources", RejTimeout: "timeout",
	RejUnsupported: "unsupported", RejInvalidCommID: "invalid comm ID",
	RejInvalidCommInstance: "invalid comm instance", RejInvalidServiceID: "invalid service ID",
	RejInvalidTransportType: "invalid transport type", RejStaleConn: "stale conn",
	RejRDCNotExist: "RDC not exist", RejInvalidGID: "invalid GID", RejInvalidLID: "invalid LID",
	RejInvalidSL: "invalid SL", RejInvalidTrafficClass: "invalid traffic class",
	RejInvalidHopLimit: "invalid hop limit", RejInvalidPacketRate: "invalid packet rate",
	RejInvalidAltGID: "invalid alt GID", RejInvalidAltLID: "invalid alt LID",
	RejInvalidAltSL: "invalid alt SL", RejInvalidAltTrafficClass: "invalid alt traffic class",
	RejInvalidAltHopLimit: "invalid alt hop limit", RejInvalidAltPacketRate: "invalid alt packet rate",
	RejPortCMRedirect: "port CM redirect", RejPortRedirect: "port redirect", RejInvalidMTU: "invalid MTU",
	RejInsufficientRespResources: "insufficient resp resources", RejConsumerDefined: "consumer defined",
	RejInvalidRNRRetry: "invalid RNR retry", RejDuplicateLocalCommID: "duplicate local comm ID",
	RejInvalidClassVersion: "invalid class version", RejInvalidFlowLabel: "invalid flow label",
	RejInvalidAltFlowLabel: "invalid alt flow label",
}

// String returns the reason as Linux's ibcm_reject_msg words it.
func (r RejectReason) String() string {
	if int(r) < len(rejNames) && rejNames[r] != "" {
		return rejNames[r]
	}
	return "unrecognized reason"
}

// SIDRStatus is a SIDR_REP's status (IBTA Table 121).
type SIDRStatus uint8

// SIDR statuses (enum ib_cm_sidr_status).
const (
	SIDRSuccess            SIDRStatus = 0
	SIDRUnsupported        SIDRStatus = 1 // no such service
	SIDRReject             SIDRStatus = 2
	SIDRNoQP               SIDRStatus = 3
	SIDRRedirect           SIDRStatus = 4
	SIDRUnsupportedVersion SIDRStatus = 5
)

// String names the status.
func (s SIDRStatus) String() string {
	switch s {
	case SIDRSuccess:
		return "success"
	case SIDRUnsupported:
		return "service ID not supported"
	case SIDRReject:
		return "rejected"
	case SIDRNoQP:
		return "no QP"
	case SIDRRedirect:
		return "redirect"
	case SIDRUnsupportedVersion:
		return "unsupported version"
	}
	return fmt.Sprintf("status %d", uint8(s))
}
