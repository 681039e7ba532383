"""Sequential reads through `T3fsFile` with prefetch windows of 1 to 4 blocks (no fsspec cache
above the window, the default) against fsspec's block cache alone (window 0), and
`torch.load` through a checkpoint reader with windows of 0 to 2 blocks: which window pays on
this host. Rounds interleave the variants, so drift of a shared host spreads over all of them;
the figure is the median of the rounds.

    python bench/readahead.py --cluster DIR --mib 256 --rounds 3 --out runs/readahead

A window overlaps the cluster's work with the reader's; where the cluster's processes share
the reader's cores (a loopback cluster on a small host), there is nothing to overlap and the
extra reads in flight only add work.
"""

import argparse
import json
import os
import statistics
import time

import torch

from t3fs.fs import T3fsFileSystem


def seq_read(fs, path, window, read_size):
    with fs.open(path, "rb", readahead=window) as f:
        while f.read(read_size):
            pass


def ckpt_load(fs, path, window, block):
    with fs.open(path, "rb", cache_type="none", readahead=window, block_size=block) as f:
        torch.load(f, weights_only=True)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--cluster", required=True)
    a.add_argument("--mib", type=int, default=256)
    a.add_argument("--rounds", type=int, default=3)
    a.add_argument("--out", default=None)
    o = a.parse_args()

    fs = T3fsFileSystem(cluster=o.cluster)
    root = f"/bench-readahead-{os.getpid()}"
    fs.pipe_file(f"{root}/seq.bin", os.urandom(o.mib * 2**20))
    state = {f"t{i}": torch.randn(16 * 2**20) for i in range(max(1, o.mib // 64))}
    ckpt_mib = len(state) * 64
    with fs.open(f"{root}/model.pt", "wb", block_size=32 * 2**20) as f:
        torch.save(state, f)
    variants = {}
    for w in (0, 1, 2, 4):
        for rs in (64 * 1024, 2**20):
            name = f"window {w} x 4 MiB" if w else "fsspec's block cache alone"
            variants[f"read {rs // 1024} KiB, {name}"] = (o.mib, seq_read, f"{root}/seq.bin", w, rs)
    for w in (0, 1, 2):
        for b in (16, 32):
            variants[f"torch.load, window {w} x {b} MiB"] = (ckpt_mib, ckpt_load, f"{root}/model.pt", w, b * 2**20)
    rates = {k: [] for k in variants}
    try:
        for _ in range(o.rounds):
            for k, (mib, f, *args) in variants.items():
                start = time.perf_counter()
                f(fs, *args)
                rates[k].append(mib / (time.perf_counter() - start))
    finally:
        fs.rm(root, recursive=True)
    print(f"{o.mib} MiB file, checkpoint {ckpt_mib} MiB, {o.rounds} rounds, {os.cpu_count()} CPUs")
    for k, v in rates.items():
        print(f"  {k:44} {statistics.median(v):8.0f} MiB/s  rounds {[round(x) for x in v]}")
    if o.out:
        os.makedirs(o.out, exist_ok=True)
        with open(os.path.join(o.out, "readahead.json"), "w") as f:
            json.dump({"mib": o.mib, "cpus": os.cpu_count(), "rates": rates}, f, indent=2)


if __name__ == "__main__":
    main()
