"""Time to first byte and random 64 KiB reads of one large file, two ways in one run: (a) the
t3fs package (open, then `File.read` at random offsets; and `cat_ranges` with all offsets in one
call), (b) the same file through a FUSE mount of the cluster with `os.pread`.

    python bench/random_reads.py --cluster DIR --t3fs-bin target/release/t3fs --mib 256

The mount is started and unmounted here, pass or fail; the file is written through the native
client, so the mount's page cache starts cold (offsets repeat rarely: 1,000 draws over 4,096
blocks). This host is shared and noisy: compare figures of one run only.
"""

import argparse
import json
import os
import random
import statistics
import tempfile
import time

from t3fs.fs import T3fsFileSystem

from mount import mount, unmount

BLOCK = 64 * 1024


def ttfb(open_first, rounds=20):
    """Median seconds from open to the first 64 KiB."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        open_first()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--cluster", required=True)
    a.add_argument("--t3fs-bin", required=True)
    a.add_argument("--mib", type=int, default=256)
    a.add_argument("--reads", type=int, default=1000)
    a.add_argument("--out", default=None)
    o = a.parse_args()

    fs = T3fsFileSystem(cluster=o.cluster)
    path = f"/bench-random-{os.getpid()}.bin"
    size = o.mib * 2**20
    with fs.open(path, "wb", block_size=32 * 2**20) as f:
        for _ in range(o.mib // 4):
            f.write(os.urandom(4 * 2**20))
    rng = random.Random(1)
    offsets = [rng.randrange(size // BLOCK) * BLOCK for _ in range(o.reads)]
    mnt = tempfile.mkdtemp(prefix="t3fs-bench-mnt-")
    proc = mount(o.t3fs_bin, o.cluster, mnt)
    if proc is None:
        os.rmdir(mnt)
        raise SystemExit("random_reads.py compares with the FUSE mount: this host cannot mount")
    try:
        def native_first():
            f = fs.client.open(path, "r")
            f.read(0, BLOCK)
            f.close()

        def fuse_first():
            fd = os.open(mnt + path, os.O_RDONLY)
            os.pread(fd, BLOCK, 0)
            os.close(fd)

        res = {"ttfb t3fs": ttfb(native_first), "ttfb FUSE": ttfb(fuse_first)}
        f = fs.client.open(path, "r")
        start = time.perf_counter()
        for off in offsets:
            f.read(off, BLOCK)
        res["random t3fs (one at a time)"] = o.reads / (time.perf_counter() - start)
        start = time.perf_counter()
        fs.cat_ranges([path] * len(offsets), offsets, [x + BLOCK for x in offsets])
        res["random t3fs (cat_ranges, one call)"] = o.reads / (time.perf_counter() - start)
        f.close()
        fd = os.open(mnt + path, os.O_RDONLY)
        start = time.perf_counter()
        for off in offsets:
            os.pread(fd, BLOCK, off)
        res["random FUSE (pread, one at a time)"] = o.reads / (time.perf_counter() - start)
        os.close(fd)
    finally:
        unmount(proc, mnt)
        os.rmdir(mnt)
        fs.rm(path)
    print(f"{o.mib} MiB file, {o.reads} random 64 KiB reads")
    print(f"  time to first byte: t3fs {res['ttfb t3fs'] * 1e3:.2f} ms, FUSE {res['ttfb FUSE'] * 1e3:.2f} ms (median of 20)")
    for k in ("random t3fs (one at a time)", "random t3fs (cat_ranges, one call)", "random FUSE (pread, one at a time)"):
        print(f"  {k:36} {res[k]:8.0f} reads/s  {res[k] * BLOCK / 2**20:7.1f} MiB/s")
    if o.out:
        os.makedirs(o.out, exist_ok=True)
        with open(os.path.join(o.out, "random-reads.json"), "w") as f:
            json.dump({"mib": o.mib, "reads": o.reads, "block": BLOCK, "results": res}, f, indent=2)


if __name__ == "__main__":
    main()
