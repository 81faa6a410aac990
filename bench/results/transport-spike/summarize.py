#!/usr/bin/env python3
# summarize results*.txt: per run row + per-mode median
import re, sys, statistics as st, collections
rows = collections.OrderedDict()
for fn in sys.argv[1:]:
    for line in open(fn):
        m = re.search(r'mode=(\S+) conns=(\d+) slots=(\d+) calls=(\d+) calls/s=(\d+) p50us=(\d+) p99us=(\d+) cpu_us/call c=([\d.]+) s=([\d.]+) tot=([\d.]+)\s+cs/call c=([\d.]+)\([^)]*\) s=([\d.]+)\([^)]*\) tot=([\d.]+).*errors c=(\d+) s=(\d+) timeouts=(\d+) stuck=(\d+)', line)
        if not m: continue
        g = m.groups()
        key = f"{g[0]} conns={g[1]} slots={g[2]}"
        rows.setdefault(key, []).append(dict(f=fn, cps=int(g[4]), p50=int(g[5]), p99=int(g[6]), cc=float(g[7]), cs=float(g[8]), ct=float(g[9]),
                                            xc=float(g[10]), xs=float(g[11]), xt=float(g[12]), err=int(g[13])+int(g[14])+int(g[15])+int(g[16])))
print("| mode | run | calls/s | p50 µs | p99 µs | CPU µs/call c+s=tot | cs/call c+s=tot | err |")
print("|---|---|---|---|---|---|---|---|")
for k, rs in rows.items():
    for i, r in enumerate(rs):
        print(f"| {k} | {i+1} | {r['cps']} | {r['p50']} | {r['p99']} | {r['cc']:.1f}+{r['cs']:.1f}={r['ct']:.1f} | {r['xc']:.2f}+{r['xs']:.2f}={r['xt']:.2f} | {r['err']} |")
print()
print("| mode | n | median calls/s | median p50 | median p99 | median CPU µs/call tot (min-max) | median cs/call tot (min-max) |")
print("|---|---|---|---|---|---|---|")
for k, rs in rows.items():
    med = lambda f: st.median(r[f] for r in rs)
    print(f"| {k} | {len(rs)} | {med('cps'):.0f} | {med('p50'):.0f} | {med('p99'):.0f} | {med('ct'):.1f} ({min(r['ct'] for r in rs):.1f}-{max(r['ct'] for r in rs):.1f}) | {med('xt'):.2f} ({min(r['xt'] for r in rs):.2f}-{max(r['xt'] for r in rs):.2f}) |")
