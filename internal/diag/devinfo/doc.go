// Package devinfo is rdiag's description of an RDMA device as ibv_devinfo
// shows it, and the one printer of that text.
//
// Describe fills a Device from whatever rdiag has for it: the typed values
// internal/sysfs read (a kernel device, or a copied /sys tree), the answers
// of a verbsio provider's QueryDevice, QueryPort and QueryGIDTable (the
// built-in engine, or a kernel device opened through libibverbs), or both.
// A verbs answer wins; sysfs fills what no provider answered (board_id,
// which ibv_devinfo too reads from sysfs, and the rate when the verbs codes
// have no name); what neither knows is a Value with the reason, never a
// zero. Lines lays a Device out line by line as rdma-core 44's ibv_devinfo
// [-v] prints it (libibverbs/examples/devinfo.c: labels, tab stops, flag
// names, sections, which lines appear only for non-zero values); Write
// prints the lines, JSON turns them into label/value pairs.
//
// A field rdiag cannot know is printed where ibv_devinfo prints it, with
// the reason instead of the value: a section whose lines depend on values
// (on-demand paging flags, tag matching, CQ moderation, device memory)
// becomes one line with the reason. Fields that do not apply to a device
// (the libibverbs-only fields for the built-in engine) are left out.
//
// The words for states, MTUs, widths, speeds and flags (PortStateText,
// PhysStateText, MTUText, ...) are ibv_devinfo's, and rdiag's tables and
// checks use the same ones.
package devinfo
