"""MLPerf Storage's training workload with the real DLIO (dlio-benchmark 2.0) on directories: the
t3fs FUSE mount and, in the same run, a local directory. For each directory DLIO generates the
unet3d dataset (npz files, scaled to fit this host), then trains with 1, 2, ... simulated
accelerators (MPI ranks) until the accelerator utilisation (AU) falls below 90%, DLIO's own rule
for how many accelerators a storage system keeps busy. DLIO's own outputs (summary.json,
per_epoch_stats.json, its log) are kept beside a t3fs run directory per root, whose report gives
the largest accelerator count held at AU >= 90% (for the mount, against the local directory's in
the same run) and au.svg draws AU against accelerators with the 90% floor.

    python bench/dlio.py --t3fs-bin target/release/t3fs --root /mnt/t3fs --root /tmp/local \
        --out runs/dlio

DLIO needs its own environment (scripts/dlio-env.sh makes it: dlio-benchmark with --no-deps and
its requirements but NVIDIA DALI, plus tensorflow-cpu and torch) and Open MPI's mpirun.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime

import rundir

AU_FLOOR = 90.0
# DLIO leaves a rank's first step out of AU; fewer steps than this say nothing.
MIN_STEPS = 3


def dlio(o, np_, root, outdir, generate, reader=None, checkpoint=(), epochs=None):
    """One DLIO run with `np_` ranks; its summary (train runs) or None (generation). `reader`:
    (class name, environment) of a custom reader; `checkpoint`: DLIO's checkpoint overrides,
    which turn its checkpoint step on; `epochs`: instead of --epochs."""
    os.makedirs(outdir, exist_ok=True)
    args = [
        "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(np_),
        "dlio_benchmark", f"workload={o.workload}",
        f"++workload.workflow.generate_data={generate}", f"++workload.workflow.train={not generate}",
        f"++workload.workflow.checkpoint={bool(checkpoint)}",
        f"++workload.dataset.data_folder={os.path.join(root, 'data')}",
        f"++workload.dataset.num_files_train={o.files}",
        f"++workload.dataset.num_samples_per_file={o.samples_per_file}",
        f"++workload.dataset.record_length={o.record_bytes}",
        "++workload.dataset.record_length_stdev=0",
        f"++workload.dataset.record_length_resize={o.record_bytes}",
        f"++workload.train.epochs={epochs or o.epochs}",
        f"++workload.reader.batch_size={o.batch_size}",
        f"++workload.output.folder={outdir}", f"hydra.run.dir={outdir}", *checkpoint,
    ]
    env = dict(os.environ)
    if reader and not generate:
        args.append(f"++workload.reader.reader_classname={reader[0]}")
        env.update(reader[1])
        # mpirun passes only the variables it is told to.
        for k in reader[1]:
            args[1:1] = ["-x", k]
    with open(os.path.join(outdir, "stdout.log"), "w") as log:
        r = subprocess.run(args, stdout=log, stderr=subprocess.STDOUT, timeout=o.timeout, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"DLIO exited {r.returncode}; its log: {outdir}/stdout.log")
    if generate:
        return None
    with open(os.path.join(outdir, "summary.json")) as f:
        return json.load(f)


def train_sweep(o, name, work, reader=None):
    """Training on generated data under `work` at each accelerator count until AU < 90%."""
    out = os.path.join(o.out, name)
    points = []
    for n in o.accelerators:
        if n > (os.cpu_count() or 1) and not o.oversubscribe:
            print(f"  {name}: stopping before {n} accelerators: more MPI ranks than this "
                  f"host's {os.cpu_count()} cores measure the ranks' contention for cores "
                  f"(Open MPI busy-polls), not storage (--oversubscribe to run them anyway)")
            break
        steps = o.files * o.samples_per_file // (o.batch_size * n)
        if steps < MIN_STEPS:
            print(f"  {name}: stopping before {n} accelerators: {o.files} files give each "
                  f"rank {steps} steps per epoch (DLIO's AU needs at least {MIN_STEPS})")
            break
        s = dlio(o, n, work, os.path.join(out, f"dlio-train-{n}"), False, reader)
        m = s["metric"]
        points.append({"accelerators": n, "au": m["train_au_mean_percentage"],
                       "au_stdev": m["train_au_stdev_percentage"],
                       "samples_s": m["train_throughput_mean_samples_per_second"],
                       "mb_s": m["train_io_mean_MB_per_second"]})
        print(f"  {name}: {n} accelerators: AU {m['train_au_mean_percentage']:.1f}%, "
              f"{m['train_throughput_mean_samples_per_second']:.1f} samples/s, "
              f"{m['train_io_mean_MB_per_second']:.0f} MB/s", flush=True)
        if m["train_au_mean_percentage"] < AU_FLOOR:
            break
    held = max([p["accelerators"] for p in points if p["au"] >= AU_FLOOR], default=0)
    return {"points": points, "held": held}


def checkpoint(o, name, work):
    """MLPerf Storage's checkpoint step as DLIO 2.0 runs it: one rank trains one epoch on the
    generated data, then saves the model (a tensor of --checkpoint-mib MiB, torch.save into a
    file of the checkpoint folder, with no fsync: DLIO 2.0 issues none, and has no checkpoint
    reads). Its length is DLIO's own (per_epoch_stats.json's ckpt blocks); its size, the files
    the folder holds afterwards."""
    out = os.path.join(o.out, name, "dlio-checkpoint")
    folder = os.path.join(work, "checkpoints")
    try:
        dlio(o, 1, work, out, False, epochs=1, checkpoint=(
            f"++workload.checkpoint.checkpoint_folder={folder}",
            "++workload.checkpoint.checkpoint_after_epoch=1",
            "++workload.checkpoint.epochs_between_checkpoints=1",
            f"++workload.checkpoint.model_size={o.checkpoint_mib << 20}"))
        with open(os.path.join(out, "per_epoch_stats.json")) as f:
            stats = json.load(f)
    except (RuntimeError, OSError, ValueError) as e:
        print(f"  {name}: DLIO's checkpoint failed: {e}", flush=True)
        return {"mib": 0.0, "secs": 0.0, "mib_s": 0.0, "ok": False, "error": str(e)}
    # From the blocks' timestamps (microseconds): DLIO rounds their durations to 10 ms.
    stamp = datetime.fromisoformat
    secs = sum((stamp(v["end"]) - stamp(v["start"])).total_seconds()
               for e in stats.values() for k, v in e.items()
               if k.startswith("ckpt") and isinstance(v, dict) and "end" in v)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs)
    mib = size / 2**20
    print(f"  {name}: DLIO's checkpoint: {mib:.0f} MiB in {secs:.3f} s"
          + (f" ({mib / secs:.0f} MiB/s)" if secs > 0 else ""), flush=True)
    return {"mib": mib, "secs": secs, "mib_s": mib / secs if secs > 0 else 0.0,
            "ok": secs > 0 and size >= o.checkpoint_mib << 20}


def sweep(o, root, readers):
    """Generation on `root`, then a training sweep per reader in `readers` ((name, reader or
    None) pairs) on the same generated data; the data is removed afterwards."""
    work = os.path.join(os.path.abspath(root), f"dlio-{os.getpid()}")
    os.makedirs(work, exist_ok=True)
    out = {}
    try:
        t = time.time()
        dlio(o, 2, work, os.path.join(o.out, readers[0][0], "dlio-generate"), True)
        gen_secs = time.time() - t
        for name, reader in readers:
            if reader:
                print(f"DLIO {o.workload} on the mount's data through the native client ...",
                      flush=True)
            out[name] = {"root": root, "generate_secs": gen_secs,
                         **train_sweep(o, name, work, reader)}
            if o.checkpoint_mib and not reader:
                out[name]["checkpoint"] = checkpoint(o, name, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def au_svg(points_by_name):
    """AU against accelerators, one line per root, the 90% floor dashed."""
    w, h, m = 640, 320, 50
    xs = [p["accelerators"] for pts in points_by_name.values() for p in pts] or [1]
    xmax = max(xs) + 1
    x = lambda a: m + (w - 2 * m) * a / xmax
    y = lambda au: h - m - (h - 2 * m) * min(au, 100) / 100
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{w / 2}" y="20" text-anchor="middle" font-family="sans-serif" '
             f'font-size="15">DLIO accelerator utilisation against simulated accelerators</text>',
             f'<line x1="{m}" y1="{h - m}" x2="{w - m}" y2="{h - m}" stroke="black"/>',
             f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="black"/>',
             f'<line x1="{m}" y1="{y(AU_FLOOR)}" x2="{w - m}" y2="{y(AU_FLOOR)}" stroke="red" '
             f'stroke-dasharray="5,4"/>',
             f'<text x="{w - m}" y="{y(AU_FLOOR) - 4}" text-anchor="end" font-family="sans-serif" '
             f'font-size="11" fill="red">AU 90%</text>']
    for au in (0, 50, 100):
        parts.append(f'<text x="{m - 6}" y="{y(au) + 4}" text-anchor="end" '
                     f'font-family="sans-serif" font-size="11">{au}%</text>')
    for a in sorted(set(xs)):
        parts.append(f'<text x="{x(a)}" y="{h - m + 16}" text-anchor="middle" '
                     f'font-family="sans-serif" font-size="11">{a}</text>')
    for k, (name, pts) in enumerate(points_by_name.items()):
        c = colors[k % len(colors)]
        line = " ".join(f"{x(p['accelerators'])},{y(p['au'])}" for p in pts)
        parts.append(f'<polyline points="{line}" fill="none" stroke="{c}" stroke-width="2"/>')
        parts += [f'<circle cx="{x(p["accelerators"])}" cy="{y(p["au"])}" r="3" fill="{c}"/>'
                  for p in pts]
        # The legend sits low on the chart: AU near 100% and the 90% floor fill the top.
        legend_y = h - m - 10 - 14 * (len(points_by_name) - 1 - k)
        parts.append(f'<text x="{m + 10}" y="{legend_y}" font-family="sans-serif" '
                     f'font-size="12" fill="{c}">{name}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def write_run(o, name, r, bound, svg):
    d = os.path.join(o.out, name)
    # DLIO trained and measured: every count it ran moved samples and kept its accelerators busy
    # some of the time.
    ran = bool(r["points"]) and all(p["samples_s"] > 0 and p["au"] > 0 for p in r["points"])
    table = "; ".join(f"{p['accelerators']}: AU {p['au']:.1f}% {p['samples_s']:.1f} samples/s"
                      for p in r["points"])
    verdicts = [{"name": "DLIO trained and reported at every accelerator count",
                 "label": "PASS" if ran else "FAIL", "detail": table or "no training run"}]
    ck = r.get("checkpoint")
    saved = ck is None or ck["ok"]
    if ck:
        verdicts.append({"name": "DLIO saved its checkpoint, every byte of the model on disk",
                         "label": "PASS" if ck["ok"] else "FAIL",
                         "detail": ck.get("error") or f"{ck['mib']:.0f} MiB in {ck['secs']:.3f} s"})
    bounds = [{"name": bound[0], "value": bound[1]}] if bound else []
    roofline = [{"op": "accelerators at AU >= 90%", "unit": "accelerators",
                 "measured": r["held"], "bounds": bounds, "binding": bound[0] if bound else "",
                 "percent": 100 * r["held"] / bound[1] if bound and bound[1] else 0,
                 "saturated": ""}]
    manifest = {
        "scenario": f"dlio {o.workload} on {name}",
        "about": f"MLPerf Storage training ({o.workload}, {o.files} files of {o.record_bytes} "
                 f"bytes, {o.epochs} epochs) with the real DLIO on {r['root']}; au.svg draws AU",
        "config": json.dumps(vars(o), indent=1), "exit": 0 if ran and saved else 1,
        "reason": ("DLIO did not train" if not ran else
                   "" if saved else "DLIO did not save its checkpoint"),
        "seconds": 0.0, "verdicts": verdicts,
        # As the performance model's training run counts them (its twin, dlio_twin.py).
        "counters": {**{f"au_pct_x100.{p['accelerators']}": int(p["au"] * 100)
                        for p in r["points"]},
                     **{f"samples_per_s_x1000.{p['accelerators']}": int(p["samples_s"] * 1000)
                        for p in r["points"]},
                     **({"checkpoint.ms": int(ck["secs"] * 1000),
                         "checkpoint.bytes": int(ck["mib"] * 2**20)} if ck else {})},
        "shape": f"{name}: {r['root']}", "roofline": roofline,
    }
    files = {"au.svg": svg, "points.json": json.dumps(r["points"], indent=1)}
    return rundir.write(d, o.t3fs_bin, manifest, files=files)


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--t3fs-bin", required=True)
    a.add_argument("--root", action="append", required=True)
    a.add_argument("--workload", default="unet3d_h100")
    a.add_argument("--files", type=int, default=168, help="unet3d's own count")
    a.add_argument("--record-bytes", type=int, default=4 << 20,
                   help="bytes per sample (unet3d's are ~140 MB; scaled to fit here)")
    a.add_argument("--samples-per-file", type=int, default=1,
                   help="samples in each file (unet3d: 1; resnet50's TFRecords: 1251)")
    a.add_argument("--epochs", type=int, default=3)
    a.add_argument("--batch-size", type=int, default=7, help="unet3d's own")
    a.add_argument("--accelerators", default="1,2,3,4,6,8,12,16")
    a.add_argument("--timeout", type=int, default=900)
    a.add_argument("--oversubscribe", action="store_true",
                   help="run more accelerators (MPI ranks) than the host has cores")
    a.add_argument("--checkpoint-mib", type=int, default=0,
                   help="also save a checkpoint of this many MiB with DLIO's checkpoint step on "
                        "each directory (one rank, one epoch; 0: none)")
    a.add_argument("--out", default="runs/dlio")
    a.add_argument("--native-cluster", default=None,
                   help="also train on the mount's data read by the native client (DLIO's "
                        "custom reader t3fs.dlio.T3fsNpzReader; needs the t3fs package): the "
                        "cluster directory")
    o = a.parse_args()
    o.accelerators = [int(x) for x in o.accelerators.split(",")]
    if shutil.which("dlio_benchmark") is None or shutil.which("mpirun") is None:
        sys.exit("error: dlio_benchmark and mpirun must be on PATH (scripts/dlio-env.sh)")
    results = {}
    for root in o.root:
        name = "mount" if rundir.is_mount(root) else "local"
        print(f"DLIO {o.workload} on {name} ({root}) ...", flush=True)
        readers = [(name, None)]
        if name == "mount" and o.native_cluster:
            # The native client reads the very files DLIO generated through the mount.
            env = {"T3FS_CLUSTER": os.path.abspath(o.native_cluster), "T3FS_DLIO_MOUNT": root}
            readers.append(("native", ("t3fs.dlio.T3fsNpzReader", env)))
        results.update(sweep(o, root, readers))
    svg = au_svg({n: r["points"] for n, r in results.items()})
    local = results.get("local")
    ok = True
    for name, r in results.items():
        bound = ("local directory, same run", local["held"]) if name != "local" and local else None
        d = write_run(o, name, r, bound, svg)
        ok &= manifest_ok(d)
        ratio = f"; {r['held'] / bound[1]:.2f}x the local directory" if bound and bound[1] else ""
        print(f"{name}: {r['held']} accelerators held at AU >= 90%{ratio}; run directory {d}")
        ck, lk = r.get("checkpoint"), (local or {}).get("checkpoint")
        if ck:
            vs = (f"; {ck['mib_s'] / lk['mib_s']:.2f}x the local directory's"
                  if lk and lk["mib_s"] > 0 and name != "local" else "")
            print(f"{name}: DLIO's checkpoint at {ck['mib_s']:.0f} MiB/s{vs}")
    sys.exit(0 if ok else 1)


def manifest_ok(d):
    with open(os.path.join(d, "manifest.json")) as f:
        return json.load(f)["exit"] == 0


if __name__ == "__main__":
    main()
