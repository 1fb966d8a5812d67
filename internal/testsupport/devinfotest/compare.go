package devinfotest

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// DiffKind says how rdiag's text differs from the reference's.
type DiffKind string

// Kinds of difference.
const (
	// Missing: the reference has the field (or device, port, GID) and
	// rdiag does not.
	Missing DiffKind = "missing"
	// Unknown: rdiag has the field but prints why it cannot know it.
	Unknown DiffKind = "unknown"
	// Value: both have it, with different values (or flag lists).
	Value DiffKind = "value"
	// Extra: rdiag has a field the reference does not print.
	Extra DiffKind = "extra"
	// Layout: the same value, but not the same line (tabs, indentation)
	// or not in the same order.
	Layout DiffKind = "layout"
)

// Diff is one difference between a reference text (ibv_devinfo, rdma)
// and rdiag's.
type Diff struct {
	Device string   // hca_id
	Where  string   // "device", "port 1", "ports", "gids"
	Field  string   // the label ("max_qp", "tso_caps/max_tso", "GID[1]")
	Kind   DiffKind // how it differs
	Want   string   // what the reference shows ("" when it has nothing)
	Got    string   // what rdiag shows ("" when it has nothing)
}

// String formats d on one line.
func (d Diff) String() string {
	return fmt.Sprintf("%s %s %s: %s: reference %q, rdiag %q", d.Device, d.Where, d.Field, d.Kind, d.Want, d.Got)
}

// entry is one field of a device's text: a "label: value" line, a title
// ("tso_caps:"), or a statement ("core clock not supported"), with the
// flag lines under it.
type entry struct {
	key   string   // label, "title/label" inside a section, or the statement
	value string   // "" for titles and statements
	subs  []string // flag lines under it
	raw   []string // the lines as printed, flag lines included
}

// text is the entry's value, or its flag lines when it has none.
func (e entry) text() string {
	if e.value == "" && len(e.subs) > 0 {
		return strings.Join(e.subs, ", ")
	}
	return e.value
}

// block is one device's text: its entries, and each port's in order.
type block struct {
	name   string
	device []entry
	ports  []portBlock
}

type portBlock struct {
	num     int
	entries []entry
}

var devinfoLine = regexp.MustCompile(`^(\t*)([^\t:][^:]*):(\t*)(.*)$`)

// parseBlocks splits ibv_devinfo-style text into devices. A device starts
// at "hca_id:" and ends at the next one, or at a line that does not start
// with a tab (rdiag's capability report after it). Blank lines are
// skipped (devinfo ends every port with one, and prints some inside).
// Lines at indent 2 under a device-level title ("tso_caps:") are keyed
// "title/label".
func parseBlocks(text string) ([]block, error) {
	var out []block
	in := false   // inside a device
	section := "" // the device-level title the indent-2 lines belong to
	for i, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if name, ok := strings.CutPrefix(line, "hca_id:\t"); ok {
			out = append(out, block{name: strings.TrimSpace(name)})
			in, section = true, ""
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "\t") {
			in = false // rdiag's report follows
			continue
		}
		b := &out[len(out)-1]
		list := &b.device
		if len(b.ports) > 0 {
			list = &b.ports[len(b.ports)-1].entries
		}
		indent := len(line) - len(strings.TrimLeft(line, "\t"))
		body := strings.TrimLeft(line, "\t")
		if indent >= 5 {
			// A flag line: it belongs to the entry above.
			if len(*list) == 0 {
				return nil, fmt.Errorf("line %d: flag line %q under nothing", i+1, body)
			}
			e := &(*list)[len(*list)-1]
			e.subs = append(e.subs, body)
			e.raw = append(e.raw, line)
			continue
		}
		if n, ok := strings.CutPrefix(body, "port:\t"); ok && indent == 2 {
			num, err := strconv.Atoi(strings.TrimSpace(n))
			if err != nil {
				return nil, fmt.Errorf("line %d: bad port line %q", i+1, line)
			}
			b.ports = append(b.ports, portBlock{num: num})
			section = ""
			continue
		}
		e := entry{key: body, raw: []string{line}}
		if m := devinfoLine.FindStringSubmatch(line); m != nil {
			label, value := strings.TrimSpace(m[2]), strings.TrimSpace(m[4])
			if g := gidLabel.FindStringSubmatch(label); g != nil {
				n, _ := strconv.Atoi(g[1])
				label = "GID[" + strconv.Itoa(n) + "]"
			}
			e.key, e.value = label, value
			if len(b.ports) == 0 {
				switch {
				case indent == 1 && value == "":
					section = label
				case indent == 1:
					section = ""
				case indent == 2 && section != "":
					e.key = section + "/" + label
				}
			}
		}
		*list = append(*list, e)
	}
	return out, nil
}

