package rperfcmd

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/verbsio"
)

// The send path (--path) of the eight test commands: how both sides post
// and where their buffers live (package sendpath).

// pathOptions are the flags of this file.
type pathOptions struct {
	pathName string
	path     sendpath.Path
}

const pathFlag = "path"

func (o *options) registerPath(fs *pflag.FlagSet) {
	fs.StringVar(&o.pathName, pathFlag, "generic",
		"send path: generic, burst (qp_burst/cq_poll families, SEND tests), inline (every message inline), dm (buffers in device memory), tso (kernel segmentation, send-bw/write-bw on udp), dv (direct verbs, SEND/WRITE tests); both sides must agree")
}

// validatePath parses --path and checks the flags it conflicts with:
// -I, which the dm and inline paths ignore. Whether the path applies to
// the test and to --validate is the test's Check.
func (o *options) validatePath() error {
	p, err := sendpath.Parse(o.pathName)
	if err != nil {
		return cli.Usagef("--path %s: %v", o.pathName, err)
	}
	o.path, o.pathName = p, p.String()
	switch {
	case p == sendpath.DM && o.changed("inline_size") && o.inline > 0:
		return cli.Usagef("--path dm and -I %d conflict: inline data is copied from host memory, the dm path keeps the buffers in device memory; drop -I", o.inline)
	case p == sendpath.Inline && o.changed("inline_size"):
		return cli.Usagef("--path inline sends every message inline, whatever -I says; drop -I")
	}
	return nil
}

// checkPathDevice checks that the device offers the path, and that the
// inline path's messages fit its inline limit.
func (o *options) checkPathDevice(attr verbsio.DeviceAttr, sizes []int) error {
	if err := sendpath.CheckDevice(o.path, attr, o.device); err != nil {
		return &cli.EnvironmentError{Err: fmt.Errorf("--path %s: %v", o.path, err)}
	}
	if o.path == sendpath.Inline {
		if largest := sizes[len(sizes)-1]; largest > attr.MaxInlineData {
			return cli.Usagef("--path inline: %d-byte messages do not fit %s's max_inline_data %d; use -s %d or less", largest, o.device, attr.MaxInlineData, attr.MaxInlineData)
		}
	}
	return nil
}

// pathExtra records the path's facts in env.extra: who cut the packets
// on a packet fabric.
func (o *options) pathExtra(x map[string]string, dev *verbsio.Context) {
	attr, _ := dev.QueryDevice()
	if seg := sendpath.SegmenterName(o.path.Segmenter(), dev.Device, attr); seg != "" {
		x["segmenter"] = seg
		o.segmenter = seg
	}
}

// pathLine is the header's send-path line, with who cut the packets on
// a packet fabric.
func (o *options) pathLine() string {
	s := o.path.String()
	if o.path == sendpath.Generic && !o.changed(pathFlag) {
		s += " (--path for the others)"
	}
	if o.segmenter != "" {
		s += "; segmenter: " + o.segmenter
	}
	return strings.TrimSpace(s)
}
