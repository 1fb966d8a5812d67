package oob

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Params describes the test one side runs, for the rperf-to-rperf check
// that both sides were started with matching flags. perftest has no such
// step before 6.28 (and rperf never takes part in 6.28's binary one), so it
// is exchanged only when both sides advertise an rperf version.
type Params struct {
	// Test names the test, e.g. "write-lat". It must be equal on both sides.
	Test string `json:"test"`
	// Fields lists the test's parameters in the order they are shown in
	// errors. Each Flag appears at most once.
	Fields []Field `json:"fields,omitempty"`
}

// Field is one test parameter, spelled as on the command line so that a
// mismatch can be reported in the user's terms.
type Field struct {
	// Flag identifies the parameter, e.g. "-s" or "--connection".
	Flag string `json:"flag"`
	// Value is the parameter's value, e.g. "64"; empty for a flag that
	// takes none.
	Value string `json:"value,omitempty"`
	// Symmetric marks a parameter that must be equal on both sides
	// (perftest's "SYMMETRIC" options: size, iterations, connection type,
	// number of QPs, ...). A field marked symmetric by either side is
	// compared; a symmetric field missing on one side is a mismatch.
	Symmetric bool `json:"symmetric,omitempty"`
}

// maxParamsSize bounds the JSON document of the parameter exchange.
const maxParamsSize = 64 << 10

// paramsDoc is the JSON document on the wire.
type paramsDoc struct {
	Rperf  int     `json:"rperf"` // extension level of the sender
	Test   string  `json:"test"`
	Fields []Field `json:"fields,omitempty"`
}

func (p Params) validate() error {
	seen := make(map[string]bool, len(p.Fields))
	for _, f := range p.Fields {
		if f.Flag == "" {
			return fmt.Errorf("test parameters: a field has no flag")
		}
		if seen[f.Flag] {
			return fmt.Errorf("test parameters: flag %s appears twice", f.Flag)
		}
		seen[f.Flag] = true
	}
	return nil
}

// swapParams exchanges the parameter documents: a 4-byte big-endian length,
// then that many bytes of JSON, sent in one write.
func (c *Conn) swapParams(ctx context.Context, local Params) (Params, error) {
	const step = "test-parameter exchange"
	body, err := json.Marshal(paramsDoc{Rperf: rperfExtensionLevel, Test: local.Test, Fields: local.Fields})
	if err != nil {
		return Params{}, fmt.Errorf("%s: encoding our parameters: %w", step, err)
	}
	if len(body) > maxParamsSize {
		return Params{}, fmt.Errorf("%s: our parameters take %d bytes, more than the %d allowed", step, len(body), maxParamsSize)
	}
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	out = append(out, body...)
	var remote Params
	err = c.swap(
		func() error { return c.send(ctx, step, "test parameters", out) },
		func() error {
			var hdr [4]byte
			if _, err := c.recv(ctx, step, "4-byte parameter length", hdr[:], c.opts.IOTimeout); err != nil {
				return err
			}
			n := binary.BigEndian.Uint32(hdr[:])
			if n > maxParamsSize {
				return newError(fmt.Sprintf("%s: the peer announced %d bytes of parameters, more than the %d allowed; is it a compatible rperf?", step, n, maxParamsSize), ErrProtocol)
			}
			in := make([]byte, n)
			if _, err := c.recv(ctx, step, fmt.Sprintf("%d-byte parameter document", n), in, c.opts.IOTimeout); err != nil {
				return err
			}
			remote, err = parseParams(step, in)
			return err
		})
	if err != nil {
		return Params{}, err
	}
	return remote, nil
}

// parseParams decodes the peer's parameter document, the JSON after the
// length; errors match ErrProtocol and name step.
func parseParams(step string, in []byte) (Params, error) {
	var doc paramsDoc
	if err := json.Unmarshal(in, &doc); err != nil {
		return Params{}, newError(fmt.Sprintf("%s: the peer's parameter document is not valid: %v", step, err), ErrProtocol, err)
	}
	p := Params{Test: doc.Test, Fields: doc.Fields}
	if err := p.validate(); err != nil {
		return Params{}, newError(fmt.Sprintf("%s: the peer's %v", step, err), ErrProtocol)
	}
	return p, nil
}

// checkParams compares the two sides' parameters and returns one error that
// lists every symmetric field that differs, with the client's and the
// server's values. Both sides compose the same text.
func checkParams(server bool, local, remote Params) error {
	cli, srv := local, remote
	if server {
		cli, srv = remote, local
	}
	cf := indexFields(cli.Fields)
	sf := indexFields(srv.Fields)
	var flags []string // mismatched, in the client's order, then the server's
	for _, fs := range [][]Field{cli.Fields, srv.Fields} {
		for _, f := range fs {
			c, cok := cf[f.Flag]
			s, sok := sf[f.Flag]
			if !(cok && c.Symmetric) && !(sok && s.Symmetric) {
				continue
			}
			if cok == sok && c.Value == s.Value {
				continue
			}
			if !slices.Contains(flags, f.Flag) {
				flags = append(flags, f.Flag)
			}
		}
	}
	if cli.Test == srv.Test && len(flags) == 0 {
		return nil
	}
	return newError(fmt.Sprintf("peers disagree: client runs %s, server runs %s; start both with the same flags",
		describe(cli, flags), describe(srv, flags)), ErrIncompatible)
}

func indexFields(fs []Field) map[string]Field {
	m := make(map[string]Field, len(fs))
	for _, f := range fs {
		m[f.Flag] = f
	}
	return m
}

// describe renders a side's test name and the given flags as a command
// line fragment, e.g. "write-lat -s 64 without -D".
func describe(p Params, flags []string) string {
	var b strings.Builder
	if p.Test == "" {
		b.WriteString("an unnamed test")
	} else {
		b.WriteString(p.Test)
	}
	fs := indexFields(p.Fields)
	for _, flag := range flags {
		f, ok := fs[flag]
		switch {
		case !ok:
			b.WriteString(" without " + flag)
		case f.Value == "":
			b.WriteString(" " + flag)
		default:
			b.WriteString(" " + flag + " " + f.Value)
		}
	}
	return b.String()
}
