package diag

// NetRaw checks CAP_NET_RAW, which the built-in engine's raw devices
// (raw_<netdev>: RAW_PACKET QPs, rperf's raw-bw, raw-lat, raw-burst-lat
// and fs-rate) need for their packet sockets. Without it the other
// devices work, so it is INFO, with the fix; opening a raw device then
// fails with an error naming the capability.
func NetRaw(capNetRaw bool) Finding {
	f := Finding{Check: CheckNetRaw}
	if capNetRaw {
		f.Severity = Pass
		f.What = "CAP_NET_RAW is held: raw_<netdev> devices (RAW_PACKET QPs, rperf raw-* and fs-rate) can be opened"
		return f
	}
	f.Severity = Info // only raw runs need it; rdiag check cannot know whether this one will
	f.What = "CAP_NET_RAW is not held: raw_<netdev> devices (RAW_PACKET QPs, rperf raw-* and fs-rate) cannot be opened; shm0 and udp_* are unaffected"
	f.Fix = "run as root, or grant it: setcap cap_net_raw+ep on the rperf binary"
	return f
}
