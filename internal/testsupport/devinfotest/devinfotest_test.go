package devinfotest

import "testing"

func TestParse(t *testing.T) {
	text := "hca_id:\trxe0\n\ttransport:\t\t\tInfiniBand (0)\n\tdevice_cap_flags:\t0x00213c21\n\t\t\t\t\tBAD_PKEY_CNTR\n" +
		"\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tGID[  0]:\t\tfe80::1\n\t\t\tstate:\t\t\tlater\n" +
		"\n capabilities of rxe0:\nmax_qp: 4\n"
	f, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if f.Device["hca_id"] != "rxe0" || f.Device["transport"] != "InfiniBand (0)" || len(f.Device) != 3 {
		t.Errorf("device fields %v", f.Device)
	}
	p := f.Ports[1]
	if p["state"] != "PORT_ACTIVE (4)" || p["GID[0]"] != "fe80::1" || len(p) != 2 {
		t.Errorf("port 1 fields %v (the first of a repeated label, GIDs keyed GID[N])", p)
	}
	if _, ok := f.Device["max_qp"]; ok {
		t.Error("read past the blank line after the device")
	}
	if _, err := Parse("port:\tone\n"); err == nil {
		t.Error("a bad port line parsed")
	}
}