// CompareDevinfo compares ibv_devinfo's text with rdiag info's (both
// verbose, or both not) and returns every difference, in the reference's
// order: for each device of the reference, every field rdiag lacks, shows
// as unknown, or shows with another value or other flag names; every
// field only rdiag shows; and lines that carry the same value but differ
// in tabs or order. Devices only rdiag shows (the built-in engine's) are
// not differences. Texts that cannot be parsed give one Diff that says
// so. No Diff means rdiag printed the reference's lines.
func CompareDevinfo(devinfo, rdiag string) []Diff {
	want, err := parseBlocks(devinfo)
	if err != nil {
		return []Diff{{Where: "text", Field: "ibv_devinfo", Kind: Missing, Want: err.Error()}}
	}
	got, err := parseBlocks(rdiag)
	if err != nil {
		return []Diff{{Where: "text", Field: "rdiag", Kind: Missing, Got: err.Error()}}
	}
	var out []Diff
	for _, w := range want {
		i := slices.IndexFunc(got, func(b block) bool { return b.name == w.name })
		if i < 0 {
			out = append(out, Diff{Device: w.name, Where: "device", Field: "hca_id", Kind: Missing, Want: w.name})
			continue
		}
		g := got[i]
		out = append(out, compareEntries(w.name, "device", w.device, g.device)...)
		for _, wp := range w.ports {
			where := "port " + strconv.Itoa(wp.num)
			j := slices.IndexFunc(g.ports, func(p portBlock) bool { return p.num == wp.num })
			if j < 0 {
				out = append(out, Diff{Device: w.name, Where: where, Field: "port", Kind: Missing, Want: strconv.Itoa(wp.num)})
				continue
			}
			out = append(out, compareEntries(w.name, where, wp.entries, g.ports[j].entries)...)
		}
		for _, gp := range g.ports {
			if !slices.ContainsFunc(w.ports, func(p portBlock) bool { return p.num == gp.num }) {
				out = append(out, Diff{Device: w.name, Where: "port " + strconv.Itoa(gp.num), Field: "port", Kind: Extra, Got: strconv.Itoa(gp.num)})
			}
		}
	}
	return out
}

// compareEntries compares one device's or port's fields.
func compareEntries(dev, where string, want, got []entry) []Diff {
	var out []Diff
	add := func(field string, kind DiffKind, w, g string) {
		out = append(out, Diff{Device: dev, Where: where, Field: field, Kind: kind, Want: w, Got: g})
	}
	find := func(list []entry, key string) int {
		return slices.IndexFunc(list, func(e entry) bool { return e.key == key })
	}
	var common []string // keys both have with the same value, in the reference's order
	for _, w := range want {
		i := find(got, w.key)
		if i < 0 {
			add(w.key, Missing, w.text(), "")
			continue
		}
		g := got[i]
		switch {
		case strings.HasPrefix(g.value, "unknown") && !strings.HasPrefix(w.value, "unknown"):
			add(w.key, Unknown, w.value, g.value)
		case g.value != w.value:
			add(w.key, Value, w.value, g.value)
		case !slices.Equal(g.subs, w.subs):
			add(w.key, Value, strings.Join(w.subs, ", "), strings.Join(g.subs, ", "))
		case !slices.Equal(g.raw, w.raw):
			add(w.key, Layout, strings.Join(w.raw, "\n"), strings.Join(g.raw, "\n"))
		default:
			common = append(common, w.key)
		}
	}
	for _, g := range got {
		if find(want, g.key) < 0 {
			add(g.key, Extra, "", g.text())
		}
	}
	// The fields both print alike must come in the same order.
	var gotOrder []string
	for _, g := range got {
		if slices.Contains(common, g.key) {
			gotOrder = append(gotOrder, g.key)
		}
	}
	for i := range common {
		if common[i] != gotOrder[i] {
			add(common[i], Layout, "field "+strconv.Itoa(i+1)+" in order", gotOrder[i]+" in its place")
			break
		}
	}
	return out
}

