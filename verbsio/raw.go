package verbsio

// Raw Ethernet (RAW_PACKET QPs): the application writes whole frames,
// from the Ethernet header to the payload, and receives whole frames.

// OpTSO is a TCP segmentation offload send (IBV_WR_TSO) on a RAW_PACKET
// QP: SendWR.TSO.Hdr is the frame's headers (Ethernet to TCP, or to UDP
// for UDP fragmentation offload where a device offers it), the SGL is the
// payload, and the device cuts it into frames of TSO.MSS payload bytes,
// each with the headers fixed up as a NIC does: IPv4 total length,
// identification (+1 per frame) and checksum, IPv6 payload length, TCP
// sequence number (+ the payload before it), TCP flags (CWR on the first
// frame only, FIN and PSH on the last only) and the TCP checksum.
// Opcode.Valid is false for it: only providers with raw QPs accept it.
const OpTSO Opcode = 10

// SendIPCsum asks the device to compute the checksums of a raw frame
// (IBV_SEND_IP_CSUM): the IPv4 header checksum and the TCP or UDP
// checksum, as a NIC's checksum offload does. For a VXLAN frame the
// inner headers' checksums are computed, and an outer UDP checksum of
// zero over IPv4 stays zero (RFC 7348); over IPv6 it is computed.
const SendIPCsum SendFlags = 1 << 4

// WCIPCsumOK says that the device verified the received frame's IPv4
// header checksum and its TCP or UDP checksum (IBV_WC_IP_CSUM_OK).
const WCIPCsumOK WCFlags = 1 << 2

// TSO is the segmentation part of an OpTSO send (the tso member of
// struct ibv_send_wr). The provider copies Hdr at post time.
type TSO struct {
	Hdr []byte // the headers of every frame: Ethernet, optional VLAN, IP, TCP
	MSS uint16 // payload bytes per frame, the last frame takes the rest
}
