package reports

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// jsonFields returns the JSON names of every field reachable from t:
// struct fields, fields of embedded (flattened) structs, and fields of
// nested struct, pointer, slice and map element types.
func jsonFields(t reflect.Type, seen map[reflect.Type]bool, out map[string]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			jsonFields(f.Type, seen, out) // flattened
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = true
		jsonFields(f.Type, seen, out)
	}
}

// TestSchemaDocumentsEveryField checks SCHEMA.md against the Go types: every
// JSON field of Document must have a row in one of its tables, and every row
// must name a real field.
func TestSchemaDocumentsEveryField(t *testing.T) {
	fields := map[string]bool{}
	jsonFields(reflect.TypeFor[Document](), map[reflect.Type]bool{}, fields)

	md, err := os.ReadFile("SCHEMA.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)` \\|").FindAllStringSubmatch(string(md), -1) {
		rows[m[1]] = true
	}
	// The top-level keys are documented in the prose, not in a table.
	for _, k := range []string{"schema", "env", "results"} {
		if !strings.Contains(string(md), "`"+k+"`") {
			t.Errorf("SCHEMA.md never mentions top-level %q", k)
		}
		delete(fields, k)
	}
	var undocumented, unknown []string
	for f := range fields {
		if !rows[f] {
			undocumented = append(undocumented, f)
		}
	}
	for r := range rows {
		if !fields[r] {
			unknown = append(unknown, r)
		}
	}
	slices.Sort(undocumented)
	slices.Sort(unknown)
	if len(undocumented) > 0 {
		t.Errorf("fields without a SCHEMA.md table row: %v", undocumented)
	}
	if len(unknown) > 0 {
		t.Errorf("SCHEMA.md rows naming no Go field: %v", unknown)
	}
	if len(rows) < 40 {
		t.Errorf("only %d documented fields found; is the table format still \"| `name` |\"?", len(rows))
	}
}

// TestSchemaFieldNamesUnique guards against a Go trap: two flattened fields
// with the same JSON name at the same depth are both silently dropped.
func TestSchemaFieldNamesUnique(t *testing.T) {
	var names []string
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous && name == "" {
				walk(f.Type)
				continue
			}
			names = append(names, name)
		}
	}
	walk(reflect.TypeFor[Result]())
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("JSON name %q appears twice in a flattened Result", n)
		}
		seen[n] = true
	}
}
