#!/usr/bin/env python3
"""A/B of the store's own CPU on its path, on one `t3fs calibrate --concurrency` run.

Usage: store_cpu_ab.py T3FS_BINARY CALIBRATE_OUT_DIR [ROUNDS]

Each round's profile, written before `cpu_store_*` existed, is simulated as written and with
the store's own CPU moved onto the path: `cpu_store_*` from the store-alone CPU that its
`cpu_overlap_*` comment records, and `cpu_overlap_*` recomputed without it (the derivation of
crosscheck/src/calibrate_profile.rs: store_cpu and beside_path). Both are judged against the
same round's real run as calibrate judges them (trip_ab.py's scenario and figures). Standard
library only.
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trip_ab as base  # noqa: E402

MIB = float(1 << 20)
LOAD = (r"(\d+) 4 KiB reads ([\d.]+) us each, (\d+) 1 MiB reads ([\d.]+) us each, "
        r"(\d+) 1 MiB writes on (\d+) replicas ([\d.]+) us each")
STORE = (r"spends (\d+) us of CPU on a 4 KiB read, (\d+) us on a 1 MiB read, "
         r"(\d+) us on a 1 MiB update and (\d+) us on a commit")


def moved(path):
    """The profile at `path` with the store's own CPU on the path, and the new keys."""
    text = open(path).read()
    load, store = re.search(LOAD, text), re.search(STORE, text)
    r4k, r1m, w1m = (float(load.group(i)) * 1e-6 for i in (2, 4, 7))
    replicas = float(load.group(6))
    s4k, s1m, update, commit = (float(store.group(i)) * 1e-6 for i in (1, 2, 3, 4))
    keys = dict(re.findall(r"^(\w+) = (.*)$", text, re.M))
    msg, on_path = float(keys["cpu_request_us"]) * 1e-6, float(keys["cpu_byte_ns"])
    read_b = max((s1m - s4k) * 1e9 / (MIB - 4096), 0.0)
    read_f = max(s4k - 4096 * read_b / 1e9, 0.0)
    write_f, write_b = commit, max((update - commit) * 1e9 / MIB, 0.0)

    def own(b, write):
        return write_f + b * write_b / 1e9 if write else read_f + b * read_b / 1e9

    r4k -= own(4096, False)
    r1m -= own(MIB, False)
    w1m -= replicas * (own(MIB, True) + own(0, True))
    beside_read = max((r1m - r4k) * 1e9 / (MIB - 4096) - on_path, 0.0)
    per_msg = max((r4k - (2 * msg + 4096 * (on_path + beside_read) / 1e9)) / 2, 0.0)
    messages = 2 * replicas * (msg + per_msg)
    beside_write = max((w1m - messages) * 1e9 / (replicas * MIB) - on_path, 0.0)
    new = {
        "cpu_overlap_us": per_msg * 1e6,
        "cpu_overlap_read_byte_ns": beside_read,
        "cpu_overlap_write_byte_ns": beside_write,
        "cpu_store_read_us": read_f * 1e6,
        "cpu_store_read_byte_ns": read_b,
        "cpu_store_write_us": write_f * 1e6,
        "cpu_store_write_byte_ns": write_b,
    }
    kept = [l for l in text.splitlines()
            if not l.startswith("#") and l.split(" = ")[0] not in new]
    return "\n".join(kept + [f"{k} = {v}" for k, v in new.items()]) + "\n", new


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    t3fs, out_dir = os.path.abspath(sys.argv[1]), sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    with tempfile.TemporaryDirectory() as work:
        profiles = {}
        for r in range(1, rounds + 1):
            p = os.path.join(out_dir, f"this-host-round-{r}.toml")
            text, new = moved(p)
            q = os.path.join(work, f"moved-{r}.toml")
            with open(q, "w") as f:
                f.write(text)
            profiles[r] = {"as-run": p, "store-cpu": q}
            print(f"round {r}: " + ", ".join(f"{k} {v:.3f}" for k, v in new.items()))
        forms = [(f, lambda r, f=f: (profiles[r][f], "trip")) for f in ("as-run", "store-cpu")]
        base.judge(t3fs, work, out_dir, rounds, forms)


if __name__ == "__main__":
    main()
