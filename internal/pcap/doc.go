// Package pcap reads packet captures in the classic pcap format and in
// pcapng, and writes classic pcap.
//
// The reader accepts classic pcap in either byte order with microsecond
// (magic 0xa1b2c3d4) or nanosecond (0xa1b23c4d) timestamps, and pcapng
// (draft-ietf-opsawg-pcapng) in either byte order, including files with
// several sections and interfaces. From pcapng it decodes the Section Header,
// Interface Description (with the if_tsresol and if_tsoffset options),
// Enhanced Packet, Simple Packet and the obsolete Packet blocks; every other
// block is skipped. Each packet comes back with its timestamp, its link type
// and its captured bytes.
//
// Malformed input gives an error that names the problem ("pcap: record 7:
// captured length 300000 exceeds the 262144-byte limit"); the reader never
// panics and never allocates more than a bounded buffer, whatever the input
// claims.
//
// Network strips the link-layer header of the link types rperf meets
// (Ethernet with VLAN tags, raw IP, Linux cooked SLL and SLL2).
package pcap
