"""One SVG bar chart of the peers table (read from stdin, one `SYSTEM v1 v2 ...` line per
system): a group of bars per figure, each bar that system's value as a share of the best one,
labelled with the value. No plotting library: plain SVG text."""
import sys

FIGS = ["seq write MiB/s", "seq read MiB/s", "4k randread IOPS", "create/s", "stat/s",
        "rename/s", "unlink/s", "create/s x8", "stat/s x8", "rename/s x8", "unlink/s x8"]
COLORS = ["#1f77b4", "#6baed6", "#ff7f0e", "#2ca02c", "#d62728"]
rows = [l.split() for l in sys.stdin if l.strip()]
names = [r[0] for r in rows]
vals = [[float(x) for x in r[1:]] for r in rows]
W, H, top, base = 120, 220, 40, 260
bw = (W - 20) / max(len(rows), 1)
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{len(FIGS) * W + 40}" height="{base + 70}" '
       'font-family="sans-serif" font-size="10">',
       '<text x="10" y="20" font-size="13">t3fs and its peers, 3 replicas on one host '
       '(bar: share of the best system; label: value)</text>']
for f, fig in enumerate(FIGS):
    best = max(v[f] for v in vals) or 1
    x0 = 20 + f * W
    for s, v in enumerate(vals):
        h = H * v[f] / best
        x = x0 + s * bw
        out.append(f'<rect x="{x:.1f}" y="{base - h:.1f}" width="{bw - 3:.1f}" height="{h:.1f}" '
                   f'fill="{COLORS[s % len(COLORS)]}"/>')
        out.append(f'<text x="{x + (bw - 3) / 2:.1f}" y="{base - h - 3:.1f}" text-anchor="middle" '
                   f'font-size="8">{v[f]:g}</text>')
    out.append(f'<text x="{x0 + (W - 20) / 2:.1f}" y="{base + 14}" text-anchor="middle">{fig}</text>')
for s, n in enumerate(names):
    out.append(f'<rect x="{20 + s * 110}" y="{base + 30}" width="10" height="10" '
               f'fill="{COLORS[s % len(COLORS)]}"/><text x="{34 + s * 110}" y="{base + 39}">{n}</text>')
out.append('</svg>')
print("\n".join(out))
