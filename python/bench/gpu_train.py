"""A short real training loop whose DataLoader reads its samples from t3fs, and the time the
accelerator waits on data: the same loop over (a) the t3fs dataset (`T3fsMapDataset`, a batch
per call), (b) the same files through a FUSE mount with plain `open()` (when the host can
mount), (c) a local directory, in one run.

    python bench/gpu_train.py --cluster DIR --t3fs-bin target/release/t3fs \
        --files 20000 --size 102400 --out runs/gpu-train

Each sample is a file of raw uint8 pixels (3 x H x W, the largest square image in --size
bytes) with a label from its number; the model is torchvision's ResNet-18 when torchvision is
installed (a small CNN otherwise), trained with bf16 autocast on the GPU (the CPU when there is
none). Per step, "data wait" is the time the loop blocks in the DataLoader for the next batch,
"compute" the step's time to a device synchronise; the first --warmup steps (CUDA start-up,
cuDNN's autotuning) are left out. The accelerator is busy compute / (compute + data wait) of
the time: the figure MLPerf Storage calls accelerator utilisation. Local files were just
written, so they come from the page cache.
"""

import argparse
import functools
import json
import math
import os
import shutil
import sys
import tempfile
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader

import samples
from mount import mount, unmount
from t3fs.fs import T3fsFileSystem
from t3fs.torch import T3fsMapDataset


def side_of(size):
    return int(math.isqrt(size // 3))


def to_sample(path_and_bytes, side):
    """(path, bytes) -> (a 3 x side x side uint8 image, a label from the sample's number)."""
    path, data = path_and_bytes
    pixels = torch.frombuffer(bytearray(data[: 3 * side * side]), dtype=torch.uint8)
    return pixels.view(3, side, side), int(os.path.basename(path)[1:7]) % 10


def model_for(device):
    try:
        import torchvision

        m = torchvision.models.resnet18(num_classes=10)
        name = "resnet18"
    except ImportError:
        m = nn.Sequential(
            nn.Conv2d(3, 32, 5, stride=2), nn.ReLU(), nn.Conv2d(32, 64, 3, stride=2), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
        )
        name = "small CNN"
    return m.to(device).to(memory_format=torch.channels_last), name


def train_epoch(ds, o, device):
    model, name = model_for(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = DataLoader(ds, batch_size=o.batch, num_workers=o.workers, shuffle=True,
                        pin_memory=device.type == "cuda", persistent_workers=False,
                        prefetch_factor=o.prefetch, drop_last=True)
    waits, computes, seen = [], [], 0
    it = iter(loader)
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        try:
            x, y = next(it)
        except StopIteration:
            break
        t1 = time.perf_counter()
        x = x.to(device, non_blocking=True).float().div_(255).contiguous(memory_format=torch.channels_last)
        y = y.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        waits.append(t1 - t0)
        computes.append(t2 - t1)
        seen += len(y)
    total = time.perf_counter() - start
    w, c = sum(waits[o.warmup:]), sum(computes[o.warmup:])
    n = max(0, len(waits) - o.warmup) * o.batch
    return {
        "model": name, "steps": len(waits), "samples": seen, "seconds": total,
        "samples_per_s": n / (w + c) if w + c > 0 else 0.0,
        "data_wait_s": w, "compute_s": c,
        "accelerator_busy": c / (w + c) if w + c > 0 else 0.0,
        "loss": float(loss.detach()),
    }


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--cluster", required=True)
    a.add_argument("--t3fs-bin", required=True)
    a.add_argument("--files", type=int, default=20000)
    a.add_argument("--size", type=int, default=100 * 1024)
    a.add_argument("--batch", type=int, default=256)
    a.add_argument("--workers", type=int, default=8)
    a.add_argument("--prefetch", type=int, default=4)
    a.add_argument("--warmup", type=int, default=5)
    a.add_argument("--out", default=None)
    o = a.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    fs = T3fsFileSystem(cluster=o.cluster)
    root = f"/bench-train-{os.getpid()}"
    local = tempfile.mkdtemp(prefix="t3fs-train-local-")
    side = side_of(o.size)
    names = samples.names(o.files)
    print(f"writing {o.files} samples of {o.size} B ({side}x{side} RGB) to t3fs and {local}", file=sys.stderr)
    samples.write(fs, root, local, names, lambda _: os.urandom(o.size))
    mnt = tempfile.mkdtemp(prefix="t3fs-train-mnt-")
    proc = mount(o.t3fs_bin, o.cluster, mnt)
    results = {}
    try:
        decode = functools.partial(to_sample, side=side)
        t3fs_ds = T3fsMapDataset([f"{root}/{n}" for n in names], transform=decode, fs=fs)
        results["t3fs dataset"] = train_epoch(t3fs_ds, o, device)
        if proc is not None:
            results["FUSE mount, open()"] = train_epoch(samples.LocalFiles([f"{mnt}{root}/{n}" for n in names], decode), o, device)
        results["local directory, open()"] = train_epoch(samples.LocalFiles([f"{local}/{n}" for n in names], decode), o, device)
    finally:
        unmount(proc, mnt)
        os.rmdir(mnt)
        fs.rm(root, recursive=True)
        shutil.rmtree(local)

    gpu = torch.cuda.get_device_name(0) if device.type == "cuda" else "no GPU (CPU)"
    print(f"{o.files} samples x {o.size} B, batch {o.batch}, {o.workers} workers, {gpu}, "
          f"{os.cpu_count()} CPUs, torch {torch.__version__}")
    if proc is None:
        print("  FUSE mount: not run (no fusermount3 or /dev/fuse on this host)")
    for k, r in results.items():
        print(f"  {k:24} {r['samples_per_s']:8.0f} samples/s  data wait {r['data_wait_s']:6.2f} s  "
              f"compute {r['compute_s']:6.2f} s  accelerator busy {100 * r['accelerator_busy']:5.1f}%  ({r['model']})")
    if o.out:
        os.makedirs(o.out, exist_ok=True)
        with open(os.path.join(o.out, "gpu-train.json"), "w") as f:
            json.dump({"files": o.files, "size": o.size, "batch": o.batch, "workers": o.workers,
                       "device": gpu, "cpus": os.cpu_count(), "fuse": proc is not None,
                       "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
