package rperfcmd

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rperf/rperf/internal/cli"
	"github.com/rperf/rperf/tests/bw"
	"github.com/rperf/rperf/tests/latency"
	"github.com/rperf/rperf/tests/oob"
	"github.com/rperf/rperf/tests/sendpath"
	"github.com/rperf/rperf/tests/session"
	"github.com/rperf/rperf/verbsio"
	"github.com/spf13/pflag"
)

// The flags of the test commands. validate checks what is about the flags
// themselves (spelling, flags that do not apply, conflicts between flags
// the configuration does not have); every rule about the values is the
// test's Check, whose problems name configuration fields, which the flag
// table below maps back to flags (check.go).

// Flag spellings of -a.
const (
	allMinShift = 1       // -a: sizes 2^1 ...
	allMaxSize  = 1 << 23 // ... to 2^23
)

// DefaultDevice is the device used without -d: the built-in engine's
// shared-memory device.
const DefaultDevice = "shm0"

// DefaultTimeout is --timeout's default.
const DefaultTimeout = 60 * time.Second

// options holds every flag of a test command.
type options struct {
	test session.Test
	host string
	// segmenter is who cut the packets on a packet fabric, once known
	// (pathExtra), for the header.
	segmenter string

	device      string
	ibPort      int
	size        string
	all         bool
	iters       int
	duration    int
	margin      int
	txDepth     int
	rxDepth     int
	postList    int
	cqMod       int
	inline      int
	connection  string
	qps         int
	bidir       bool
	atomicType  string
	outs        int
	qpTimeout   int
	gbits       bool
	cpuFreq     bool
	port        int
	noPeak      bool
	mtu         int
	jsonPath    string
	hgrmPath    string
	percentiles string
	warmup      int
	loopback    bool
	maxSize     string
	timeout     time.Duration
	// loopbackServer is the hidden role of the process --loopback starts.
	loopbackServer bool
	udpOptions     // the udp fabric, GID selection, data validation (udp.go)
	pathOptions    // the send path (path.go)
	rdmacmOptions  // -R: rdma_cm (rdmacm.go)
	rateOptions    // --rate_limit: packet pacing of the bandwidth tests (ratelimit.go)
	stampOptions   // --completion-timestamps: the latency tests' device clock (stamps.go)

	fs *pflag.FlagSet
	// fields maps the configuration's fields to the command's flags, for
	// the problems Check reports (check.go).
	fields map[string]string

	// Parsed by validate.
	qpType   verbsio.QPType
	sizes    []int // before device checks
	maxSz    int   // --max-size, or the -a default
	atomicOp verbsio.Opcode
	pcts     []float64
	mtuEnum  verbsio.MTU
}

// lat reports whether the command runs a latency test.
func (o *options) lat() bool { return o.test.Family() == session.Latency }

// verb is the verb the command's test measures.
func (o *options) verb() session.Verb { return o.test.Verb() }

// flagSpec describes a flag: its help, the configuration field it sets
// (for Check's problems), and which tests it applies to (nil: all).
type flagSpec struct {
	usage   string
	field   string
	applies func(session.Test) bool
	what    string // "bandwidth tests", for the error when it does not apply
}

func bwOnly(t session.Test) bool      { return t.Family() == session.Bandwidth }
func latOnly(t session.Test) bool     { return t.Family() == session.Latency }
func atomicOnly(t session.Test) bool  { return t.Verb() == session.Atomic }
func sendOnly(t session.Test) bool    { return t.Verb() == session.Send }
func readAtomic(t session.Test) bool  { return t.Verb() == session.Read || t.Verb() == session.Atomic }
func sendOrWrite(t session.Test) bool { return t.Verb() == session.Send || t.Verb() == session.Write }
func notAtomic(t session.Test) bool   { return t.Verb() != session.Atomic }

