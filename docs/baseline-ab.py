#!/usr/bin/env python3
# Medians of an A/B directory written by docs/baseline-ab.sh (docs/baseline.md).
import json, glob, sys, statistics as st, os
D = sys.argv[1]
def fig(f):
    try: d = json.load(open(f))
    except Exception: return None
    r = d["results"]
    out = {}
    for x in r:
        if "rtt_factor" in x: out[x["test"]] = x["percentiles"]["50"]
        else: out[x["test"]] = x["bw_avg_mibps"]
    return out
rows = {}
for f in sorted(glob.glob(D + "/*.json")):
    b = os.path.basename(f)[:-5]
    parts = b.rsplit("-", 1); key, rnd = parts[0], parts[1]
    v = fig(f)
    if v is None: continue
    if key == "ref":
        rows.setdefault("ref_udp_pingpong_p50_us", []).append(v["baseline_udp_pingpong"])
        rows.setdefault("ref_udp_stream_mibps", []).append(v["baseline_udp_stream"])
    else:
        rows.setdefault(key, []).append(list(v.values())[0])
for k, v in sorted(rows.items()):
    print(f"{k:28s} n={len(v)} median={st.median(v):.3f} min={min(v):.3f} max={max(v):.3f}")
