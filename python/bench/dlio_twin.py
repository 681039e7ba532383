"""DLIO's simulated twin on this host (issue 40 item 6): the performance model's training run of
what ``dlio.py`` ran for real, laid beside each real run by ``t3fs report compare``.

The twin takes from the real run only its shape, never its figures: the workload's batch size
and computation time per batch (DLIO's own workload file, e.g. ``unet3d_h100.yaml``, from the
installed dlio_benchmark), the bytes per sample and the accelerator counts the real sweep ran.
The model then runs DLIO's own rule over those counts on one client node (this host): each
accelerator reads its batches' samples as whole files from a random replica, reads ahead
``prefetch`` batches, and computes ``computation_time`` per batch; AU is computation time over
elapsed time in the run's second half.

The storage side is a loopback cluster of 3 storage nodes (3 replicas) on the model's default
hardware, which does not bind at these rates (a unet3d accelerator wants 7 samples per 0.323 s).
The model charges no CPU to the data loader (decoding the npz files, its worker processes) or to
Open MPI's ranks, which on a 2-core host is what the real runs share their cores with.

    python bench/dlio.py ... --out runs/dlio                                   # the real runs
    python bench/dlio_twin.py --t3fs-bin B --run runs/dlio/mount --run runs/dlio/local \\
        --out runs/dlio/twin

Prints each accelerator count's real and predicted AU and samples/s with the twin's errors, and
the real epoch's length beside the computation its steps hold: DLIO's throughput counts a whole
epoch, the loader's start-up included, where its AU leaves the first step out, so at a few steps
per epoch the model (steady state, no start-up) is near the real AU but far above its throughput.
writes the twin's scenario, its run directory and one comparison per real run under ``--out``.
Needs dlio_benchmark importable (its workload files) only when ``--compute-s`` is not given.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rundir  # noqa: E402

# The calibration's tolerance on throughput (issue 42), applied here to AU, the figure DLIO's
# rule judges: within it, the twin agrees.
TOLERANCE = 0.10


def shape(run_dir):
    """The real run's configuration (dlio.py's arguments) and its points, from its run dir."""
    with open(os.path.join(run_dir, "manifest.json")) as f:
        m = json.load(f)
    with open(os.path.join(run_dir, "points.json")) as f:
        points = json.load(f)
    return json.loads(m["config"]), points


def workload_file(workload):
    """DLIO's own workload definition: (computation_time per batch, batch_size)."""
    try:
        import dlio_benchmark
        import yaml
    except ImportError:
        sys.exit("error: dlio_benchmark is not importable: give --compute-s, or run in DLIO's "
                 "environment (scripts/dlio-env.sh)")
    path = os.path.join(os.path.dirname(dlio_benchmark.__file__), "configs", "workload",
                        f"{workload}.yaml")
    with open(path) as f:
        w = yaml.safe_load(f)
    return float(w["train"]["computation_time"]), int(w["reader"]["batch_size"]), path


def scenario(cfg, counts, compute_s, source):
    """The twin's scenario text for real configuration `cfg` over accelerator counts `counts`."""
    sweep = ", ".join(str(n) for n in counts)
    return f"""# dlio.py's run on this host, predicted by the performance model (dlio_twin.py): the
# shape is the real run's, the computation time DLIO's workload file's ({source}).
name = "dlio_this_host"
about = "the twin of dlio.py's {cfg['workload']} run: {cfg['files']} files of {cfg['record_bytes']} bytes, batch {cfg['batch_size']}, accelerators {sweep} on this host"
kind = "training"
seed = 1
duration_s = 6.0        # simulated seconds per count; AU counts over the second half
sample_ms = 100
quantum_us = 1000

[hardware]
profile = "3fs-2025"    # storage does not bind at these rates
background = 0.0

{rundir.LOOPBACK_CLUSTER}
[training]
sample_bytes = {float(cfg['record_bytes'])!r}
batch = {cfg['batch_size']}
compute_s = {compute_s!r}
prefetch = 2            # DLIO's reader prefetch_size default
accelerators_per_client = {counts[0]}
sweep = [{sweep}]       # DLIO's rule over the real run's counts, in order
au_floor = 0.9
"""