var specs = map[string]flagSpec{
	"ib-dev":        {usage: "RDMA device (the built-in engine's shared-memory device by default)"},
	"ib-port":       {usage: "port of the device", field: "Port"},
	"size":          {usage: "message size in bytes; K, M and G multiply by 2^10, 2^20, 2^30", field: "Sizes", applies: notAtomic},
	"all":           {usage: "run every size from 2 to 2^23 bytes (see --max-size)", applies: notAtomic},
	"iters":         {usage: "iterations per size", field: "Iterations"},
	"duration":      {usage: "duration mode: run each size for this many seconds", field: "Duration"},
	"margin":        {usage: "with -D: warm-up and cool-down margin in seconds, not counted (default: a quarter of -D, in whole seconds, as perftest)", field: "Margin"},
	"tx-depth":      {usage: "send queue depth: messages outstanding per QP", field: "TxDepth"},
	"rx-depth":      {usage: "receives kept posted per QP", field: "RxDepth", applies: sendOnly, what: "the send tests"},
	"post_list":     {usage: "post this many requests per post call; CQ moderation then equals it", field: "PostList", applies: bwOnly, what: "bandwidth tests"},
	"cq-mod":        {usage: "ask for a completion every N messages (default 100, 1 above 8 KiB, at most -t)", field: "CQMod", applies: bwOnly, what: "bandwidth tests"},
	"inline_size":   {usage: "largest message sent inline (send-lat over UD: 188 unless set)", field: "Inline", applies: sendOrWrite, what: "send and write tests"},
	"connection":    {usage: "transport: RC, UC or UD, as the test allows", field: "Connection"},
	"qp":            {usage: "number of queue pairs", field: "QPs", applies: bwOnly, what: "bandwidth tests"},
	"bidirectional": {usage: "measure both directions at once; both sides print the sum", field: "Bidirectional", applies: bwOnly, what: "bandwidth tests"},
	"atomic_type":   {usage: "CMP_AND_SWAP or FETCH_AND_ADD", field: "AtomicOp", applies: atomicOnly, what: "atomic tests"},
	"outs":          {usage: "outstanding RDMA READs/atomics (default: the device's maximum)", field: "OutReads", applies: readAtomic, what: "read and atomic tests"},
	"qp-timeout":    {usage: "QP ACK timeout exponent: 4.096 us * 2^N", field: "QPTimeout"},
	"report_gbits":  {usage: "report bandwidth in Gb/s (10^9 bits) instead of MiB/s", field: "ReportGbits", applies: bwOnly, what: "bandwidth tests"},
	"CPU-freq":      {usage: "accepted for perftest compatibility; rperf's clock needs no CPU frequency"},
	"port":          {usage: "TCP port of the out-of-band connection (0 on a server: any free port)"},
	"noPeak":        {usage: "do not compute the peak bandwidth", field: "NoPeak", applies: bwOnly, what: "bandwidth tests"},
	"mtu":           {usage: "path MTU in bytes, 256 to 4096 (default: the port's active MTU)", field: "MTU"},
	"json":          {usage: "write the results as an rperf/v1 JSON document to FILE (- for stdout)"},
	"hgrm":          {usage: "write each size's latency histogram as HdrHistogram .hgrm text to FILE (several sizes: FILE-<size>.hgrm)", applies: latOnly, what: "latency tests"},
	"percentiles":   {usage: "percentiles of the true statistics (default 50,90,99,99.9,99.99)", field: "Percentiles", applies: latOnly, what: "latency tests"},
	"warmup":        {usage: "unmeasured iterations (latency) or messages per QP (bandwidth) before each size", field: "Warmup"},
	"loopback":      {usage: "run the server too, as a second process on this host, and print the client's report"},
	"max-size":      {usage: "with -a: the largest size (default 8M)", applies: notAtomic},
	"timeout":       {usage: "longest wait for the peer: connecting, each exchange, a silent peer mid-run (a server waits 10x this for its client)", field: "StallTimeout"},
	gidIndexFlag:    {field: "GIDIndex"},
	"ipv6":          {field: "IPv6"},
	validateFlag:    {field: "Validate"},
	pathFlag:        {field: "Path"},
	stampsFlag: {usage: "also time each size from the completion timestamps (the device's clock), printed under the software clock's figures", field: "CompletionTimestamps",
		applies: latOnly, what: "latency tests"},
}

