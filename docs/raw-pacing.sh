#!/bin/sh
# raw-pacing.sh — the raw fabric's pacing error, measured with two rperf
# processes over a veth pair between two network namespaces (issue 11:
# "pacing error from 10 Mb/s to 1 Gb/s, goal under 1%").
#
#   sh docs/raw-pacing.sh [RPERF [RATES]]     (root; default RPERF=bin/rperf)
#   make raw-pacing                           (builds bin/rperf first)
#
# For each rate R (Mb/s) in RATES (default "10 100 1000"): a server
# (rperf raw-bw -Z, 8192 receives posted) and a paced client (rperf raw-bw
# -P --rate_limit R/1000 -s 1514: Gb/s, perftest's default unit; its M is
# MiB/s), both given perftest's -J (the server's IP) and -j (the
# client's), -n 1000, 10000, 50000 frames
# for 10, 100, 1000 Mb/s (about 1.2 s, 1.2 s, 0.6 s), other rates 1.2 s
# worth. It prints both sides' rates, the error against R and the frames
# the server lost, and the client's line on its CPU waits when it gives
# one (a rate more than 1% off). The rate is what
# rperf reports: frame bytes (L2 header through payload, 1514 here; no
# preamble, inter-frame gap or FCS, as perftest's raw_ethernet_bw counts
# -s), times 8, over the client's measured interval (first post to last
# completion) and the server's (first arrival to the last, by the
# receive completions' kernel stamps). A perfect pacer reads high on the
# client by the bucket's initial burst (4 KiB leave at once): +0.27% at
# -n 1000, +0.03% at 10000, +0.005% at 50000; on the server, which counts
# the frames after the first, +0.17%, +0.02%, +0.003%. The load average is
# printed with every run. Each run is bounded (60 s); the namespaces are
# removed on exit, however it ends.
set -eu
RPERF=${1:-bin/rperf}
RATES=${2:-"10 100 1000"}
A=pza B=pzb
cleanup() { ip netns del $A 2>/dev/null || true; ip netns del $B 2>/dev/null || true; }
trap cleanup EXIT INT TERM
cleanup
ip netns add $A
ip netns add $B
ip link add ${A}0 netns $A type veth peer name ${B}0 netns $B
ip -n $A addr add 10.253.0.1/24 dev ${A}0
ip -n $B addr add 10.253.0.2/24 dev ${B}0
ip -n $A link set ${A}0 up
ip -n $B link set ${B}0 up
ip -n $A link set lo up
ip -n $B link set lo up
MACA=$(ip -n $A -o link show ${A}0 | sed -E 's/.*link\/ether ([0-9a-f:]+).*/\1/')
MACB=$(ip -n $B -o link show ${B}0 | sed -E 's/.*link\/ether ([0-9a-f:]+).*/\1/')
# gbps FILE: the first result's average rate in Gb/s from rperf's JSON.
gbps() { grep -o '"bw_avg_gbps": *[0-9.e+-]*' "$1" | head -1 | sed 's/.*: *//'; }
tmp=$(mktemp -d)
trap 'cleanup; rm -rf "$tmp"' EXIT INT TERM
for R in $RATES; do
	case $R in
	10) N=1000 ;; 100) N=10000 ;; 1000) N=50000 ;;
	*) N=$((R * 100000 / 1211)) ;;
	esac
	G=$(awk -v r=$R 'BEGIN { print r / 1000 }')
	timeout 60 ip netns exec $B "$RPERF" raw-bw -d raw_${B}0 -Z -E "$MACA" -J 10.253.0.2 -j 10.253.0.1 -s 1514 -n $N -r 8192 --timeout 10s --json "$tmp/s.json" >"$tmp/s" 2>&1 &
	spid=$!
	sleep 0.5
	timeout 60 ip netns exec $A "$RPERF" raw-bw -d raw_${A}0 -P -E "$MACB" -J 10.253.0.2 -j 10.253.0.1 -s 1514 -n $N --rate_limit $G --json "$tmp/c.json" >"$tmp/c" 2>&1 || { cat "$tmp/c"; }
	wait $spid || { cat "$tmp/s"; }
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	c=$(gbps "$tmp/c.json")
	s=$(gbps "$tmp/s.json")
	lost=$(grep -o '"lost_messages": *[0-9]*' "$tmp/s.json" | grep -o '[0-9]*$' || echo 0)
	awk -v r=$R -v c="$c" -v s="$s" -v n=$N -v l="$load" -v lost="$lost" 'BEGIN {
		printf "%5d Mb/s  n=%-6d client %9.3f Mb/s (%+.2f%%)  server %9.3f Mb/s (%+.2f%%, %d lost)  load %s\n",
			r, n, c*1000, (c*1000-r)/r*100, s*1000, (s*1000-r)/r*100, lost, l }'
	grep "sending thread" "$tmp/c" | sed 's/^/      /' || true
done
