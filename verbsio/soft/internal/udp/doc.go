// Package udp is the socket layer of the built-in engine's udp fabric:
// UDP sockets bound to one local address and port, sending and receiving
// datagrams in batches with sendmmsg/recvmmsg through preallocated message
// headers (no allocation per datagram), and UDP GSO (UDP_SEGMENT) for
// sends cut into equal segments by the kernel, with a fall-back to one
// datagram per segment when the kernel or the device refuses it.
//
// It also lists the machine's network devices and their addresses, which
// become the udp fabric's devices and GID tables.
package udp
