"""A DataLoader epoch over many small files, three ways in one run: (a) the t3fs dataset
(`t3fs.torch.T3fsMapDataset`, a batch per call), (b) the same files through a FUSE mount of the
cluster with plain `open()`, (c) a local directory. Samples per second of each, and the ratios
the Python issue holds the dataset to (a/b >= 3, a/c >= 0.5).

    python bench/small_files.py --cluster DIR --t3fs-bin target/release/t3fs \
        --files 20000 --size 102400 --out runs/small-files

It starts the FUSE mount itself (and unmounts it, pass or fail); the local copy goes under
--local (default: a temporary directory). Local files were just written, so they are read from
the page cache; the mount's were written through the native client, so its page cache starts
cold. This host is shared and noisy: compare figures of one run only.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import torch
from torch.utils.data import DataLoader

import samples
from mount import mount, unmount
from t3fs.fs import T3fsFileSystem
from t3fs.torch import T3fsMapDataset


def _length(sample):
    """Every path's transform here: (path, bytes) -> the sample's length."""
    return len(sample[1])


def epoch(ds, batch, workers):
    loader = DataLoader(ds, batch_size=batch, num_workers=workers, collate_fn=list)
    start = time.perf_counter()
    n = sum(len(b) for b in loader)
    return n, time.perf_counter() - start


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--cluster", required=True)
    a.add_argument("--t3fs-bin", required=True)
    a.add_argument("--files", type=int, default=2000)
    a.add_argument("--size", type=int, default=100 * 1024)
    a.add_argument("--batch", type=int, default=64)
    a.add_argument("--workers", type=int, default=2)
    a.add_argument("--local", default=None)
    a.add_argument("--out", default=None)
    o = a.parse_args()

    fs = T3fsFileSystem(cluster=o.cluster)
    root = f"/bench-small-{os.getpid()}"
    local = o.local or tempfile.mkdtemp(prefix="t3fs-bench-local-")
    data = os.urandom(o.size)
    names = samples.names(o.files)
    print(f"writing {o.files} files of {o.size} bytes to t3fs and to {local}", file=sys.stderr)
    samples.write(fs, root, local, names, lambda _: data)

    mnt = tempfile.mkdtemp(prefix="t3fs-bench-mnt-")
    proc = mount(o.t3fs_bin, o.cluster, mnt)
    try:
        # Every path hands the main process the sample's length, not its bytes: the workers
        # read whole samples either way, and no path pays for shipping them across processes.
        ds = T3fsMapDataset.from_paths([f"{root}/{n}" for n in names], transform=_length, fs=fs)
        results = {"t3fs dataset": epoch(ds, o.batch, o.workers)}
        if proc is not None:
            results["FUSE mount, open()"] = epoch(samples.LocalFiles([f"{mnt}{root}/{n}" for n in names], _length), o.batch, o.workers)
        results["local directory, open()"] = epoch(samples.LocalFiles([f"{local}/{n}" for n in names], _length), o.batch, o.workers)
    finally:
        unmount(proc, mnt)
        os.rmdir(mnt)
        fs.rm(root, recursive=True)
        if o.local is None:
            shutil.rmtree(local)

    rate = {k: n / s for k, (n, s) in results.items()}
    fuse = rate.get("FUSE mount, open()")
    a_b = rate["t3fs dataset"] / fuse if fuse else None
    a_c = rate["t3fs dataset"] / rate["local directory, open()"]
    print(f"{o.files} files x {o.size} B, batch {o.batch}, {o.workers} workers, {os.cpu_count()} CPUs, torch {torch.__version__}")
    for k, r in rate.items():
        print(f"  {k:26} {r:10.0f} samples/s  {r * o.size / 2**20:8.1f} MiB/s")
    if a_b is None:
        print("  t3fs / FUSE  : not measured (this host cannot mount)")
    else:
        print(f"  t3fs / FUSE  = {a_b:.2f} (bound >= 3)")
    print(f"  t3fs / local = {a_c:.2f} (bound >= 0.5)")
    if o.out:
        os.makedirs(o.out, exist_ok=True)
        with open(os.path.join(o.out, "small-files.json"), "w") as f:
            json.dump({"files": o.files, "size": o.size, "samples_per_s": rate,
                       "t3fs_over_fuse": a_b, "t3fs_over_local": a_c}, f, indent=2)


if __name__ == "__main__":
    main()
