#!/usr/bin/env python3
"""A/B of two builds of the simulator on one `t3fs calibrate --concurrency` run.

Usage: model_ab.py T3FS_A T3FS_B CALIBRATE_OUT_DIR [ROUNDS]

Each round's profile (this-host-round-N.toml) is simulated per job by both binaries, as written,
and judged against the same round's real run (real-JOB-N/summary.json) as calibrate judges it:
the median over rounds of sim / real - 1. Same profile, same real runs: the difference is the
model change between the two builds alone (for example the flush barrier of
sim/src/world/resources/sharing.rs). Scenario and figures are trip_ab.py's. Standard library only.
"""
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trip_ab as base  # noqa: E402


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    builds = [os.path.abspath(b) for b in sys.argv[1:3]]
    out_dir = sys.argv[3]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    print(f"A = {builds[0]}\nB = {builds[1]}")
    print(f"{'job':16} {'build':5} {'IOPS err':>9} {'p99 err':>9}  each round (IOPS / p99 %)")
    with tempfile.TemporaryDirectory() as work:
        for job in base.JOBS:
            if not os.path.isdir(os.path.join(out_dir, f"real-{job[0]}-1")):
                continue
            for label, t3fs in zip("AB", builds):
                ei, ep = [], []
                for r in range(1, rounds + 1):
                    profile = os.path.join(out_dir, f"this-host-round-{r}.toml")
                    si, sp = base.simulate(t3fs, work, job, profile, "trip")
                    ri, rp = base.real(out_dir, job, r)
                    ei.append(si / ri - 1)
                    ep.append(sp / rp - 1)
                each = " ".join(f"{a * 100:+.0f}/{b * 100:+.0f}" for a, b in zip(ei, ep))
                print(f"{job[0]:16} {label:5} {statistics.median(ei) * 100:+8.1f}% "
                      f"{statistics.median(ep) * 100:+8.1f}%  {each}", flush=True)


if __name__ == "__main__":
    main()