// fieldFlags maps each configuration field to the flag that sets it.
func fieldFlags() map[string]string {
	m := make(map[string]string, len(specs))
	for name, sp := range specs {
		if sp.field != "" {
			m[sp.field] = name
		}
	}
	return m
}

func (o *options) register(fs *pflag.FlagSet) {
	o.fs = fs
	o.fields = fieldFlags()
	fs.SortFlags = false
	fs.StringVarP(&o.device, "ib-dev", "d", DefaultDevice, specs["ib-dev"].usage)
	fs.IntVarP(&o.ibPort, "ib-port", "i", 1, specs["ib-port"].usage)
	fs.StringVarP(&o.size, "size", "s", "", specs["size"].usage)
	fs.BoolVarP(&o.all, "all", "a", false, specs["all"].usage)
	fs.IntVarP(&o.iters, "iters", "n", 0, specs["iters"].usage)
	fs.IntVarP(&o.duration, "duration", "D", 0, specs["duration"].usage)
	fs.IntVarP(&o.margin, "margin", "f", 0, specs["margin"].usage)
	fs.IntVarP(&o.txDepth, "tx-depth", "t", 0, specs["tx-depth"].usage)
	fs.IntVarP(&o.rxDepth, "rx-depth", "r", session.DefaultRxDepth, specs["rx-depth"].usage)
	fs.IntVarP(&o.postList, "post_list", "l", 1, specs["post_list"].usage)
	registerCQMod(fs, &o.cqMod)
	fs.IntVarP(&o.inline, "inline_size", "I", 0, specs["inline_size"].usage)
	fs.StringVarP(&o.connection, "connection", "c", "RC", specs["connection"].usage)
	fs.IntVarP(&o.qps, "qp", "q", 1, specs["qp"].usage)
	fs.BoolVarP(&o.bidir, "bidirectional", "b", false, specs["bidirectional"].usage)
	fs.StringVarP(&o.atomicType, "atomic_type", "A", "FETCH_AND_ADD", specs["atomic_type"].usage)
	fs.IntVarP(&o.outs, "outs", "o", 0, specs["outs"].usage)
	fs.IntVarP(&o.qpTimeout, "qp-timeout", "u", 14, specs["qp-timeout"].usage)
	fs.BoolVar(&o.gbits, "report_gbits", false, specs["report_gbits"].usage)
	fs.BoolVarP(&o.cpuFreq, "CPU-freq", "F", false, specs["CPU-freq"].usage)
	fs.IntVarP(&o.port, "port", "p", oob.DefaultPort, specs["port"].usage)
	fs.BoolVarP(&o.noPeak, "noPeak", "N", false, specs["noPeak"].usage)
	fs.IntVarP(&o.mtu, "mtu", "m", 0, specs["mtu"].usage)
	fs.StringVar(&o.jsonPath, "json", "", specs["json"].usage)
	fs.StringVar(&o.hgrmPath, "hgrm", "", specs["hgrm"].usage)
	fs.StringVar(&o.percentiles, "percentiles", "", specs["percentiles"].usage)
	fs.IntVar(&o.warmup, "warmup", 0, specs["warmup"].usage)
	fs.BoolVar(&o.loopback, "loopback", false, specs["loopback"].usage)
	fs.StringVar(&o.maxSize, "max-size", "", specs["max-size"].usage)
	fs.DurationVar(&o.timeout, "timeout", DefaultTimeout, specs["timeout"].usage)
	o.registerUDP(fs)
	o.registerPath(fs)
	o.registerRDMACM(fs)
	o.registerRate(fs, o.test)
	fs.BoolVar(&o.loopbackServer, loopbackServerFlag, false, "internal: the server process of --loopback")
	fs.MarkHidden(loopbackServerFlag)
	for name, sp := range specs {
		if sp.applies != nil && !sp.applies(o.test) {
			fs.MarkHidden(name)
		}
	}
	t := o.test
	fs.Lookup("iters").DefValue = strconv.Itoa(t.DefaultIterations())
	fs.Lookup("tx-depth").DefValue = strconv.Itoa(t.DefaultTxDepth())
	fs.Lookup("size").DefValue = strconv.Itoa(t.DefaultSize())
	if !(o.lat() && o.verb() == session.Send) {
		fs.Lookup("inline_size").Usage = "largest message sent inline"
	}
	if o.lat() {
		fs.Lookup("inline_size").DefValue = strconv.Itoa(t.DefaultInline(verbsio.QPTypeRC))
	}
}

