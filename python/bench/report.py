"""A report of the Python benchmarks of one run directory: a Markdown page with one bar chart
(SVG) per benchmark, each bar labelled with its figure, and each ratio the Python issue holds
the package to, next to its bound, as measured in that run.

    python bench/report.py RUN_DIR [--title "2-core host, 2026-11-27"]

RUN_DIR holds what the benchmarks wrote with --out (found at any depth): small-files*.json,
gpu-train.json, checkpoint.json, random-reads.json, readahead.json, listing.json; the report is
RUN_DIR/report.md with its charts beside it. Benchmarks missing from the directory are left
out of the report, and it says so.
"""

import argparse
import glob
import html
import json
import os

WIDTH, BAR, GAP, LABEL = 760, 22, 8, 290


def svg_bars(title, unit, bars):
    """Horizontal bars: (label, value, colour) each, scaled to the largest."""
    top = max(v for _, v, _ in bars) or 1.0
    height = 40 + len(bars) * (BAR + GAP)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="13">',
           f'<text x="8" y="20" font-weight="bold">{html.escape(title)}</text>']
    for i, (label, value, colour) in enumerate(bars):
        y = 34 + i * (BAR + GAP)
        w = max(1, int((WIDTH - LABEL - 150) * value / top))
        out.append(f'<text x="{LABEL - 8}" y="{y + 16}" text-anchor="end">{html.escape(label)}</text>')
        out.append(f'<rect x="{LABEL}" y="{y}" width="{w}" height="{BAR}" fill="{colour}"/>')
        out.append(f'<text x="{LABEL + w + 6}" y="{y + 16}">{value:,.0f} {html.escape(unit)}</text>')
    out.append("</svg>")
    return "\n".join(out)


T3FS, PEER, BOUND = "#2f6db5", "#9a9a9a", "#d08c2c"


def colour(label):
    if "bound" in label or "native" in label:
        return BOUND
    return T3FS if "t3fs" in label or "window" in label or "ls" in label or "find" in label else PEER


def load(run, name):
    found = sorted(glob.glob(os.path.join(run, "**", name), recursive=True))
    return [(p, json.load(open(p))) for p in found]


def sections(run):
    for path, d in load(run, "small-files*.json"):
        bars = [(k, v, colour(k)) for k, v in d["samples_per_s"].items()]
        ratios = [f"t3fs / local directory = {d['t3fs_over_local']:.2f} (bound >= 0.5)"]
        if d.get("t3fs_over_fuse") is not None:
            ratios.insert(0, f"t3fs / FUSE = {d['t3fs_over_fuse']:.2f} (bound >= 3)")
        yield (f"DataLoader epoch, {d['files']:,} files of {d['size']:,} B", "samples/s", bars, ratios, path)
    for path, d in load(run, "gpu-train.json"):
        bars = [(k, r["samples_per_s"], colour(k)) for k, r in d["results"].items()]
        ratios = [f"{k}: accelerator busy {100 * r['accelerator_busy']:.1f}% (data wait {r['data_wait_s']:.2f} s, "
                  f"compute {r['compute_s']:.2f} s; {r['model']})" for k, r in d["results"].items()]
        yield (f"Training loop on {d['device']}, {d['files']:,} x {d['size']:,} B, batch {d['batch']}",
               "samples/s", bars, ratios, path)
    for path, d in load(run, "checkpoint.json"):
        bars = [("native write bound", d["native_write"], BOUND), ("native read bound", d["native_read"], BOUND)]
        bars += [(k, v, T3FS) for k, v in d["rates"].items()]
        bars += [(f"{k} (torch alone)", v, PEER) for k, v in d.get("torch_in_memory", {}).items()]
        ratios = [f"{k}: {v / (d['native_write'] if 'save' in k else d['native_read']):.2f} of its bound (>= 0.8)"
                  for k, v in d["rates"].items()]
        yield (f"Checkpoint of {d['mib']:,} MiB", "MiB/s", bars, ratios, path)
    for path, d in load(run, "random-reads.json"):
        r = d["results"]
        bars = [(k, v, colour(k)) for k, v in r.items() if not k.startswith("ttfb")]
        ratios = [f"time to first byte: t3fs {r['ttfb t3fs'] * 1e3:.2f} ms, FUSE {r['ttfb FUSE'] * 1e3:.2f} ms"]
        yield (f"Random {d['block'] // 1024} KiB reads of a {d['mib']} MiB file", "reads/s", bars, ratios, path)
    for path, d in load(run, "readahead.json"):
        med = {k: sorted(v)[len(v) // 2] for k, v in d["rates"].items()}
        bars = [(k, v, colour(k)) for k, v in med.items()]
        yield (f"Readahead windows, {d['cpus']} CPUs (medians)", "MiB/s", bars, [], path)
    for path, d in load(run, "listing.json"):
        bars = [(k, v, colour(k)) for k, v in d["entries_per_s"].items()]
        yield (f"Listing one directory of {d['files']:,} entries", "entries/s", bars,
               [f"made at {d['creates_per_s']:,.0f} creates/s (8 threads)"], path)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("run")
    a.add_argument("--title", default=None)
    o = a.parse_args()
    lines = [f"# Python benchmarks: {o.title or os.path.basename(os.path.abspath(o.run))}", ""]
    n = 0
    for title, unit, bars, ratios, path in sections(o.run):
        n += 1
        name = f"chart-{n}.svg"
        with open(os.path.join(o.run, name), "w") as f:
            f.write(svg_bars(title, unit, bars))
        lines += [f"## {title}", "", f"![{title}]({name})", ""]
        lines += [f"- {r}" for r in ratios]
        lines += [f"- data: `{os.path.relpath(path, o.run)}`", ""]
    if n == 0:
        raise SystemExit(f"no benchmark results under {o.run}")
    with open(os.path.join(o.run, "report.md"), "w") as f:
        f.write("\n".join(lines))
    print(f"{n} charts: {os.path.join(o.run, 'report.md')}")


if __name__ == "__main__":
    main()
