"""Listing a prefix of many files: `ls(detail=True)` of one directory of N entries (names in
8,192-entry pages, then their stats 64 per request with 16 requests in flight) and the same
listing through a FUSE mount with `os.scandir` + `stat` in the same run when the host can mount.

    python bench/listing.py --cluster DIR --t3fs-bin target/release/t3fs --files 100000

Entries per second of each; the files are empty (made by 8 threads, not timed as listing).
"""

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from mount import mount, unmount
from t3fs.fs import T3fsFileSystem


def timed(f):
    start = time.perf_counter()
    out = f()
    return out, time.perf_counter() - start


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--cluster", required=True)
    a.add_argument("--t3fs-bin", required=True)
    a.add_argument("--files", type=int, default=100_000)
    a.add_argument("--out", default=None)
    o = a.parse_args()

    fs = T3fsFileSystem(cluster=o.cluster)
    root = f"/bench-list-{os.getpid()}"
    fs.makedirs(root, exist_ok=True)
    print(f"making {o.files} files in {root}", file=sys.stderr)
    _, made = timed(lambda: list(ThreadPoolExecutor(8).map(
        lambda i: fs.client.open(f"{root}/f{i:07}", "x").close(0), range(o.files))))
    mnt = tempfile.mkdtemp(prefix="t3fs-list-mnt-")
    proc = mount(o.t3fs_bin, o.cluster, mnt)
    rates = {}
    try:
        names, t = timed(lambda: fs.ls(root, detail=True))
        assert len(names) == o.files, f"ls listed {len(names)} of {o.files}"
        rates["ls(detail=True)"] = o.files / t
        entries, t = timed(lambda: fs.find(root, detail=True))
        assert len(entries) == o.files, f"find listed {len(entries)} of {o.files}"
        rates["find(detail=True)"] = o.files / t
        if proc is not None:
            def scan():
                return [e.stat().st_size for e in os.scandir(f"{mnt}{root}")]
            sizes, t = timed(scan)
            assert len(sizes) == o.files
            rates["FUSE scandir + stat"] = o.files / t
    finally:
        unmount(proc, mnt)
        os.rmdir(mnt)
        fs.rm(root, recursive=True)
    print(f"{o.files} entries in one directory ({o.files / made:.0f} creates/s with 8 threads), {os.cpu_count()} CPUs")
    for k, r in rates.items():
        print(f"  {k:22} {r:10.0f} entries/s  ({o.files / r:6.2f} s)")
    if o.out:
        os.makedirs(o.out, exist_ok=True)
        with open(os.path.join(o.out, "listing.json"), "w") as f:
            json.dump({"files": o.files, "entries_per_s": rates, "creates_per_s": o.files / made}, f, indent=2)


if __name__ == "__main__":
    main()
