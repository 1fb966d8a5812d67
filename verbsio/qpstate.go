package verbsio

import "golang.org/x/sys/unix"

// The QP state machine of the InfiniBand specification, as the Linux kernel
// checks it in ib_modify_qp_is_ok: which transitions exist, which attributes
// each requires and which it allows, per QP type.

type transitionRule struct {
	valid bool
	req   map[QPType]QPAttrMask
	opt   map[QPType]QPAttrMask
}

const (
	connOpt = QPAttrAltPath | QPAttrAccessFlags | QPAttrPathMigState
)

var qpTransitions = func() map[[2]QPState]transitionRule {
	all := func(m QPAttrMask) map[QPType]QPAttrMask {
		return map[QPType]QPAttrMask{QPTypeRC: m, QPTypeUC: m, QPTypeUD: m, QPTypeRawPacket: m}
	}
	t := map[[2]QPState]transitionRule{}
	anyState := []QPState{QPStateReset, QPStateInit, QPStateRTR, QPStateRTS, QPStateSQD, QPStateSQE, QPStateErr}
	for _, s := range anyState {
		t[[2]QPState{s, QPStateReset}] = transitionRule{valid: true}
		t[[2]QPState{s, QPStateErr}] = transitionRule{valid: true}
	}
	t[[2]QPState{QPStateReset, QPStateInit}] = transitionRule{valid: true,
		req: map[QPType]QPAttrMask{
			QPTypeRC:        QPAttrPkeyIndex | QPAttrPort | QPAttrAccessFlags,
			QPTypeUC:        QPAttrPkeyIndex | QPAttrPort | QPAttrAccessFlags,
			QPTypeUD:        QPAttrPkeyIndex | QPAttrPort | QPAttrQKey,
			QPTypeRawPacket: QPAttrPort,
		}}
	t[[2]QPState{QPStateInit, QPStateInit}] = transitionRule{valid: true,
		opt: map[QPType]QPAttrMask{
			QPTypeRC:        QPAttrPkeyIndex | QPAttrPort | QPAttrAccessFlags,
			QPTypeUC:        QPAttrPkeyIndex | QPAttrPort | QPAttrAccessFlags,
			QPTypeUD:        QPAttrPkeyIndex | QPAttrPort | QPAttrQKey,
			QPTypeRawPacket: QPAttrPort,
		}}
	t[[2]QPState{QPStateInit, QPStateRTR}] = transitionRule{valid: true,
		req: map[QPType]QPAttrMask{
			QPTypeRC: QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer,
			QPTypeUC: QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN,
		},
		opt: map[QPType]QPAttrMask{
			QPTypeRC: QPAttrAltPath | QPAttrAccessFlags | QPAttrPkeyIndex,
			QPTypeUC: QPAttrAltPath | QPAttrAccessFlags | QPAttrPkeyIndex,
			QPTypeUD: QPAttrPkeyIndex | QPAttrQKey,
		}}
	t[[2]QPState{QPStateRTR, QPStateRTS}] = transitionRule{valid: true,
		req: map[QPType]QPAttrMask{
			QPTypeRC: QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrSQPSN | QPAttrMaxQPRdAtomic,
			QPTypeUC: QPAttrSQPSN,
			QPTypeUD: QPAttrSQPSN,
		},
		opt: map[QPType]QPAttrMask{
			QPTypeRC:        QPAttrCurState | connOpt | QPAttrMinRNRTimer | QPAttrRateLimit,
			QPTypeUC:        QPAttrCurState | connOpt | QPAttrRateLimit,
			QPTypeUD:        QPAttrCurState | QPAttrQKey | QPAttrRateLimit,
			QPTypeRawPacket: QPAttrRateLimit,
		}}
	t[[2]QPState{QPStateRTS, QPStateRTS}] = transitionRule{valid: true,
		opt: map[QPType]QPAttrMask{
			QPTypeRC:        QPAttrCurState | connOpt | QPAttrMinRNRTimer | QPAttrRateLimit,
			QPTypeUC:        QPAttrCurState | connOpt | QPAttrRateLimit,
			QPTypeUD:        QPAttrCurState | QPAttrQKey | QPAttrRateLimit,
			QPTypeRawPacket: QPAttrRateLimit,
		}}
	t[[2]QPState{QPStateRTS, QPStateSQD}] = transitionRule{valid: true, opt: all(QPAttrEnSQDAsyncNotify)}
	t[[2]QPState{QPStateSQD, QPStateRTS}] = transitionRule{valid: true,
		opt: map[QPType]QPAttrMask{
			QPTypeRC: QPAttrCurState | connOpt | QPAttrMinRNRTimer,
			QPTypeUC: QPAttrCurState | connOpt,
			QPTypeUD: QPAttrCurState | QPAttrQKey,
		}}
	t[[2]QPState{QPStateSQD, QPStateSQD}] = transitionRule{valid: true,
		opt: map[QPType]QPAttrMask{
			QPTypeRC: QPAttrPkeyIndex | QPAttrQKey | QPAttrAV | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry |
				QPAttrMaxQPRdAtomic | QPAttrMaxDestRdAtomic | connOpt | QPAttrMinRNRTimer,
			QPTypeUC: QPAttrPkeyIndex | QPAttrAV | connOpt,
			QPTypeUD: QPAttrPkeyIndex | QPAttrQKey,
		}}
	t[[2]QPState{QPStateSQE, QPStateRTS}] = transitionRule{valid: true,
		opt: map[QPType]QPAttrMask{
			QPTypeUC: QPAttrCurState | QPAttrAccessFlags,
			QPTypeUD: QPAttrCurState | QPAttrQKey,
		}}
	return t
}()

