#!/bin/bash
# shm0 against UCX's shared-memory tag latency (apt: ucx-utils), 8 B,
# alternating runs, without and with one CPU-bound neighbour (docs/baseline.md).
# usage: docs/baseline-ucx.sh RUNS RPERF   (prints one line per run)
RUNS=${1:-5}; RPERF=${2:-rperf}; N=100000; PORT=13337
ucx() {
  UCX_TLS=posix,self timeout 120 ucx_perftest -p $PORT >/dev/null 2>&1 &
  sleep 1
  UCX_TLS=posix,self timeout 120 ucx_perftest localhost -p $PORT -t tag_lat -s 8 -n $N 2>/dev/null |
    awk '/^Final:/ {print $3}'
  wait
}
engine() {
  $RPERF write-lat --loopback -s 8 -n $N --json /tmp/baseline-ucx.$$.json >/dev/null 2>&1 &&
    python3 -c "import json; print(json.load(open('/tmp/baseline-ucx.$$.json'))['results'][0]['percentiles']['50'])"
  rm -f /tmp/baseline-ucx.$$.json
}
for mode in idle busy; do
  for r in $(seq 1 $RUNS); do
    nb=
    if [ $mode = busy ]; then sh -c 'while :; do :; done' & nb=$!; fi
    load=$(cut -d' ' -f1 /proc/loadavg)
    if [ $((r % 2)) = 1 ]; then u=$(ucx); e=$(engine); else e=$(engine); u=$(ucx); fi
    [ -n "$nb" ] && kill $nb
    echo "$mode run $r load $load ucx_p50_us $u rperf_p50_us $e"
  done
done