// ComparePorts compares `rdiag ports` with ibv_devinfo's ports (state,
// physical state, link layer, width, speed, MTUs) and with `rdma link`
// (state, physical state, netdev), for every port either reference
// shows. rdmaLink may be empty.
func ComparePorts(devinfo, rdmaLink, rdiagPorts string) []Diff {
	rows := parseTable(rdiagPorts)
	row := func(dev string, port int) map[string]string {
		for _, r := range rows {
			if r["DEVICE"] == dev && r["PORT"] == strconv.Itoa(port) {
				return r
			}
		}
		return nil
	}
	var out []Diff
	check := func(dev string, port int, field, want, got string) {
		if want != got {
			out = append(out, Diff{Device: dev, Where: "ports", Field: fmt.Sprintf("port %d %s", port, field), Kind: Value, Want: want, Got: got})
		}
	}
	blocks, err := parseBlocks(devinfo)
	if err != nil {
		return []Diff{{Where: "text", Field: "ibv_devinfo", Kind: Missing, Want: err.Error()}}
	}
	for _, b := range blocks {
		for _, p := range b.ports {
			r := row(b.name, p.num)
			if r == nil {
				out = append(out, Diff{Device: b.name, Where: "ports", Field: fmt.Sprintf("port %d", p.num), Kind: Missing, Want: "a row"})
				continue
			}
			v := map[string]string{}
			for _, e := range p.entries {
				v[e.key] = e.value
			}
			name := func(s string) string { // "PORT_ACTIVE (4)" -> "ACTIVE"
				s, _, _ = strings.Cut(s, " (")
				return strings.TrimPrefix(s, "PORT_")
			}
			check(b.name, p.num, "state", name(v["state"]), r["STATE"])
			check(b.name, p.num, "link_layer", v["link_layer"], r["LINK_LAYER"])
			check(b.name, p.num, "active_mtu", strings.Fields(v["active_mtu"] + " ")[0], r["ACTIVE_MTU"])
			check(b.name, p.num, "max_mtu", strings.Fields(v["max_mtu"] + " ")[0], r["MAX_MTU"])
			if s, ok := v["phys_state"]; ok {
				check(b.name, p.num, "phys_state", name(s), r["PHYS_STATE"])
			}
			if s, ok := v["active_width"]; ok {
				check(b.name, p.num, "active_width", strings.Fields(s)[0], r["WIDTH"])
			}
			if s, ok := v["active_speed"]; ok {
				sp := r["SPEED"] // "SDR (2.5 Gbps)"
				if _, in, ok := strings.Cut(sp, "("); ok {
					sp = strings.TrimSuffix(in, ")")
				}
				want, _, _ := strings.Cut(s, " (")
				check(b.name, p.num, "active_speed", want, sp)
			}
		}
	}
	for _, line := range strings.Split(rdmaLink, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "link" {
			continue
		}
		dev, port, _ := strings.Cut(f[1], "/")
		n, _ := strconv.Atoi(port)
		r := row(dev, n)
		if r == nil {
			out = append(out, Diff{Device: dev, Where: "ports", Field: "port " + port, Kind: Missing, Want: "a row for rdma link's " + f[1]})
			continue
		}
		for i := 2; i+1 < len(f); i += 2 {
			switch f[i] {
			case "state":
				check(dev, n, "state (rdma link)", f[i+1], r["STATE"])
			case "physical_state":
				check(dev, n, "physical_state (rdma link)", f[i+1], r["PHYS_STATE"])
			case "netdev":
				check(dev, n, "netdev (rdma link)", f[i+1], r["NETDEV"])
			}
		}
	}
	return out
}

