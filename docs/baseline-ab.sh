#!/bin/bash
# A/B of the udp fast path: before/after binaries alternated (ABBA), with the
# machine's busy-polling reference (rperf baseline --engine=false) each round.
# usage: docs/baseline-ab.sh ROUNDS OUTDIR BEFORE AFTER; then python3 docs/baseline-ab.py OUTDIR
# (docs/baseline.md)
R=$1; D=$2; A=$3; B=$4
mkdir -p $D
for r in $(seq 1 $R); do
  if [ $((r % 2)) = 1 ]; then order="$A:before $B:after"; else order="$B:after $A:before"; fi
  cat /proc/loadavg > $D/load-$r
  $B baseline --engine=false -n 20000 --bw-iters 5000 --json $D/ref-$r.json 2>/dev/null
  for t in "send-lat -s 64 -n 20000" "write-lat -s 64 -n 20000" "write-bw -s 65536 -n 5000"; do
    for x in $order; do
      bin=${x%%:*}; tag=${x##*:}; name=$(echo $t | cut -d' ' -f1)
      $bin $t -d udp_lo -u 18 --loopback --json $D/$name-$tag-$r.json >/dev/null 2>$D/$name-$tag-$r.err
    done
  done
  cat /proc/loadavg >> $D/load-$r
done
