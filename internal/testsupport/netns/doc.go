// Package netns builds throw-away test hosts out of Linux network namespaces.
//
// NewPair creates two named namespaces, A and B, joined by a veth pair, each
// with an IPv4 and an IPv6 address, its links and its loopback up, and
// optionally an MTU and a root qdisc. With Options.Middle a third namespace
// sits on the wire between them (A — Mid — B, two veth pairs, A and B on one
// subnet): nothing crosses it until something forwards frames there, either a
// kernel bridge (Options.Bridge) or a user-space forwarder such as
// faultrelay.Wire, which injects faults while leaving the IP and UDP headers
// untouched.
//
// Code enters a namespace in one of two ways:
//
//   - Run(ns, fn) runs fn on a locked OS thread switched into ns. Sockets
//     created inside fn belong to ns for their whole life, wherever they are
//     used afterwards; that is the main use: ListenUDP wraps it.
//   - Command(ns, name, args...) returns an *exec.Cmd whose process runs in ns
//     (through "ip netns exec", which also mounts a /sys showing ns), for
//     running a test binary or the rperf binary as a child in each namespace.
//
// Everything needs root and the iproute2 "ip" command (Available says which
// is missing; Setup skips a test then). Names start with Prefix followed by
// the creating process's pid, so CleanupStale can remove what a crashed run
// left behind without touching the namespaces of a live one.
//
// A and B know each other's MAC addresses from the start (permanent
// neighbour entries), so no first burst waits on ARP or neighbour discovery,
// where the kernel would drop what overflows its small queue and let later
// datagrams overtake the queued ones; Options.DynamicNeighbors restores
// ordinary resolution.
//
// Addresses come from 10.192.0.0/10 (a /24 per pair) and fd72:7066::/32
// (a /64 per pair), chosen from the pid and a counter so that concurrent test
// processes get distinct subnets; they exist only inside the namespaces, so
// the root namespace never routes to them.
//
// What this machine's kernel offers shapes the options: "tbf" and "htb"
// qdiscs exist; "fq", "fq_codel" and "netem" may not (the kernel must be
// built with them), in which case Options.Qdisc fails with tc's error.
package netns
