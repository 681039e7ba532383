#!/usr/bin/env python3
"""A/B of the shared disk on one `t3fs calibrate --concurrency` run: FIFO against sharing.

Usage: shared_disk_ab.py T3FS_BINARY CALIBRATE_OUT_DIR [ROUNDS]

Each round's profile is simulated with the SSD's FIFO transfer queue (no `ssd_*_concurrency`)
and with the disk shared by what is in service (processor sharing, the keys as calibrate
derives them: crosscheck/src/calibrate_profile.rs, `Figures::concurrency`). A profile written
before the keys existed gets them computed from its own depth bandwidths and lone times; one
written with them is stripped for the FIFO side. Both are judged against the same round's real
run as calibrate judges them (trip_ab.py's scenario and figures). Standard library only.
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trip_ab as base  # noqa: E402

MIB = float(1 << 20)
KEYS = ("ssd_read_concurrency", "ssd_write_concurrency")


def concurrency(keys):
    """The two concurrencies from a profile's bandwidths at depth and its lone operations."""
    f = lambda k: float(keys[k])  # noqa: E731
    read = f("ssd_mb_s") / f("ssd_lone_mb_s")
    lone_update = MIB / (f("ssd_write_lone_mb_s") * 1e6) + 2 * f("ssd_sync_us") * 1e-6
    write = f("ssd_write_mb_s") * 1e6 / MIB * lone_update
    return read, write


def forms(path, work, r):
    """The round's profile without and with the shared disk: two paths, and the values."""
    text = open(path).read()
    keys = dict(re.findall(r"^(\w+) = (.*)$", text, re.M))
    lines = [l for l in text.splitlines()
             if not l.startswith("#") and l.split(" = ")[0] not in KEYS]
    if KEYS[0] in keys:
        c = (float(keys[KEYS[0]]), float(keys[KEYS[1]]))
    else:
        c = concurrency(keys)
    out = {}
    for form, extra in (("fifo", []), ("shared", [f"{k} = {v}" for k, v in zip(KEYS, c)])):
        q = os.path.join(work, f"{form}-{r}.toml")
        with open(q, "w") as f:
            f.write("\n".join(lines + extra) + "\n")
        out[form] = q
    return out, c


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    t3fs, out_dir = os.path.abspath(sys.argv[1]), sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    with tempfile.TemporaryDirectory() as work:
        profiles = {}
        for r in range(1, rounds + 1):
            profiles[r], c = forms(os.path.join(out_dir, f"this-host-round-{r}.toml"), work, r)
            print(f"round {r}: ssd_read_concurrency {c[0]:.2f}, ssd_write_concurrency {c[1]:.2f}")
        sides = [(f, lambda r, f=f: (profiles[r][f], "trip")) for f in ("fifo", "shared")]
        base.judge(t3fs, work, out_dir, rounds, sides)


if __name__ == "__main__":
    main()