def epoch_seconds(run_dir, n):
    """The mean epoch length of the real run at `n` accelerators (DLIO's per_epoch_stats.json),
    or None where DLIO left none."""
    try:
        with open(os.path.join(run_dir, f"dlio-train-{n}", "per_epoch_stats.json")) as f:
            epochs = json.load(f)
        secs = [float(e["duration"]) for e in epochs.values()]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return sum(secs) / len(secs) if secs else None


def counters(run_dir):
    with open(os.path.join(run_dir, "manifest.json")) as f:
        return json.load(f)["counters"]


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--t3fs-bin", required=True)
    a.add_argument("--run", action="append", required=True,
                   help="a dlio.py run directory (repeat: mount, native, local)")
    a.add_argument("--compute-s", type=float, default=None,
                   help="computation seconds per batch (default: DLIO's workload file's)")
    a.add_argument("--out", default="runs/dlio/twin")
    o = a.parse_args()
    shapes = [shape(r) for r in o.run]
    cfg = shapes[0][0]
    keys = ("workload", "files", "record_bytes", "batch_size", "epochs")
    if any(tuple(c[k] for k in keys) != tuple(cfg[k] for k in keys) for c, _ in shapes):
        sys.exit("error: the runs have different shapes; give runs of one dlio.py command")
    counts = sorted({p["accelerators"] for _, pts in shapes for p in pts})
    if not counts:
        sys.exit("error: the runs trained at no accelerator count")
    if o.compute_s is None:
        compute_s, batch, source = workload_file(cfg["workload"])
        if batch != cfg["batch_size"]:
            print(f"note: the run's batch size {cfg['batch_size']} is not the workload's {batch}")
    else:
        compute_s, source = o.compute_s, "--compute-s"
    os.makedirs(o.out, exist_ok=True)
    path = os.path.join(o.out, "dlio_this_host.toml")
    twin = rundir.sim_twin(o.t3fs_bin, scenario(cfg, counts, compute_s, os.path.basename(source)),
                           path, o.out, "dlio_this_host")
    tc = counters(twin)
    print(f"{'run':<8} {'accel':>5} {'real AU':>8} {'twin AU':>8} {'AU err':>7} {'real sps':>9} "
          f"{'twin sps':>9} {'sps err':>8} {'epoch s':>8} {'compute s':>9}")
    for run, (_, points) in zip(o.run, shapes):
        name = os.path.basename(os.path.normpath(run))
        for p in points:
            n = p["accelerators"]
            au = tc.get(f"au_pct_x100.{n}")
            sps = tc.get(f"samples_per_s_x1000.{n}")
            if au is None or sps is None:
                print(f"{name:<8} {n:>5} {p['au']:>7.1f}% (the twin stopped before this count)")
                continue
            au_err = au / 100 / p["au"] - 1 if p["au"] > 0 else float("inf")
            sps_err = sps / 1000 / p["samples_s"] - 1 if p["samples_s"] > 0 else float("inf")
            # An epoch's length against the computation its steps hold: the rest is the
            # loader's start-up and the waits, which DLIO's throughput counts and its AU (from
            # the second step on) does not.
            epoch = epoch_seconds(run, n)
            steps = cfg["files"] * cfg.get("samples_per_file", 1) // (cfg["batch_size"] * n)
            verdict = "within" if abs(au_err) <= TOLERANCE else "outside"
            print(f"{name:<8} {n:>5} {p['au']:>7.1f}% {au / 100:>7.1f}% {100 * au_err:>+6.1f}% "
                  f"{p['samples_s']:>9.2f} {sps / 1000:>9.2f} {100 * sps_err:>+7.1f}% "
                  f"{epoch or 0:>8.2f} {steps * compute_s:>9.2f}  AU {verdict} ±{100 * TOLERANCE:.0f}%")
        rundir.compare_twin(o.t3fs_bin, run, twin, os.path.join(o.out, f"compare-{name}"))


if __name__ == "__main__":
    main()
