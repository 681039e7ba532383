"""GraySort's simulated twin on this host (issue 40 item 6): the performance model's pipeline
run of what ``graysort.py`` ran for real, from this host's measured costs, laid beside each
real run by ``t3fs report compare``.

The twin takes from the real run only its shape (records, generate and shuffle tasks, sort
partitions, executors, this host's cores), never its times. Its costs come from two probes:

- per byte: ``graysort_costs.py``'s per-core fits for the shuffle (DuckDB) and the sort
  (polars, the published benchmark's engine; ``graysort.py`` sorts with Arrow, so the sort's
  cost is a stand-in) evaluated at this run's task shape, with each task's cores as
  ``graysort.py`` gives its executors (cores // executors, at least one);
- per task (``--null-run``, optional): a ``graysort.py`` run of the same tasks, partitions and
  executors over a handful of records on a local directory, whose phases are smallpond's own
  cost of dispatching and starting tasks with no data; each phase's length over its waves of
  tasks is its ``task_startup_s``.

The storage side is a loopback cluster of 3 storage nodes (3 replicas) on the model's default
hardware, which does not bind at these rates. The generate phase has no per-byte probe (its
CPU, gensort's records and their Parquet, is not charged: only its start-up and its writes);
nor does the model charge CPU to the file system's own work (FUSE, the client, the storage
services), which is what separates the mount from the local directory here.

    graysort.py ... --records 5000000 --out runs/graysort                  # the real runs
    graysort.py ... --root /tmp/local --records 1000 --out runs/graysort-null   # same shape
    POLARS_MAX_THREADS=1 python bench/graysort_costs.py --t3fs-bin B --rows 1250000,2500000 \\
        --partitions 4,64 > costs.json
    python bench/graysort_twin.py --t3fs-bin B --costs costs.json --null-run runs/graysort-null/local \\
        --run runs/graysort/mount --run runs/graysort/local --out runs/graysort/twin

Prints each phase's real and predicted seconds; writes the twin's scenario, its run directory
and one comparison per real run under ``--out``.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from graysort_costs import RECORD, per_core_mib_s  # noqa: E402
import rundir  # noqa: E402


def shape(run_dir):
    """records, gen_tasks, sort_partitions, executors of a graysort.py run directory."""
    with open(os.path.join(run_dir, "manifest.json")) as f:
        m = json.load(f)
    cfg = dict(line.split(" = ", 1) for line in m["config"].splitlines() if " = " in line)
    return {k: int(json.loads(v)) for k, v in cfg.items()}


def executor_cores(s, cores):
    """(task slots, cores per task): graysort.py gives each executor cores // executors cores
    (at least one) and smallpond a task as many; more executors than cores share them."""
    return min(s["executors"], cores), max(1, cores // s["executors"])


def startups(null_run, s, slots):
    """Each phase's task start-up seconds from a null run of shape `s` (0 without one)."""
    if null_run is None:
        return {}
    if {k: v for k, v in shape(null_run).items() if k != "records"} != \
            {k: v for k, v in s.items() if k != "records"}:
        sys.exit("error: --null-run has other tasks, partitions or executors than the runs")
    tasks = {"generate": s["gen_tasks"], "shuffle": s["gen_tasks"], "sort": s["sort_partitions"]}
    return {ph: secs / -(-tasks[ph] // slots) for ph, secs in phases(null_run).items()
            if ph in tasks}


def compute_phase(name, tib, tasks, cores, serial, core_mib_s, startup, where):
    """A CPU-bound [[phase]] that reads and writes `tib`: `tasks` tasks of `cores` cores each,
    worth Amdahl's speedup with `serial` (the costs probe's, used only when cores > 1)."""
    if not core_mib_s > 0:
        sys.exit(f"error: graysort_costs.py's fit gives {core_mib_s:.3f} MiB/s per core for the "
                 f"{name} {where}; measure it at sizes nearer this run's (--rows)")
    return f"""[[phase]]
name = "{name}"
tib = {tib!r}
read = true
write = true
tasks = {tasks}
task_cores = {cores}
core_mib_s = {core_mib_s:.3f} # graysort_costs.py's fit {where}
serial_fraction = {serial if cores > 1 else 0.0:.3f}
unit_mib = 4
task_startup_s = {startup}
"""


def scenario(s, costs, cores, startup):
    """The twin's scenario text for run shape `s` with the probes' `costs` and `startup`."""
    tib = s["records"] * RECORD / 2**40
    shuffle = per_core_mib_s(costs["shuffle_fit_a_b_c"], s["records"] / s["gen_tasks"],
                             s["sort_partitions"])
    sort = per_core_mib_s(costs["sort_fit_a_b"], s["records"] / s["sort_partitions"])
    slots, task_cores = executor_cores(s, cores)
    serial = {ph: costs.get("scaling", {}).get(ph, {}).get("serial", 0.0)
              for ph in ("shuffle", "sort")}
    up = {ph: round(startup.get(ph, 0.0), 3) for ph in ("generate", "shuffle", "sort")}
    return f"""# graysort.py's run on this host, predicted by the performance model (graysort_twin.py):
# the shape is the real run's, the costs graysort_costs.py's fits at that shape and the task
# start-ups a null run's (0 without one).
name = "graysort_this_host"
about = "the twin of graysort.py's run: {s['records']} records, {s['gen_tasks']} generate and shuffle tasks, {s['sort_partitions']} sort partitions, {s['executors']} executors of {task_cores} core(s)"
kind = "pipeline"
seed = 1
duration_s = 3600
sample_ms = 250         # graysort.py samples its processes' I/O every 0.25 s
quantum_us = 1000

[hardware]
profile = "3fs-2025"    # storage does not bind at these rates; CPU does
client_cores = {slots * task_cores}  # the executors' cores (graysort.py: cores // executors each)
background = 0.0

{rundir.LOOPBACK_CLUSTER}
# No per-byte probe: only its start-up and its writes (of the records once) are modelled.
[[phase]]
name = "generate"
tib = {tib!r}
write = true
tasks = {s['gen_tasks']}
slots_per_client = {slots}
unit_mib = 4
task_startup_s = {up['generate']}

{compute_phase("shuffle", tib, s["gen_tasks"], task_cores, serial["shuffle"], shuffle, up["shuffle"],
                f"at {s['records'] // s['gen_tasks']} rows into {s['sort_partitions']} partitions")}
{compute_phase("sort", tib, s["sort_partitions"], task_cores, serial["sort"], sort, up["sort"],
                f"at {s['records'] // s['sort_partitions']} rows")}"""


def phases(run_dir):
    """Each phase's seconds of a run directory, from its phase.NAME.ms counters."""
    with open(os.path.join(run_dir, "manifest.json")) as f:
        counters = json.load(f)["counters"]
    return {k[len("phase."):-len(".ms")]: v / 1000 for k, v in counters.items()
            if k.startswith("phase.") and k.endswith(".ms")}


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--t3fs-bin", required=True)
    a.add_argument("--costs", required=True, help="graysort_costs.py's JSON output")
    a.add_argument("--run", action="append", required=True,
                   help="a graysort.py run directory (repeat: mount, local)")
    a.add_argument("--null-run", default=None,
                   help="a graysort.py run directory of the same shape over a handful of records "
                        "(local directory): each phase's task start-up")
    a.add_argument("--out", default="runs/graysort/twin")
    o = a.parse_args()
    with open(o.costs) as f:
        costs = json.load(f)
    s = shape(o.run[0])
    if any(shape(r) != s for r in o.run[1:]):
        sys.exit("error: the runs have different shapes; give runs of one graysort.py command")
    os.makedirs(o.out, exist_ok=True)
    path = os.path.join(o.out, "graysort_this_host.toml")
    cores = os.cpu_count() or 1
    startup = startups(o.null_run, s, executor_cores(s, cores)[0])
    twin = rundir.sim_twin(o.t3fs_bin, scenario(s, costs, cores, startup), path, o.out,
                           "graysort_this_host")
    predicted = phases(twin)
    print(f"{'run':<8} {'phase':<8} {'real s':>8} {'twin s':>8} {'twin/real':>9}")
    for run in o.run:
        name = os.path.basename(os.path.normpath(run))
        real = phases(run)
        for ph in ("generate", "shuffle", "sort"):
            r, p = real.get(ph), predicted.get(ph)
            ratio = f"{p / r:.2f}" if r and p is not None else "-"
            print(f"{name:<8} {ph:<8} {r or 0:>8.2f} {p or 0:>8.2f} {ratio:>9}")
        rundir.compare_twin(o.t3fs_bin, run, twin, os.path.join(o.out, f"compare-{name}"))


if __name__ == "__main__":
    main()
