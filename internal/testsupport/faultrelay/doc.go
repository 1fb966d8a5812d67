// Package faultrelay forwards UDP traffic between two endpoints and injects
// seeded, countable faults into it: drop, duplicate, reorder, corrupt and
// delay, each direction configured on its own.
//
// Two forwarders share one fault engine:
//
//   - Relay is a UDP relay on ordinary sockets. It listens on two sockets,
//     one facing each side: endpoint A sends to AddrA() as if it were B, and B
//     sends to AddrB() as if it were A; each datagram read on the A-facing
//     socket is sent from the B-facing socket to B, and the other way round.
//     Two sockets, rather than one with learned peers, keep the direction of
//     every datagram unambiguous even when A and B share an address, and give
//     each endpoint a distinct peer address. B's and A's addresses are
//     configured, or learned from the first datagram each sends. The IP
//     addresses and UDP ports change on the way (A sees the relay, not B), so
//     anything that covers the IP and UDP headers, such as the RoCEv2 ICRC,
//     does not survive it. Sockets may be opened by the caller, for example in
//     two network namespaces with netns.ListenUDP.
//   - Wire is transparent at the IP level. It runs in the middle namespace of
//     a netns.Pair made with Options.Middle (A — Mid — B, A and B on one
//     subnet) and bridges Ethernet frames between Mid's two links with
//     AF_PACKET sockets. Frames arrive at B exactly as A sent them — same MAC
//     and IP addresses, ports, TTL, IPv4 identification — except for the
//     injected faults, so the ICRC and peer identification by address and
//     port work as on a real wire. ARP, neighbour discovery and other non-UDP
//     frames cross untouched; faults apply to UDP datagrams only, optionally
//     only to some ports. Checksums the sender left to offload are completed,
//     and UDP GSO super-packets are cut into the datagrams they stand for, so
//     faults hit individual datagrams as they would on a wire.
//
// The kernel's netem qdisc would be the simpler transparent injector, but
// kernels built without it (CONFIG_NET_SCH_NETEM unset, no modules) are
// common in CI virtual machines; Wire needs only AF_PACKET and veth.
//
// # Faults
//
// For each datagram eligible for faults, a direction draws the same fixed
// set of random numbers from its own generator (seeded from Config.Seed and
// the direction), so the fate of the n-th eligible datagram in a direction
// depends only on the seed and n: counts are reproducible run to run, given
// the same traffic. Only the timing of delayed and held datagrams depends on
// scheduling. The steps, in order:
//
//  1. drop with probability Drop; a dropped datagram has no other fault;
//  2. corrupt with probability Corrupt: flip one random bit (or replace one
//     byte) at a random offset in the payload, optionally within
//     [CorruptFrom, CorruptTo);
//  3. duplicate with probability Duplicate: the copy follows the original;
//  4. reorder with probability Reorder: hold the datagram back and release
//     it right after the next datagram forwarded in that direction, or after
//     ReorderTimeout if none comes;
//  5. delay every datagram by Delay plus a uniform random part of Jitter
//     (jitter reorders datagrams that arrive closer than it).
//
// MaxFaults caps the faults of a direction (after it, datagrams cross
// faithfully); Config.MaxDatagrams caps the datagrams the forwarder accepts
// and Config.MaxDuration its life. Counters, per direction, say what
// happened and are safe to read at any time.
package faultrelay
