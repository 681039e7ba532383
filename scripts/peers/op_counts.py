#!/usr/bin/env python3
"""What one metadata operation through a t3fs mount costs on the cluster, counted.

usage: op_counts.py MOUNT_DIR FILES CLUSTER_DIR

Runs the mdtest-style phases (create with open O_CREAT and close, stat, rename, unlink, then
"write": a new file with 4 KiB written, mdtest -w 4096) one operation at a time over FILES
files in a new directory under MOUNT_DIR, and around each phase
reads meta-0's and the kv service's metrics endpoints (their addresses from CLUSTER_DIR's
node.toml files). Prints, per phase, operations per second and each counter's change per
operation: meta.answered (requests), meta.kv_reads, kv_commit, frames_in. Counts include what
trails the phase (release sends closes after close(2) returns): each phase waits 0.3 s after
its last operation before reading.

What it does not do: several ranks (meta.py does), or attribute a count to a kernel request.
"""

import os
import re
import sys
import time
import urllib.request

WANT = re.compile(r'meta\.answered|meta\.kv_reads|op="kv_commit"|op="kv_read"|frames_in')


def endpoint(cluster, node):
    with open(os.path.join(cluster, node, "node.toml")) as f:
        for line in f:
            if line.startswith("metrics"):
                return line.split('"')[1]
    raise SystemExit(f"{node}: no metrics address in its node.toml")


def counters(addrs):
    out = {}
    for part, addr in addrs.items():
        text = urllib.request.urlopen(f"http://{addr}/metrics", timeout=5).read().decode()
        for line in text.splitlines():
            if line.startswith("#") or "quantile" in line or not WANT.search(line):
                continue
            if "_sum" in line:
                continue
            key, value = line.rsplit(" ", 1)
            out[part + ":" + key.split("{")[-1].rstrip("}")] = float(value)
    return out


def write4k(p):
    fd = os.open(p + ".w", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.write(fd, b"x" * 4096)
    os.close(fd)


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    mnt, n, cluster = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    addrs = {"meta": endpoint(cluster, "meta-0"), "kv": endpoint(cluster, "kv")}
    d = os.path.join(mnt, f"counts{os.getpid()}")
    os.mkdir(d)
    paths = [os.path.join(d, f"f{i}") for i in range(n)]
    phases = {
        "create": lambda p: os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)),
        "stat": os.stat,
        "rename": lambda p: os.rename(p, p + ".r"),
        "unlink": lambda p: os.unlink(p + ".r"),
        "write": write4k,
    }
    for name, op in phases.items():
        before, t = counters(addrs), time.time()
        for p in paths:
            op(p)
        rate = n / (time.time() - t)
        time.sleep(0.3)
        after = counters(addrs)
        per = {k: (v - before.get(k, 0)) / n for k, v in after.items() if v != before.get(k, 0)}
        print(f"{name}: {rate:.0f}/s", " ".join(f"{k}={v:.2f}" for k, v in sorted(per.items())))
    for p in paths:
        os.unlink(p + ".w")
    os.rmdir(d)


if __name__ == "__main__":
    main()