func (o *options) changed(name string) bool { return o.fs.Changed(name) }

// flagText spells a flag as the user would, e.g. "-q 4" or "--report_gbits".
func (o *options) flagText(name string) string {
	f := o.fs.Lookup(name)
	lead := flagLead(f)
	if f.Value.Type() == "bool" {
		return lead
	}
	return lead + " " + f.Value.String()
}

// flagLead is a flag's shortest spelling, e.g. "-q" or "--report_gbits".
func flagLead(f *pflag.Flag) string {
	if f.Shorthand != "" {
		return "-" + f.Shorthand
	}
	return "--" + f.Name
}

// parseSize parses a size with perftest's optional K, M or G suffix.
func parseSize(s string) (int, error) {
	mult := int64(1)
	t := strings.TrimSpace(s)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult, t = 1<<10, t[:n-1]
		case 'm', 'M':
			mult, t = 1<<20, t[:n-1]
		case 'g', 'G':
			mult, t = 1<<30, t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	// A well-formed size too large for an int: no device takes it, and the
	// device's limit is not known yet.
	if errors.Is(err, strconv.ErrRange) && v > 0 || err == nil && v > math.MaxInt/mult {
		return 0, fmt.Errorf("%q is too large: a size is at most %d bytes", s, math.MaxInt)
	}
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a size (a number of bytes, optionally with K, M or G)", s)
	}
	return int(v * mult), nil
}