// CompareGIDs compares `rdiag gids` with the GID lines of ibv_devinfo -v:
// every GID devinfo prints must be a row with the same address and type,
// and rdiag must list no other GID of the devices devinfo shows.
func CompareGIDs(devinfoV, rdiagGIDs string) []Diff {
	blocks, err := parseBlocks(devinfoV)
	if err != nil {
		return []Diff{{Where: "text", Field: "ibv_devinfo", Kind: Missing, Want: err.Error()}}
	}
	rows := parseTable(rdiagGIDs)
	var out []Diff
	for _, b := range blocks {
		for _, p := range b.ports {
			want := map[string]string{} // index -> "address, type"
			for _, e := range p.entries {
				if idx, ok := strings.CutPrefix(e.key, "GID["); ok {
					addr, typ, _ := strings.Cut(e.value, ", ")
					a, err := netip.ParseAddr(addr)
					if err != nil {
						out = append(out, Diff{Device: b.name, Where: "gids", Field: e.key, Kind: Value, Want: e.value, Got: "an address: " + err.Error()})
						continue
					}
					want[strings.TrimSuffix(idx, "]")] = a.String() + ", " + typ
				}
			}
			got := map[string]string{}
			for _, r := range rows {
				if r["DEVICE"] == b.name && r["PORT"] == strconv.Itoa(p.num) {
					a, err := netip.ParseAddr(r["GID"])
					if err != nil {
						out = append(out, Diff{Device: b.name, Where: "gids", Field: "GID[" + r["INDEX"] + "]", Kind: Value, Got: r["GID"]})
						continue
					}
					got[r["INDEX"]] = a.String() + ", " + r["TYPE"]
				}
			}
			keys := make([]string, 0, len(want)+len(got))
			for k := range want {
				keys = append(keys, k)
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.SortFunc(keys, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
			for _, k := range keys {
				w, wok := want[k]
				g, gok := got[k]
				field := fmt.Sprintf("port %d GID[%s]", p.num, k)
				switch {
				case !gok:
					out = append(out, Diff{Device: b.name, Where: "gids", Field: field, Kind: Missing, Want: w})
				case !wok:
					out = append(out, Diff{Device: b.name, Where: "gids", Field: field, Kind: Extra, Got: g})
				case w != g:
					out = append(out, Diff{Device: b.name, Where: "gids", Field: field, Kind: Value, Want: w, Got: g})
				}
			}
		}
	}
	return out
}

// CompareRdmaDev compares `rdma dev` (node GUID and system image GUID of
// each device) with rdiag info's text.
func CompareRdmaDev(rdmaDev, rdiagInfo string) []Diff {
	blocks, err := parseBlocks(rdiagInfo)
	if err != nil {
		return []Diff{{Where: "text", Field: "rdiag", Kind: Missing, Got: err.Error()}}
	}
	var out []Diff
	for _, line := range strings.Split(rdmaDev, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		dev := strings.TrimSuffix(f[1], ":")
		i := slices.IndexFunc(blocks, func(b block) bool { return b.name == dev })
		if i < 0 {
			out = append(out, Diff{Device: dev, Where: "device", Field: "hca_id", Kind: Missing, Want: dev})
			continue
		}
		v := map[string]string{}
		for _, e := range blocks[i].device {
			v[e.key] = e.value
		}
		for j := 2; j+1 < len(f); j += 2 {
			if f[j] == "node_guid" || f[j] == "sys_image_guid" {
				if v[f[j]] != f[j+1] {
					out = append(out, Diff{Device: dev, Where: "device", Field: f[j] + " (rdma dev)", Kind: Value, Want: f[j+1], Got: v[f[j]]})
				}
			}
		}
	}
	return out
}

// parseTable reads one of rdiag's tables: a header line, then rows whose
// cells are separated by two or more spaces. Lines after the rows
// ("note: ...", "* the GID ...") are not rows: they have fewer cells.
func parseTable(text string) []map[string]string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) == 0 {
		return nil
	}
	sep := regexp.MustCompile(`\s{2,}`)
	header := sep.Split(strings.TrimSpace(lines[0]), -1)
	var rows []map[string]string
	for _, line := range lines[1:] {
		cells := sep.Split(strings.TrimSpace(line), -1)
		if len(cells) < len(header)-1 { // the last column may be empty
			continue
		}
		r := map[string]string{}
		for i, h := range header {
			if i < len(cells) {
				r[h] = cells[i]
			}
		}
		rows = append(rows, r)
	}
	return rows
}
