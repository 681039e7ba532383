"""Checkpoint save and load of a state dict through `t3fs.torch.T3fsCheckpoint` (torch.save into
the writer, torch.load from the reader) and through torch.distributed.checkpoint
(`T3fsStorageWriter`/`Reader`), against the native client's own write and read throughput
measured in the same run (`t3fs cluster io --mib N --depth D`, 1 MiB pieces).

    python bench/checkpoint.py --cluster DIR --t3fs-bin target/release/t3fs --mib 1024

Figures are MiB of tensor bytes per second; the ratios are to the native bounds of the run.
torch.save into and torch.load from memory (no storage at all) are measured too: the most any
storage could give through torch on this host.
"""

import argparse
import io
import json
import os
import re
import subprocess
import time

import torch
import torch.distributed.checkpoint as dcp

from t3fs.fs import T3fsFileSystem
from t3fs.torch import T3fsCheckpoint, T3fsStorageReader, T3fsStorageWriter


def native_bounds(t3fs_bin, cluster, mib, depth):
    out = subprocess.run(
        [t3fs_bin, "cluster", "io", "--dir", cluster, "--mib", str(mib), "--depth", str(depth)],
        check=True, capture_output=True, text=True, timeout=600,
    ).stdout
    rates = [float(x) for x in re.findall(r"([0-9.]+) MiB/s", out)]
    if len(rates) < 2:
        raise SystemExit(f"could not read `cluster io`'s figures from: {out}")
    return rates[0], rates[1], out.strip()


def timed(f):
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--cluster", required=True)
    a.add_argument("--t3fs-bin", required=True)
    a.add_argument("--mib", type=int, default=512)
    a.add_argument("--depth", type=int, default=1)
    a.add_argument("--out", default=None)
    o = a.parse_args()

    fs = T3fsFileSystem(cluster=o.cluster)
    root = f"/bench-ckpt-{os.getpid()}"
    tensors = max(1, o.mib // 64)
    state = {f"layer{i}": torch.randn(64 * 2**20 // 4) for i in range(tensors)}
    mib = tensors * 64
    ckpt = T3fsCheckpoint(fs=fs)
    rates, host = {}, {}
    try:
        def save():
            with ckpt.writer(f"{root}/model.pt") as f:
                torch.save(state, f)

        def load():
            with ckpt.reader(f"{root}/model.pt") as f:
                torch.load(f, weights_only=True)

        rates["torch.save -> writer"] = mib / timed(save)
        rates["reader -> torch.load"] = mib / timed(load)
        # What torch itself costs, with no storage at all: save into and load from memory.
        buf = io.BytesIO()
        host["torch.save -> memory"] = mib / timed(lambda: torch.save(state, buf))
        buf.seek(0)
        host["memory -> torch.load"] = mib / timed(lambda: torch.load(buf, weights_only=True))
        rates["dcp.save"] = mib / timed(lambda: dcp.save(state, storage_writer=T3fsStorageWriter(f"{root}/dcp", cluster=o.cluster)))
        target = {k: torch.empty_like(v) for k, v in state.items()}
        rates["dcp.load"] = mib / timed(lambda: dcp.load(target, storage_reader=T3fsStorageReader(f"{root}/dcp", cluster=o.cluster)))
    finally:
        fs.rm(root, recursive=True)
    write_bound, read_bound, raw = native_bounds(o.t3fs_bin, o.cluster, mib, o.depth)
    print(f"state dict {mib} MiB ({tensors} tensors), torch {torch.__version__}")
    print(f"  native client (cluster io, depth {o.depth}): write {write_bound:.1f} MiB/s, read {read_bound:.1f} MiB/s")
    for k, r in rates.items():
        bound = write_bound if "save" in k else read_bound
        print(f"  {k:24} {r:8.1f} MiB/s  {r / bound:5.2f} of the native bound")
    for k, r in host.items():
        print(f"  {k:24} {r:8.1f} MiB/s  (torch alone: the most any storage could give)")
    if o.out:
        os.makedirs(o.out, exist_ok=True)
        with open(os.path.join(o.out, "checkpoint.json"), "w") as f:
            json.dump({"mib": mib, "rates": rates, "native_write": write_bound,
                       "native_read": read_bound, "torch_in_memory": host, "cluster_io": raw}, f, indent=2)


if __name__ == "__main__":
    main()
