#!/usr/bin/env python3
"""Hop by hop: where a depth-1 chunk write or read spends its time, real beside simulated.

Usage: hops.py HOP_LOG_DIR [SIM_LOG]

HOP_LOG_DIR holds the `*.hops` files a loopback cluster and `t3fs bench io` wrote with
`T3FS_HOP_LOG=DIR` in their environment (services/src/node/hops.rs); SIM_LOG is the output of
`t3fs sim run --log` of the same job (calibrate's scenario, as trip_ab.py writes it). Both
have lines `SECONDS NODE WHAT`. One request at a time is assumed (depth 1, one stream): a
request starts when a storage node receives the client's `Write` (or `Read`) and ends when the
client receives the answer. Every hop is given from the start of its request, as the median
and the 90th percentile over requests (and over the slowest 2% of the real ones, "slow",
where there are 100 or more: which hop a tail is in); roles come from the messages (the head
receives the client's write, the middle the head's forward, the tail the middle's). Standard
library only.
"""
import glob
import os
import re
import statistics
import sys

LINE = re.compile(r"^\s*([\d.]+) (\S+)\s+(.*?)(?: \| .*)?$")
RECV = re.compile(r"recv from (\S+): (\w+)")
DISK = re.compile(r"disk \S+ done: (chunk_\w+)")
# The messages of a chunk write or read; the rest (heartbeats, routing) are not its hops.
HOPS = {"Write", "Update", "UpdateReply", "Read", "ReadReply"}


def events(lines):
    """(time, node, what) of every line that is a message or a chunk completion."""
    out = []
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        t, node, what = float(m.group(1)), m.group(2), m.group(3)
        r, d = RECV.match(what), DISK.match(what)
        if r and r.group(2) in HOPS:
            out.append((t, node, r.group(2)))
        elif d:
            out.append((t, node, d.group(1)))
    out.sort(key=lambda e: e[0])
    return out


def requests(evs):
    """Each request's hops: {label: seconds from its start}, labels by role."""
    found, cur, roles = [], None, {}
    for t, node, what in evs:
        if what in ("Write", "Read") and not node.startswith("client"):
            cur, roles = {"start": t, "kind": what}, {node: "head"}
            continue
        if cur is None:
            continue
        if what == "Update" and node not in roles:
            roles[node] = "middle" if len(roles) == 1 else "tail"
        if what in ("UpdateReply", "ReadReply") and node.startswith("client"):
            cur["client answered"] = t - cur["start"]
            found.append(cur)
            cur = None
            continue
        role = roles.get(node)
        if role is None:
            continue
        label = f"{role} {'received ' if what[0].isupper() else ''}{what}"
        cur.setdefault(label, t - cur["start"])
    return found


def path(reqs):
    """The requests that took the common path: every hop at least half of them took. The
    others (a retry, a stray reply) are left out, so every hop's figures come from the same
    requests and a hop that always follows another has the later median."""
    seen = {}
    for r in reqs:
        for k in r:
            seen[k] = seen.get(k, 0) + 1
    common = {k for k, n in seen.items() if n * 2 >= len(reqs)} - {"start", "kind"}
    return [r for r in reqs if common <= r.keys()], common


def summary(reqs, labels):
    """Each hop's median, 90th percentile and count over `reqs`."""
    out = {}
    for k in labels:
        v = sorted(r[k] for r in reqs if k in r)
        if v:
            out[k] = (statistics.median(v), v[int(len(v) * 0.9)], len(v))
    return out


def table(kind, sides):
    """The hops of requests of `kind` (`Write`, `Read`), one column pair per side."""
    cols = []
    for name, reqs in sides:
        mine = [r for r in reqs if r["kind"] == kind]
        kept, labels = path(mine)
        cols.append((name, summary(kept, labels), len(kept), len(mine) - len(kept)))
    first = cols[0][1]
    if not first:
        return
    counts = ", ".join(f"{name} {n}" + (f" (+{odd} off the path)" if odd else "")
                       for name, _, n, odd in cols)
    print(f"{kind} (us from the head receiving it; requests: {counts})")
    print(f"{'hop':34}" + "".join(f" {c[0] + ' p50':>9} {c[0] + ' p90':>9}" for c in cols))
    for k in sorted(first, key=lambda k: first[k][0]):
        row = f"{k:34}"
        for _, s, _, _ in cols:
            p50, p90, _ = s.get(k, (float("nan"),) * 3)
            row += f" {p50 * 1e6:9.0f} {p90 * 1e6:9.0f}"
        print(row)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    real_lines = []
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.hops"))):
        with open(path) as f:
            real_lines += f.read().splitlines()
    real = requests(events(real_lines))
    sides = [("real", real)]
    # The slowest 2% of the real requests by their answer: which hop their tail is in.
    answered = sorted(r.get("client answered", 0) for r in real)
    if len(answered) >= 100:
        cut = answered[int(len(answered) * 0.98)]
        sides.append(("slow", [r for r in real if r.get("client answered", 0) >= cut]))
    if len(sys.argv) > 2:
        with open(sys.argv[2]) as f:
            sides.append(("sim", requests(events(f.read().splitlines()))))
    if not sides[0][1]:
        sys.exit(f"no whole request in {sys.argv[1]}: were the cluster and the client run "
                 "with T3FS_HOP_LOG set?")
    for kind in ("Write", "Read"):
        table(kind, sides)


if __name__ == "__main__":
    main()