// parsePercentiles parses --percentiles: a comma-separated list of
// percentiles in (0, 100].
func parsePercentiles(list string) ([]float64, error) {
	var ps []float64
	for _, f := range strings.Split(list, ",") {
		p, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(p > 0 && p <= 100) {
			return nil, cli.Usagef("--percentiles %s: %q is not a percentile in (0, 100]; give a list like 50,99,99.9", list, f)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// parseMTU parses -m: a path MTU in bytes.
func (o *options) parseMTU() error {
	if !o.changed("mtu") {
		return nil
	}
	m, ok := verbsio.MTUFromBytes(o.mtu)
	if !ok || m.Bytes() != o.mtu {
		return cli.Usagef("-m %d: the MTU must be 256, 512, 1024, 2048 or 4096", o.mtu)
	}
	o.mtuEnum = m
	return nil
}

// validateArgs takes the host argument and checks the flags about where
// the peer is: --loopback, the ports, --timeout.
func (o *options) validateArgs(args []string) error {
	switch {
	case len(args) > 1:
		return cli.Usagef("too many arguments %q: give at most the server's host name", args)
	case len(args) == 1:
		o.host = args[0]
	}
	switch {
	case o.loopback && o.host != "":
		return cli.Usagef("--loopback runs the server itself: drop the host %q, or drop --loopback to connect to a server there", o.host)
	case o.loopbackServer && (o.host != "" || o.loopback):
		return cli.Usagef("--%s is internal to --loopback", loopbackServerFlag)
	case o.qpTimeout < 0 || o.qpTimeout > 31:
		return cli.Usagef("-u %d: the QP timeout exponent must be between 0 and 31", o.qpTimeout)
	case o.ibPort < 1 || o.ibPort > 255:
		return cli.Usagef("-i %d: not a port number (ports count from 1)", o.ibPort)
	case o.port < 0 || o.port > 65535:
		return cli.Usagef("-p %d: not a TCP port", o.port)
	case o.port == 0 && o.host != "":
		return cli.Usagef("-p 0: a client needs the server's port; give the port the server printed")
	case o.timeout <= 0:
		return cli.Usagef("--timeout %v: must be positive, e.g. 30s", o.timeout)
	}
	return o.parseMTU()
}

// validate checks the flags by themselves, before any device is open, and
// then the test's configuration they make (Check); the errors name the
// flag and how to fix it.
func (o *options) validate(args []string) error {
	t := o.test
	if err := o.validateArgs(args); err != nil {
		return err
	}
	// Flags that do not apply to this test.
	if t.Verb() == session.Atomic {
		for _, name := range []string{"size", "all", "max-size"} {
			if o.changed(name) {
				return cli.Usagef("%s: atomic operations always move 8 bytes; drop it", o.flagText(name))
			}
		}
	}
	for name, sp := range specs {
		if sp.what == "" {
			continue
		}
		if sp.applies != nil && !sp.applies(t) && o.changed(name) {
			return cli.Usagef("%s applies to %s only, not to %s; drop it", o.flagText(name), sp.what, t.Command())
		}
	}

	// Transport: its spelling (which transport the test takes is Check's).
	typ, ok := verbsio.ParseQPType(o.connection)
	if !ok || typ == verbsio.QPTypeRawPacket {
		up := strings.ToUpper(o.connection)
		if up == "XRC" || up == "DC" || up == "SRD" {
			return cli.Usagef("-c %s: rperf runs over RC, UC and UD; %s is not supported", o.connection, up)
		}
		return cli.Usagef("-c %s: not a connection type; use RC, UC or UD", o.connection)
	}
	o.qpType, o.connection = typ, typ.String()

	// Sizes: their spelling; they are checked against the device once it
	// is open (sizesFor).
	switch {
	case o.all && o.changed("size"):
		return cli.Usagef("-a and -s conflict: -a runs every size from 2 to %d bytes; drop one of them", allMaxSize)
	case o.changed("max-size") && !o.all:
		return cli.Usagef("--max-size limits -a; add -a, or use -s for one size")
	}
	if o.changed("size") {
		n, err := parseSize(o.size)
		if err != nil {
			return cli.Usagef("-s %s: %v", o.size, err)
		}
		o.sizes = []int{n}
	} else if !o.all {
		o.sizes = []int{t.DefaultSize()}
	}
	o.maxSz = allMaxSize
	if o.changed("max-size") {
		n, err := parseSize(o.maxSize)
		if err != nil {
			return cli.Usagef("--max-size %s: %v", o.maxSize, err)
		}
		if n < 2 {
			return cli.Usagef("--max-size %s: -a starts at 2 bytes; give 2 or more", o.maxSize)
		}
		o.maxSz = n
	}

	// Iterations or duration: -D counts whole seconds, -f belongs to it.
	switch {
	case o.changed("iters") && o.changed("duration"):
		return cli.Usagef("-n and -D conflict: -n runs a number of iterations, -D runs for a time; drop one of them")
	case o.changed("margin") && !o.changed("duration"):
		return cli.Usagef("-f %d is the margin of duration mode; add -D, or drop -f", o.margin)
	case o.changed("duration") && o.duration < 1:
		return cli.Usagef("-D %d: the duration must be at least 1 second", o.duration)
	}
	if o.changed("duration") && !o.changed("margin") {
		o.margin = o.duration / 4 // perftest's default margin
	}

	// Values whose 0 means "not given" in the configuration: given, they
	// must be real values.
	if err := checkCQModFlag(o.fs, o.cqMod, func(err error) error { return o.usage(err) }); err != nil {
		return err
	}
	if o.changed("outs") {
		if err := o.usage(session.CheckOutReads(o.outs)); err != nil {
			return err
		}
	}

	// Defaults the test chooses.
	if !o.changed("iters") {
		o.iters = t.DefaultIterations()
	}
	if !o.changed("tx-depth") {
		o.txDepth = t.DefaultTxDepth()
	}
	if !o.changed("inline_size") {
		o.inline = t.DefaultInline(o.qpType)
	}

	// Atomics and reports: spellings.
	switch strings.ToUpper(o.atomicType) {
	case "FETCH_AND_ADD", "FAA":
		o.atomicOp = verbsio.OpAtomicFetchAdd
	case "CMP_AND_SWAP", "CAS":
		o.atomicOp = verbsio.OpAtomicCmpSwp
	default:
		return cli.Usagef("-A %s: use CMP_AND_SWAP or FETCH_AND_ADD", o.atomicType)
	}
	if o.changed("percentiles") {
		ps, err := parsePercentiles(o.percentiles)
		if err != nil {
			return err
		}
		o.pcts = ps
	}
	if o.jsonPath == "-" && o.hgrmPath == "-" {
		return cli.Usagef("--json - and --hgrm - both want stdout; send one of them to a file")
	}
	if err := o.validateUDP(); err != nil {
		return err
	}
	if err := o.validateRDMACM(); err != nil {
		return err
	}
	if err := o.validatePath(); err != nil {
		return err
	}
	if err := o.validateRate(); err != nil {
		return err
	}
	// Every rule about the values. The sizes, and the buffers they need,
	// wait for the device: -a's list is known only then, and the depths
	// that fit a validated run are chosen then (fitValidation).
	return o.check(o.sizes, "Sizes", "Validate")
}

// sizesFor returns the sizes to run with the device's limits applied:
// -a's list capped at --max-size, the device's max_msg_sz and, over UD,
// the path MTU; and checks a single -s against the same limits.
func (o *options) sizesFor(attr verbsio.DeviceAttr, port verbsio.PortAttr, dev string) ([]int, error) {
	maxMsg := int64(attr.MaxMsgSize)
	if port.MaxMsgSize > 0 && (maxMsg == 0 || int64(port.MaxMsgSize) < maxMsg) {
		maxMsg = int64(port.MaxMsgSize)
	}
	if maxMsg <= 0 {
		maxMsg = 1 << 31
	}
	mtu := port.ActiveMTU.Bytes()
	if o.mtuEnum.Valid() {
		mtu = min(mtu, o.mtuEnum.Bytes())
	}
	if !o.all {
		n := o.sizes[0]
		if o.qpType == verbsio.QPTypeUD && n > mtu && !o.changed("size") {
			// perftest's default size over UD is the path MTU.
			return []int{mtu}, nil
		}
		switch {
		case n < 1:
			return nil, cli.Usagef("-s %s: message size must be between 1 and %d (%s's max_msg_sz)", o.size, maxMsg, dev)
		case int64(n) > maxMsg:
			return nil, cli.Usagef("-s %s: message size must be between 1 and %d (%s's max_msg_sz); use -s %d or less", o.size, maxMsg, dev, maxMsg)
		case o.qpType == verbsio.QPTypeUD && n > mtu:
			return nil, cli.Usagef("-s %s: a UD message must fit in the path MTU (%d bytes); use -s %d or less, or -c RC", o.size, mtu, mtu)
		}
		return o.sizes, nil
	}
	limit := int64(o.maxSz)
	limit = min(limit, maxMsg)
	if o.qpType == verbsio.QPTypeUD {
		limit = min(limit, int64(mtu))
	}
	var sizes []int
	for n := int64(1) << allMinShift; n <= limit; n <<= 1 {
		sizes = append(sizes, int(n))
	}
	if len(sizes) == 0 {
		return nil, cli.Usagef("-a: no size fits the limits (--max-size %d, %s's max_msg_sz %d)", o.maxSz, dev, maxMsg)
	}
	return sizes, nil
}

// checkDevice checks the queue flags against the device's limits. Defaults
// the user did not set are lowered to fit the device instead.
func (o *options) checkDevice(attr verbsio.DeviceAttr, dev string) error {
	v := o.verb()
	if err := o.checkStampsDevice(attr, dev); err != nil {
		return err
	}
	if !o.changed("inline_size") {
		o.inline = min(o.inline, attr.MaxInlineData)
	}
	if !o.changed("rx-depth") && attr.MaxQPWR > 0 {
		o.rxDepth = min(o.rxDepth, attr.MaxQPWR)
	}
	if !o.changed("tx-depth") && attr.MaxQPWR > 1 {
		o.txDepth = min(o.txDepth, attr.MaxQPWR-1)
	}
	switch {
	case (v == session.Send || v == session.Write) && o.inline > attr.MaxInlineData:
		return cli.Usagef("-I %d: inline size must be at most %d (%s's max_inline_data)", o.inline, attr.MaxInlineData, dev)
	case attr.MaxQPWR > 0 && o.txDepth+1 > attr.MaxQPWR:
		return cli.Usagef("-t %d: tx depth must be below %d (%s's max_qp_wr)", o.txDepth, attr.MaxQPWR, dev)
	case v == session.Send && attr.MaxQPWR > 0 && o.rxDepth > attr.MaxQPWR:
		return cli.Usagef("-r %d: rx depth must be at most %d (%s's max_qp_wr)", o.rxDepth, attr.MaxQPWR, dev)
	case attr.MaxQP > 0 && o.qps > attr.MaxQP:
		return cli.Usagef("-q %d: %s offers at most %d QPs", o.qps, dev, attr.MaxQP)
	case o.changed("outs") && o.outs > attr.MaxQPRdAtom:
		return cli.Usagef("-o %d: outstanding reads must be at most %d (%s's max_qp_rd_atom)", o.outs, attr.MaxQPRdAtom, dev)
	case v == session.Atomic && attr.AtomicCap == verbsio.AtomicNone:
		return &cli.EnvironmentError{Err: fmt.Errorf("%s does not support atomic operations (atomic_cap %s); run the atomic tests on another device", dev, attr.AtomicCap)}
	case attr.MaxCQE > 0 && o.qps*(o.txDepth+1)+16 > attr.MaxCQE:
		return cli.Usagef("-q %d with -t %d needs a CQ of %d entries, more than %s's %d; use fewer QPs or a smaller tx depth", o.qps, o.txDepth, o.qps*(o.txDepth+1)+16, dev, attr.MaxCQE)
	case v == session.Send && attr.MaxCQE > 0 && o.qps*o.rxDepth+16 > attr.MaxCQE:
		return cli.Usagef("-q %d with -r %d needs a CQ of %d entries, more than %s's %d; use fewer QPs or a smaller rx depth", o.qps, o.rxDepth, o.qps*o.rxDepth+16, dev, attr.MaxCQE)
	}
	return o.checkRate(attr.PacketPacing, dev)
}

// params describes the test for the peer's parameter check, with the
// flags spelled as on the command line. Symmetric fields must match. The
// sizes are those the device takes (sizesFor).
func (o *options) params(sizes []int) oob.Params {
	p := oob.Params{Test: o.test.Command()}
	add := func(flag, value string, sym bool) {
		p.Fields = append(p.Fields, oob.Field{Flag: flag, Value: value, Symmetric: sym})
	}
	switch {
	case len(sizes) == 0: // not known yet (validate's check)
	case o.all:
		add("-a", "", true)
		add("--max-size", strconv.Itoa(sizes[len(sizes)-1]), true)
	default:
		add("-s", strconv.Itoa(sizes[0]), true)
	}
	if o.changed("duration") {
		add("-D", strconv.Itoa(o.duration), true)
		add("-f", strconv.Itoa(o.margin), true)
	} else {
		add("-n", strconv.Itoa(o.iters), true)
	}
	add("-c", o.qpType.String(), true)
	if !o.lat() {
		add("-q", strconv.Itoa(o.qps), true)
		if o.bidir {
			add("-b", "", true)
		}
		if o.gbits {
			add("--report_gbits", "", true)
		}
	}
	if o.verb() == session.Atomic {
		add("-A", o.atomicOp.String(), true)
	}
	if o.warmup > 0 {
		add("--warmup", strconv.Itoa(o.warmup), true)
	}
	if o.checkData {
		add("--validate", "", true)
	}
	if o.path != sendpath.Generic {
		add("--path", o.path.String(), true)
	}
	add("-t", strconv.Itoa(o.txDepth), false)
	if o.verb() == session.Send {
		add("-r", strconv.Itoa(o.rxDepth), false)
	}
	return p
}

// common is the part of the test's configuration every family shares,
// from the flags.
func (o *options) common(sizes []int) session.Config {
	c := session.Default(o.test)
	c.Connection = o.qpType
	c.Sizes = sizes
	c.All = o.all
	c.Iterations = o.iters
	if o.changed("duration") {
		c.Duration = time.Duration(o.duration) * time.Second
		c.Margin = time.Duration(o.margin) * time.Second
	}
	c.Warmup = o.warmup
	c.TxDepth, c.RxDepth = o.txDepth, o.rxDepth
	c.Inline = o.inline
	c.OutReads = o.outs
	c.AtomicOp = o.atomicOp
	c.Validate = o.checkData
	c.Path = o.path
	c.Link = o.link(o.params(sizes))
	return c
}

// latencyConfig builds the latency test's configuration: the receives of
// a run in iterations mode are capped at its messages.
func (o *options) latencyConfig(sizes []int) latency.Config {
	c := latency.Config{Config: o.common(sizes), Percentiles: o.pcts, CompletionTimestamps: o.stamps}
	if c.Duration == 0 {
		c.RxDepth = min(o.rxDepth, max(o.iters+o.warmup, 1))
	}
	return c
}

// bwConfig builds the bandwidth test's configuration.
func (o *options) bwConfig(sizes []int) bw.Config {
	c := bw.Config{Config: o.common(sizes), QPs: o.qps, PostList: o.postList,
		Bidirectional: o.bidir, NoPeak: o.noPeak, ReportGbits: o.gbits, RateLimitKbps: o.rateKbps}
	if o.changed("cq-mod") {
		c.CQMod = o.cqMod
	}
	return c
}

// link is how a test reaches its peer, from the flags (perftest -u, -i,
// -m, -x, --ipv6, the stall timeout), with the parameters both sides
// check.
func (o *options) link(params oob.Params) session.Link {
	return session.Link{QPTimeout: uint8(o.qpTimeout), Port: uint8(o.ibPort), MTU: o.mtuEnum, StallTimeout: o.timeout,
		Params: params, GIDIndex: o.gidIndex, IPv6: o.ipv6}
}

// registerCQMod adds -Q/--cq-mod, the bandwidth tests' CQ moderation
// (the connected tests' and raw-bw's); 0, its default, is perftest's rule.
func registerCQMod(fs *pflag.FlagSet, n *int) {
	fs.IntVarP(n, "cq-mod", "Q", 0, specs["cq-mod"].usage)
}

// checkCQModFlag checks -Q when it was given: a configuration takes 0 as
// perftest's rule, so a given 0 is refused here, as is any value outside
// 1 to session.MaxCQMod; usage spells the problem as the command's flags.
func checkCQModFlag(fs *pflag.FlagSet, n int, usage func(error) error) error {
	if f := fs.Lookup("cq-mod"); f == nil || !f.Changed {
		return nil
	}
	return usage(session.CheckCQMod(n))
}
