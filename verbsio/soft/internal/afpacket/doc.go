// Package afpacket moves whole Ethernet frames between the engine and a
// network device through Linux packet sockets (AF_PACKET) with
// memory-mapped rings: the I/O under the raw fabric's RAW_PACKET QPs.
//
// Receive (RX) is a ring the kernel fills: TPACKET_V3 (blocks of frames,
// handed over when a block is full or its timer expires: few wake-ups,
// for bandwidth) or TPACKET_V2 (one slot per frame, handed over at once:
// for latency). A classic BPF filter (netpkt.Table.Filter) keeps the
// frames no steering rule wants out of the ring. Frames sent by this host
// are not received (PACKET_IGNORE_OUTGOING). Each frame carries the
// kernel's receive timestamp and says which kind it is (Frame.TSKind):
// the NIC's hardware stamp where the device gives one (SO_TIMESTAMPING
// raw hardware), else the kernel's software stamp taken when the frame
// entered the stack (SO_TIMESTAMPING software), both CLOCK_REALTIME.
// The kernel takes the outer VLAN tag out of a received frame and hands
// it beside the frame (Frame.Tag); netpkt.InsertTag puts it back.
//
// Transmit (TX) sends batches of frames with one system call: through a
// TPACKET_V2 TX ring (frames copied into shared slots, one send() per
// batch), sendmmsg(2) (one message per frame; a lone frame goes with
// send(2)), or an AF_XDP socket (frames copied into its UMEM, one kick per
// 32; copy mode, which every driver has, and no XDP program since it only
// sends); the packet socket paths optionally past the qdisc layer
// (PACKET_QDISC_BYPASS). A TSO send goes to the kernel as one
// large frame with a virtio-net header (PACKET_VNET_HDR) and the kernel
// segments it (software GSO, or the NIC's TSO); the engine can instead
// cut it itself with netpkt.TSO and send the frames as a batch.
//
// Everything needs CAP_NET_RAW; without it Open fails with an error
// naming the capability (ErrNoCapNetRaw). Sockets belong to the network
// namespace of the thread that opens them.
package afpacket
