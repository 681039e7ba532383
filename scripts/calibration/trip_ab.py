#!/usr/bin/env python3
"""A/B of the message latency's two forms on one `t3fs calibrate --concurrency` run.

Usage: trip_ab.py T3FS_BINARY CALIBRATE_OUT_DIR [ROUNDS]

Each round's profile (this-host-round-N.toml, which gives the measured round trip,
`nic_latency_trip`) is simulated twice per job: as written, and with the trip replaced by what
profiles gave before it existed, its halves' median and p99 drawn log-normal per message
(`nic_latency_us` = half the trip's median, `nic_latency_p99_us` = half its p99). Both are
judged against the same round's real run (real-JOB-N/summary.json), as calibrate judges them:
the median over rounds of sim / real - 1. Same inputs, same real runs: the difference is the
form alone. The scenario is calibrate's own (crosscheck/src/calibrate.rs, sim_scenario_text).
Standard library only; the simulator runs in a temporary directory.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

JOBS = [  # name, rw, block size, streams: calibrate/jobs.rs
    ("seq-write-1m", "write", 1 << 20, 1),
    ("seq-read-1m", "read", 1 << 20, 1),
    ("randread-4k", "randread", 4096, 1),
    ("seq-write-1m-x8", "write", 1 << 20, 8),
    ("seq-read-1m-x8", "read", 1 << 20, 8),
    ("randread-4k-x8", "randread", 4096, 8),
    ("randrw-1m-x8-r", "randrw", 1 << 20, 8),
    ("randrw-1m-x8-w", "randrw", 1 << 20, 8),
]


def side(name, rw):
    return "write" if rw == "write" or name.endswith("-w") else "read"


def chunks(rw, streams):
    return 64 * streams if rw == "write" else max(8, min(64, 512 // streams))


def quantile(points, p):
    for (p0, a), (p1, b) in zip(points, points[1:]):
        if p <= p1:
            return a + (b - a) * (p - p0) / (p1 - p0)
    return points[-1][1]


def hardware(path, form):
    lines = [l for l in open(path).read().splitlines() if not l.startswith("#")]
    if form == "trip":
        return "\n".join(lines) + "\n"
    out = []
    for line in lines:
        if line.startswith("nic_latency_trip"):
            pts = json.loads(line.split("=", 1)[1])
            out.append(f"nic_latency_us = {quantile(pts, 0.5) / 2}")
            out.append(f"nic_latency_p99_us = {quantile(pts, 0.99) / 2}")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def simulate(t3fs, work, job, profile, form):
    name, rw, bs, streams = job
    rf = {"write": 0.0, "randrw": 0.5}.get(rw, 1.0)
    text = (
        f'name = "calibrate-{name}"\nabout = "trip A/B"\nduration = "3s"\n\n'
        f"[cluster]\nmgmtd = 1\nstorage_nodes = 3\nreplicas = 3\nclients = {streams}\n\n"
        f"[workload]\nchunks = {chunks(rw, streams)}\nwrite_size = {bs}\nread_fraction = {rf}\n"
        f'think = "0us..1us"\nprefill = {"false" if rw == "write" else "true"}\n\n'
        f'[faults]\nnet_latency = "0us..1us"\n' + hardware(profile, form)
    )
    path = os.path.join(work, f"{name}-{form}.toml")
    with open(path, "w") as f:
        f.write(text)
    out = subprocess.run([t3fs, "sim", "run", path], capture_output=True, text=True, cwd=work)
    s = side(name, rw)
    m = re.search(s + r"s: ([\d.]+) ops/s, [\d.]+ MiB/s, p50 \d+ us, p99 (\d+) us", out.stdout)
    if not m:
        sys.exit(f"no {s} figures from the simulation of {path}:\n{out.stdout}{out.stderr}")
    return float(m.group(1)), float(m.group(2))


def real(out_dir, job, r):
    name, rw = job[0], job[1]
    v = json.load(open(os.path.join(out_dir, f"real-{name}-{r}", "summary.json")))
    k = v["jobs"][0][side(name, rw)]
    return k["iops"], k["clat_ns"]["percentile"]["99.000000"] / 1e3


def judge(t3fs, work, out_dir, rounds, forms):
    """Prints each job's median paired errors and each round's, for every form: `forms` is a
    list of (label, profile_of) where profile_of(round) gives (profile path, hardware form)."""
    width = max(7, *(len(label) for label, _ in forms))
    print(f"{'job':16} {'form':{width}} {'IOPS err':>9} {'p99 err':>9}  each round (IOPS / p99 %)")
    for job in JOBS:
        if not os.path.isdir(os.path.join(out_dir, f"real-{job[0]}-1")):
            continue
        for label, profile_of in forms:
            ei, ep = [], []
            for r in range(1, rounds + 1):
                si, sp = simulate(t3fs, work, job, *profile_of(r))
                ri, rp = real(out_dir, job, r)
                ei.append(si / ri - 1)
                ep.append(sp / rp - 1)
            each = " ".join(f"{a * 100:+.0f}/{b * 100:+.0f}" for a, b in zip(ei, ep))
            print(
                f"{job[0]:16} {label:{width}} {statistics.median(ei) * 100:+8.1f}% "
                f"{statistics.median(ep) * 100:+8.1f}%  {each}",
                flush=True,
            )


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    t3fs, out_dir = os.path.abspath(sys.argv[1]), sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3

    def as_run(form):
        return lambda r: (os.path.join(out_dir, f"this-host-round-{r}.toml"), form)

    with tempfile.TemporaryDirectory() as work:
        judge(t3fs, work, out_dir, rounds, [(f, as_run(f)) for f in ("halves", "trip")])


if __name__ == "__main__":
    main()