// CheckModify applies verbs' rules to a Modify call on a QP of type t in
// state cur: the transition must exist, every attribute it requires must be
// in mask, no attribute outside the required and optional sets may be, and
// the values must be in range. It returns the state the QP moves to.
// Providers call it before touching their own state.
func CheckModify(t QPType, cur QPState, attr *QPAttr, mask QPAttrMask) (QPState, error) {
	next := cur
	if mask&QPAttrState != 0 {
		next = attr.State
	}
	if mask&QPAttrCurState != 0 && attr.CurState != cur && !(cur == QPStateSQE || cur == QPStateRTS || cur == QPStateRTR || cur == QPStateSQD) {
		return cur, Errorf("modify_qp", unix.EINVAL, "cur_state %s does not match the QP's state %s", attr.CurState, cur)
	}
	rule, ok := qpTransitions[[2]QPState{cur, next}]
	if !ok || !rule.valid {
		return cur, Errorf("modify_qp", unix.EINVAL, "%s QP cannot go from %s to %s", t, cur, next)
	}
	req := rule.req[t]
	opt := rule.opt[t]
	if missing := req &^ mask; missing != 0 {
		return cur, Errorf("modify_qp", unix.EINVAL, "%s QP %s->%s needs attributes %s", t, cur, next, missing)
	}
	if extra := mask &^ (req | opt | QPAttrState | QPAttrCurState); extra != 0 {
		return cur, Errorf("modify_qp", unix.EINVAL, "%s QP %s->%s does not take attributes %s", t, cur, next, extra)
	}
	if err := checkQPAttrValues(attr, mask); err != nil {
		return cur, err
	}
	return next, nil
}

func checkQPAttrValues(a *QPAttr, mask QPAttrMask) error {
	bad := func(format string, args ...any) error { return Errorf("modify_qp", unix.EINVAL, format, args...) }
	if mask&QPAttrState != 0 && a.State >= qpStateCount {
		return bad("invalid state %d", a.State)
	}
	if mask&QPAttrPort != 0 && a.PortNum != 1 {
		return bad("port %d does not exist (ports are numbered from 1)", a.PortNum)
	}
	if mask&QPAttrPathMTU != 0 && !a.PathMTU.Valid() {
		return bad("path MTU %d is not one of 1 (256) .. 5 (4096)", a.PathMTU)
	}
	if mask&QPAttrRQPSN != 0 && a.RQPSN > 0xffffff {
		return bad("rq_psn %#x is wider than 24 bits", a.RQPSN)
	}
	if mask&QPAttrSQPSN != 0 && a.SQPSN > 0xffffff {
		return bad("sq_psn %#x is wider than 24 bits", a.SQPSN)
	}
	if mask&QPAttrDestQPN != 0 && a.DestQPN > 0xffffff {
		return bad("dest_qp_num %#x is wider than 24 bits", a.DestQPN)
	}
	if mask&QPAttrTimeout != 0 && a.Timeout > 31 {
		return bad("timeout %d is above 31", a.Timeout)
	}
	if mask&QPAttrRetryCnt != 0 && a.RetryCnt > 7 {
		return bad("retry_cnt %d is above 7", a.RetryCnt)
	}
	if mask&QPAttrRNRRetry != 0 && a.RNRRetry > 7 {
		return bad("rnr_retry %d is above 7", a.RNRRetry)
	}
	if mask&QPAttrMinRNRTimer != 0 && a.MinRNRTimer > 31 {
		return bad("min_rnr_timer %d is above 31", a.MinRNRTimer)
	}
	if mask&QPAttrAccessFlags != 0 && a.AccessFlags&^(AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic) != 0 {
		return bad("unknown access flags %s", a.AccessFlags)
	}
	return nil
}

// RNRTimerDuration returns the receiver-not-ready delay that the IB
// encoding of min_rnr_timer stands for (0 means 655.36 ms).
func RNRTimerDuration(code uint8) (ns int64) {
	// Units of 10 us for codes 0..31 (IB specification, "RNR NAK timer field encodings").
	table := [32]int64{
		65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
		256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288,
		16384, 24576, 32768, 49152,
	}
	return table[code&31] * 10_000
}

// TimeoutDuration returns the local ACK timeout that the encoding t stands
// for: 4.096 us * 2^t, and 0 (infinite) for t = 0.
func TimeoutDuration(t uint8) (ns int64) {
	if t == 0 {
		return 0
	}
	return 4096 << (t & 31)
}
