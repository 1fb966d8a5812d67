package roce

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOpcodeTable(t *testing.T) {
	type row struct {
		op      Opcode
		name    string
		ext     []Ext
		payload bool
		kind    Kind
		pos     Position
	}
	var (
		none = []Ext(nil)
		reth = []Ext{ExtRETH}
		imm  = []Ext{ExtImmDt}
	)
	tests := []row{
		{RCSendFirst, "RC_SEND_FIRST", none, true, KindSend, PosFirst},
		{RCSendMiddle, "RC_SEND_MIDDLE", none, true, KindSend, PosMiddle},
		{RCSendLast, "RC_SEND_LAST", none, true, KindSend, PosLast},
		{RCSendLastImm, "RC_SEND_LAST_WITH_IMMEDIATE", imm, true, KindSend, PosLast},
		{RCSendOnly, "RC_SEND_ONLY", none, true, KindSend, PosOnly},
		{RCSendOnlyImm, "RC_SEND_ONLY_WITH_IMMEDIATE", imm, true, KindSend, PosOnly},
		{RCWriteFirst, "RC_RDMA_WRITE_FIRST", reth, true, KindWrite, PosFirst},
		{RCWriteMiddle, "RC_RDMA_WRITE_MIDDLE", none, true, KindWrite, PosMiddle},
		{RCWriteLast, "RC_RDMA_WRITE_LAST", none, true, KindWrite, PosLast},
		{RCWriteLastImm, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", imm, true, KindWrite, PosLast},
		{RCWriteOnly, "RC_RDMA_WRITE_ONLY", reth, true, KindWrite, PosOnly},
		{RCWriteOnlyImm, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", []Ext{ExtRETH, ExtImmDt}, true, KindWrite, PosOnly},
		{RCReadRequest, "RC_RDMA_READ_REQUEST", reth, false, KindReadRequest, PosOnly},
		{RCReadResponseFirst, "RC_RDMA_READ_RESPONSE_FIRST", []Ext{ExtAETH}, true, KindReadResponse, PosFirst},
		{RCReadResponseMiddle, "RC_RDMA_READ_RESPONSE_MIDDLE", none, true, KindReadResponse, PosMiddle},
		{RCReadResponseLast, "RC_RDMA_READ_RESPONSE_LAST", []Ext{ExtAETH}, true, KindReadResponse, PosLast},
		{RCReadResponseOnly, "RC_RDMA_READ_RESPONSE_ONLY", []Ext{ExtAETH}, true, KindReadResponse, PosOnly},
		{RCAck, "RC_ACKNOWLEDGE", []Ext{ExtAETH}, false, KindAck, PosOnly},
		{RCAtomicAck, "RC_ATOMIC_ACKNOWLEDGE", []Ext{ExtAETH, ExtAtomicAck}, false, KindAtomicAck, PosOnly},
		{RCCompareSwap, "RC_COMPARE_SWAP", []Ext{ExtAtomicETH}, false, KindAtomic, PosOnly},
		{RCFetchAdd, "RC_FETCH_ADD", []Ext{ExtAtomicETH}, false, KindAtomic, PosOnly},
		{RCSendLastInv, "RC_SEND_LAST_WITH_INVALIDATE", []Ext{ExtIETH}, true, KindSend, PosLast},
		{RCSendOnlyInv, "RC_SEND_ONLY_WITH_INVALIDATE", []Ext{ExtIETH}, true, KindSend, PosOnly},
		{RCFlush, "RC_FLUSH", []Ext{ExtFETH, ExtRETH}, false, KindFlush, PosOnly},
		{RCAtomicWrite, "RC_ATOMIC_WRITE", reth, true, KindAtomicWrite, PosOnly},
		{UCSendFirst, "UC_SEND_FIRST", none, true, KindSend, PosFirst},
		{UCSendMiddle, "UC_SEND_MIDDLE", none, true, KindSend, PosMiddle},
		{UCSendLast, "UC_SEND_LAST", none, true, KindSend, PosLast},
		{UCSendLastImm, "UC_SEND_LAST_WITH_IMMEDIATE", imm, true, KindSend, PosLast},
		{UCSendOnly, "UC_SEND_ONLY", none, true, KindSend, PosOnly},
		{UCSendOnlyImm, "UC_SEND_ONLY_WITH_IMMEDIATE", imm, true, KindSend, PosOnly},
		{UCWriteFirst, "UC_RDMA_WRITE_FIRST", reth, true, KindWrite, PosFirst},
		{UCWriteMiddle, "UC_RDMA_WRITE_MIDDLE", none, true, KindWrite, PosMiddle},
		{UCWriteLast, "UC_RDMA_WRITE_LAST", none, true, KindWrite, PosLast},
		{UCWriteLastImm, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", imm, true, KindWrite, PosLast},
		{UCWriteOnly, "UC_RDMA_WRITE_ONLY", reth, true, KindWrite, PosOnly},
		{UCWriteOnlyImm, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", []Ext{ExtRETH, ExtImmDt}, true, KindWrite, PosOnly},
		{UDSendOnly, "UD_SEND_ONLY", []Ext{ExtDETH}, true, KindSend, PosOnly},
		{UDSendOnlyImm, "UD_SEND_ONLY_WITH_IMMEDIATE", []Ext{ExtDETH, ExtImmDt}, true, KindSend, PosOnly},
		{CNPOpcode, "CNP", []Ext{ExtCNPPad}, false, KindCNP, PosOnly},
	}
	var want []Opcode
	for _, tt := range tests {
		want = append(want, tt.op)
		if got := tt.op.String(); got != tt.name {
			t.Errorf("%#02x: String() = %q, want %q", uint8(tt.op), got, tt.name)
		}
		l := tt.op.Layout()
		var ext []Ext
		hl := BTHLen
		for i := 0; i < l.NumExt; i++ {
			ext = append(ext, l.Ext[i])
			hl += l.Ext[i].Len()
		}
		if diff := cmp.Diff(tt.ext, ext); diff != "" {
			t.Errorf("%v: extension headers (-want +got):\n%s", tt.op, diff)
		}
		for _, e := range []Ext{ExtRETH, ExtAETH, ExtAtomicETH, ExtAtomicAck, ExtImmDt, ExtDETH, ExtIETH, ExtFETH, ExtCNPPad} {
			in := false
			for _, x := range tt.ext {
				in = in || x == e
			}
			if l.Has(e) != in {
				t.Errorf("%v: Layout().Has(%v) = %v", tt.op, e, l.Has(e))
			}
		}
		if l.HeaderLen != hl {
			t.Errorf("%v: HeaderLen %d, want %d", tt.op, l.HeaderLen, hl)
		}
		if tt.op.HasPayload() != tt.payload || tt.op.Kind() != tt.kind || tt.op.Position() != tt.pos || !tt.op.Known() {
			t.Errorf("%v: payload %v kind %v position %v known %v; want %v %v %v true",
				tt.op, tt.op.HasPayload(), tt.op.Kind(), tt.op.Position(), tt.op.Known(), tt.payload, tt.kind, tt.pos)
		}
		wantImm := false
		wantInv := false
		for _, e := range tt.ext {
			wantImm = wantImm || e == ExtImmDt
			wantInv = wantInv || e == ExtIETH
		}
		if tt.op.HasImm() != wantImm || tt.op.HasInv() != wantInv {
			t.Errorf("%v: HasImm %v HasInv %v", tt.op, tt.op.HasImm(), tt.op.HasInv())
		}
		isReq := tt.kind == KindSend || tt.kind == KindWrite || tt.kind == KindReadRequest || tt.kind == KindAtomic || tt.kind == KindFlush || tt.kind == KindAtomicWrite
		isResp := tt.kind == KindReadResponse || tt.kind == KindAck || tt.kind == KindAtomicAck
		if tt.op.IsRequest() != isReq || tt.op.IsResponse() != isResp {
			t.Errorf("%v: IsRequest %v IsResponse %v", tt.op, tt.op.IsRequest(), tt.op.IsResponse())
		}
	}
	if diff := cmp.Diff(want, Opcodes()); diff != "" {
		t.Errorf("Opcodes() (-want +got):\n%s", diff)
	}
}

func TestOpcodeUnknown(t *testing.T) {
	for _, op := range []Opcode{0x15, 0x18, 0x1b, 0x1e, 0x2c, 0x30, 0x40, 0x44, 0x60, 0x66, 0x80, 0xe0, 0xff} {
		if op.Known() || op.HasPayload() || op.Kind() != KindInvalid || op.Layout() != (Layout{}) {
			t.Errorf("%#x: unknown opcode reports known properties", uint8(op))
		}
	}
	if got := Opcode(0x15).String(); got != "OPCODE_0x15" {
		t.Errorf("String() = %q, want OPCODE_0x15", got)
	}
	if got := Opcode(0xe3).Transport(); got != Manufacturer {
		t.Errorf("Transport() = %v, want MANUFACTURER", got)
	}
	for op, want := range map[Opcode]string{0x04: "RC", 0x24: "UC", 0x44: "RD", 0x64: "UD", 0x81: "CNP", 0xa0: "RESERVED"} {
		if got := op.Transport().String(); got != want {
			t.Errorf("%#x.Transport() = %q, want %q", uint8(op), got, want)
		}
	}
}

func TestStringers(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{ExtRETH.String(), "RETH"},
		{ExtAtomicAck.String(), "AtomicAckETH"},
		{Ext(99).String(), "Ext(99)"},
		{KindReadResponse.String(), "read_response"},
		{PosMiddle.String(), "middle"},
		{SynRNRNAK.String(), "rnr_nak"},
		{SynReserved.String(), "reserved"},
		{NAKRemoteOperationalErr.String(), "remote_operational_error"},
		{NAKCode(9).String(), "reserved_9"},
		{SyndromeACKUnlimited.String(), "ack(credits=31)"},
		{RNRNAKSyndrome(14).String(), "rnr_nak(timer=14)"},
		{SyndromeNAKRemoteAccess.String(), "nak(remote_access_error)"},
		{Syndrome(0x5f).String(), "reserved(0x5f)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
