"""GraySort with the real smallpond on a directory: the t3fs FUSE mount and, in the same run, a
local directory, after smallpond's own benchmark (benchmarks/gray_sort_benchmark.py):

1. generate: ``t3fs graysort gen`` writes gensort records (100 bytes, 10-byte key, gensort -a's
   format) as the input ``.dat`` files; each generate task reads its file back and writes it as
   Parquet with a bucket id per record (a range partition on the key's first two characters,
   so bucket order is key order);
2. shuffle: smallpond's ShuffleNode moves every record into its bucket's partition (DuckDB);
3. sort: each partition is sorted by key (Arrow) and written as ``part-BUCKET.dat``;
4. validate: ``t3fs graysort valsort`` reads the parts in bucket order and checks the global
   order, the record count and the order-independent checksum against the input's.

Phases 1 and 2+3 are two smallpond plans, each run by a scheduler and N executor processes (as
smallpond's tests run them; smallpond's Driver mishandles several local executors). Every
intermediate file, smallpond's own included, lives under the directory. The phase boundary
between shuffle and sort is the first sort task's start. Throughput over time is what the
pipeline's processes read and wrote through system calls (``rchar``/``wchar`` of /proc/PID/io,
sampled every 0.25 s, a process's last sample kept after it exits).

    python bench/graysort.py --t3fs-bin target/release/t3fs --root /mnt/t3fs --root /tmp/local \
        --records 2000000 --executors 2 --out runs/graysort

Each root gets a run directory (``t3fs report`` renders it); the exit status is 0 only when
every root's output validated.
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime
from functools import partial
from multiprocessing import Process

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from smallpond.execution.executor import Executor
from smallpond.execution.scheduler import Scheduler
from smallpond.execution.task import JobId, RuntimeContext
from smallpond.logical.dataset import ArrowTableDataSet, ParquetDataSet
from smallpond.logical.node import (Context, DataSetPartitionNode, DataSourceNode, LogicalPlan,
                                    PythonScriptNode, ShuffleNode)
from smallpond.logical.planner import Planner

import rundir

RECORD = 100
TICK = os.sysconf("SC_CLK_TCK")


def bucket_of(keys, buckets):
    """Range partition on the first two key characters (printable ASCII, base 95)."""
    b = (keys[:, 0].astype(np.int64) - 32) * 95 + (keys[:, 1].astype(np.int64) - 32)
    return (b * buckets // (95 * 95)).astype(np.int32)


def generate(t3fs_bin, workdir, buckets, runtime_ctx, input_datasets, output_path):
    ranges = input_datasets[0].to_arrow_table().to_pylist()
    for r in ranges:
        dat = os.path.join(workdir, "input", f"in-{r['start']:012d}.dat")
        subprocess.run([t3fs_bin, "graysort", "gen", "--start", str(r["start"]), "--count",
                        str(r["count"]), "--out", dat], check=True, capture_output=True)
        with open(dat, "rb") as f:
            raw = np.frombuffer(f.read(), dtype=np.uint8).reshape(-1, RECORD)
        records = pa.FixedSizeBinaryArray.from_buffers(pa.binary(RECORD), len(raw),
                                                        [None, pa.py_buffer(raw.tobytes())])
        keys = pc.binary_slice(records.cast(pa.binary()), 0, 10)
        table = pa.table({"buckets": bucket_of(raw, buckets), "keys": keys,
                          "records": records.cast(pa.binary())})
        pq.write_table(table, os.path.join(workdir, "parquet", f"in-{r['start']:012d}.parquet"))
    return True


def sort_partition(workdir, runtime_ctx, input_datasets, output_path):
    with open(os.path.join(workdir, "marks", f"sort-{os.getpid()}-{time.time_ns()}"), "w") as f:
        f.write(str(time.time()))
    table = input_datasets[0].to_arrow_table()
    if table.num_rows == 0:
        return True
    bucket = pc.min(table["buckets"]).as_py()
    if pc.max(table["buckets"]).as_py() != bucket:
        raise RuntimeError("a shuffle partition holds several buckets")
    order = pc.sort_indices(table, sort_keys=[("keys", "ascending")])
    # Whatever binary type the shuffle left (DuckDB's BLOB comes back as binary or large
    # binary), as large binary: 64-bit offsets into one contiguous data buffer.
    records = pc.take(table["records"], order).combine_chunks().cast(pa.large_binary())
    data = records.buffers()[2]
    offsets = np.frombuffer(records.buffers()[1], dtype=np.int64)[records.offset:
                                                                   records.offset + len(records) + 1]
    raw = memoryview(data)[offsets[0]:offsets[-1]]
    if len(raw) != RECORD * len(records):
        raise RuntimeError("records are not 100 bytes each")
    out = os.path.join(workdir, "output", f"part-{bucket:05d}.dat")
    with open(out, "wb") as f:
        f.write(raw)
        f.flush()
        os.fsync(f.fileno())
    return True


def _run_scheduler(ctx, sched):
    ctx.initialize("scheduler")
    sys.exit(0 if sched.run() else 1)


def _run_executor(ctx, ex):
    ctx.initialize(ex.id)
    ex.run()


def run_plan(plan, data_root, executors, cores):
    """Runs `plan` with a scheduler and `executors` executor processes; raises on failure."""
    ctx = RuntimeContext(JobId.new(), datetime.now(), data_root, num_executors=executors,
                         secs_executor_probe_interval=1,
                         max_usable_cpu_count=max(1, cores // executors),
                         console_log_level="WARNING")
    sched = Scheduler(Planner(ctx).create_exec_plan(plan))
    procs = [Process(target=_run_scheduler, args=(ctx, sched))]
    procs += [Process(target=_run_executor, args=(ctx, Executor.create(ctx, f"executor-{i}")))
              for i in range(executors)]
    try:
        for p in reversed(procs):
            p.start()
        procs[0].join()
        for p in procs[1:]:
            p.join(timeout=60)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    if procs[0].exitcode != 0:
        raise RuntimeError(f"smallpond's scheduler failed (logs under {data_root})")


def _stat_fields(pid):
    """(command name, /proc/PID/stat's fields after it: state, ppid, ...), or None once gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    head, _, tail = text.rpartition(")")
    return head.partition("(")[2], tail.split()


def _sched(pid):
    """{thread id: (seconds on a CPU, seconds runnable but waiting for one)} of a process's
    live threads, from /proc/PID/task/TID/schedstat (nanoseconds)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                run, wait = f.read().split()[:2]
            out[int(tid)] = (int(run) / 1e9, int(wait) / 1e9)
        except (OSError, ValueError):
            pass
    return out


def _role(pid):
    """What a t3fs process serves, from its command line (`t3fs serve storage ...`: storage;
    `t3fs mount ...`: mount)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return "other"
    if len(args) > 2 and args[1] == b"serve":
        return args[2].decode(errors="replace")
    return args[1].decode(errors="replace") if len(args) > 1 else "other"


def _host_cpu():
    """(busy, idle) seconds of the whole host since boot, from /proc/stat's first line."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle and iowait
    busy = sum(ticks[:8]) - idle  # user nice system idle iowait irq softirq steal
    return busy / TICK, idle / TICK


class IoSampler:
    """What the pipeline and the storage stack did over time: every 0.25 s, the bytes this
    process's descendants (the pipeline: smallpond's scheduler and executors, DuckDB, ``t3fs
    graysort gen``) read and wrote through system calls, the CPU seconds they used, the CPU
    seconds the t3fs services used (every other process named ``t3fs``: the cluster's mgmtd,
    meta and storage services and the FUSE mount), the host's busy and idle seconds, and how
    long the pipeline's threads waited for a CPU while runnable.

    A process's last sample is kept after it exits, so a short-lived process loses at most one
    interval of CPU; the host's figures are exact. Kernel time a system call spends in FUSE is
    charged to the process that made it (the pipeline), the daemon's work to the services."""

    def __init__(self, interval=0.25):
        self.interval, self.last, self.cpu, self.services, self.samples = interval, {}, {}, {}, []
        self.sched = {}  # the pipeline's threads: (CPU seconds, seconds waiting for a CPU)
        self.first_services = {}  # service pid: its CPU seconds at the first sample
        self.roles = {}  # service pid: what it serves (storage, meta, mgmtd, kv, mount)
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _processes(self):
        """(descendants of this process, t3fs processes that are not) with their CPU seconds."""
        info = {}
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                got = _stat_fields(pid)
                if got:
                    comm, fields = got
                    try:
                        info[int(pid)] = (comm, int(fields[1]),
                                          (int(fields[11]) + int(fields[12])) / TICK)
                    except (IndexError, ValueError):
                        pass
        me, mine, services = os.getpid(), {}, {}
        for pid, (comm, _, cpu) in info.items():
            p, seen = pid, 0
            while p in info and p != me and seen < 64:
                p, seen = info[p][1], seen + 1
            if p == me and pid != me:
                mine[pid] = cpu
            elif comm == "t3fs":
                services[pid] = cpu
                if pid not in self.roles:
                    self.roles[pid] = _role(pid)
        return mine, services

    def _loop(self):
        while not self.stop_flag.is_set():
            mine, services = self._processes()
            for pid in mine:
                try:
                    with open(f"/proc/{pid}/io") as f:
                        io = dict(line.split(": ") for line in f.read().splitlines())
                    self.last[pid] = (int(io["rchar"]), int(io["wchar"]))
                except (OSError, KeyError, ValueError):
                    pass
            self.cpu.update(mine)
            for pid in mine:
                self.sched.update(_sched(pid))
            for pid, cpu in services.items():
                self.first_services.setdefault(pid, cpu)
            self.services.update(services)
            r = sum(v[0] for v in self.last.values())
            w = sum(v[1] for v in self.last.values())
            busy, idle = _host_cpu()
            self.samples.append((time.time(), r, w, sum(self.cpu.values()),
                                 sum(self.services.values()), busy, idle,
                                 sum(v[1] for v in self.sched.values())))
            time.sleep(self.interval)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_flag.set()
        self.thread.join()


def plans(o, work):
    """The generate plan and the shuffle-and-sort plan for root work directory `work`."""
    per = -(-o.records // o.gen_tasks)
    starts = list(range(0, o.records, per))
    ranges = pa.table({"start": starts, "count": [min(per, o.records - s) for s in starts]})
    ctx = Context()
    src = DataSourceNode(ctx, ArrowTableDataSet(ranges))
    parts = DataSetPartitionNode(ctx, (src,), npartitions=len(starts), partition_by_rows=True)
    gen = PythonScriptNode(ctx, (parts,), process_func=partial(
        generate, os.path.abspath(o.t3fs_bin), work, o.sort_partitions))
    first = LogicalPlan(ctx, gen)

    def second():
        ctx = Context()
        files = sorted(glob.glob(os.path.join(work, "parquet", "*.parquet")))
        src = DataSourceNode(ctx, ParquetDataSet(files))
        parts = DataSetPartitionNode(ctx, (src,), npartitions=len(files))
        shuffled = ShuffleNode(ctx, (parts,), npartitions=o.sort_partitions,
                               data_partition_column="buckets", engine_type="duckdb")
        return LogicalPlan(ctx, PythonScriptNode(ctx, (shuffled,),
                                                 process_func=partial(sort_partition, work)))
    return first, second


def valsort(o, work):
    parts = sorted(glob.glob(os.path.join(work, "output", "part-*.dat")))
    out = subprocess.run([o.t3fs_bin, "graysort", "valsort", "--json", "--input-rows",
                          str(o.records), *parts], capture_output=True, text=True)
    if out.returncode not in (0, 1):
        return {"ok": False, "error": out.stderr.strip(), "parts": len(parts)}
    v = json.loads(out.stdout)
    v["parts"] = len(parts)
    return v


def one_root(o, root):
    work = os.path.join(os.path.abspath(root), f"graysort-{os.getpid()}")
    for d in ("input", "parquet", "output", "marks", "sp/data"):
        os.makedirs(os.path.join(work, d), exist_ok=True)
    first, second = plans(o, work)
    cores = os.cpu_count() or 1
    with IoSampler() as io:
        t0 = time.time()
        run_plan(first, os.path.join(work, "sp/data"), o.executors, cores)
        t1 = time.time()
        run_plan(second(), os.path.join(work, "sp/data"), o.executors, cores)
        t2 = time.time()
    marks = []
    for m in glob.glob(os.path.join(work, "marks", "*")):
        with open(m) as f:
            marks.append(float(f.read()))
    t_sort = min(marks) if marks else t2
    v = valsort(o, work)
    if not o.keep:
        shutil.rmtree(work, ignore_errors=True)
    phases = [("generate", 0.0), ("shuffle", t1 - t0), ("sort", t_sort - t0)]
    samples = [(x[0] - t0, *x[1:]) for x in io.samples]
    roles = {}
    for pid, cpu in io.services.items():
        first = io.first_services.get(pid, 0.0)
        role = io.roles.get(pid, "other")
        roles[role] = roles.get(role, 0.0) + cpu - first
    return {"root": root, "seconds": t2 - t0, "phases": phases, "samples": samples, "valsort": v,
            "phase_secs": {"generate": t1 - t0, "shuffle": t_sort - t1, "sort": t2 - t_sort},
            "service_roles": roles}


def phase_io(r):
    """Per phase: (seconds, MiB/s read, MiB/s written, CPU seconds used by the pipeline, by
    the t3fs services, the host's busy and idle seconds, the seconds the pipeline's threads
    waited for a CPU) from the sampler."""
    out = {}
    bounds = [p[1] for p in r["phases"]] + [r["seconds"]]
    s = r["samples"]
    if not s:
        return {name: (max(bounds[k + 1] - start, 1e-9), 0, 0, 0, 0, 0, 0, 0)
                for k, (name, start) in enumerate(r["phases"])}
    for k, (name, start) in enumerate(r["phases"]):
        end = bounds[k + 1]
        before = [x for x in s if x[0] <= start]
        inside = [x for x in s if x[0] <= end]
        x0 = before[-1] if before else s[0]
        x1 = inside[-1] if inside else s[0]
        secs = max(end - start, 1e-9)
        d = [x1[i] - x0[i] for i in range(1, 8)]
        out[name] = (secs, d[0] / 2**20 / secs, d[1] / 2**20 / secs, *d[2:])
    return out


def binding(pio):
    """Each phase's CPU accounting, from phase_io: the pipeline's and the t3fs services' CPU
    seconds, the host's busy share (near 1: CPU binds; lower: something else does, latency or a
    serial stage) and the seconds the pipeline's threads waited for a CPU."""
    out = {}
    for name, (secs, _, _, pipe, svc, busy, idle, runq) in pio.items():
        total = busy + idle
        out[name] = {"seconds": secs, "pipeline_cpu_s": pipe, "services_cpu_s": svc,
                     "host_busy": busy / total if total > 0 else 0.0, "runqueue_s": runq}
    return out


def series(r, interval=0.25):
    """Bytes read and written per interval, from the sampler's cumulative counts."""
    n = int(r["seconds"] / interval) + 1
    reads, writes = [0] * n, [0] * n
    prev = (0, 0)
    for t, rd, wr, *_ in r["samples"]:
        i = min(max(int(t / interval), 0), n - 1)
        reads[i] += max(rd - prev[0], 0)
        writes[i] += max(wr - prev[1], 0)
        prev = (rd, wr)
    return {"interval": interval, "ops": {}, "counters": {"bytes.read": reads, "bytes.write": writes}}


def write_run(o, r, name, bound):
    """`r` as a run directory of t3fs's format under o.out/name, rendered by `t3fs report`."""
    d = os.path.join(o.out, name)
    v = r["valsort"]
    gib = o.records * RECORD / 2**30
    rate = gib / (r["seconds"] / 60)
    detail = (f"{v.get('records')} records of {o.records}, {v.get('parts')} parts, "
              f"{v.get('unordered')} unordered, {v.get('duplicates')} duplicate keys, checksum "
              f"{v.get('checksum')} (input {v.get('input_checksum')}) {v.get('error', '')}").strip()
    verdicts = [{"name": "valsort: ordered, same records as the input",
                 "label": "PASS" if v.get("ok") else "FAIL", "detail": detail}]
    bounds = [{"name": bound[0], "value": bound[1]}] if bound else []
    roofline = [{"op": "graysort", "unit": "GiB/min", "measured": rate, "bounds": bounds,
                 "binding": bound[0] if bound else "", "percent": 100 * rate / bound[1] if bound else 0,
                 "saturated": ""}]
    pio = phase_io(r)
    counters = {f"phase.{k}.ms": int(v[0] * 1000) for k, v in pio.items()}
    for k, b in binding(pio).items():
        # Not under phase.*.ms, which graysort_twin.py reads as the phases' lengths.
        counters[f"cpu.{k}.pipeline.ms"] = int(b["pipeline_cpu_s"] * 1000)
        counters[f"cpu.{k}.services.ms"] = int(b["services_cpu_s"] * 1000)
        counters[f"cpu.{k}.host_busy.permille"] = int(b["host_busy"] * 1000)
        counters[f"cpu.{k}.pipeline_runqueue.ms"] = int(b["runqueue_s"] * 1000)
    for role, cpu in r["service_roles"].items():
        counters[f"cpu.services.{role}.ms"] = int(cpu * 1000)
    config = "\n".join(f"{k} = {json.dumps(getattr(o, k))}" for k in
                       ("records", "gen_tasks", "sort_partitions", "executors")) + "\n"
    manifest = {
        "scenario": f"graysort on {name}",
        "about": f"smallpond GraySort of {o.records} records ({gib:.2f} GiB) with {o.executors} "
                 f"executors on {r['root']}",
        "config": config, "exit": 0 if v.get("ok") else 1,
        "reason": "" if v.get("ok") else "valsort failed",
        "seconds": r["seconds"], "verdicts": verdicts, "counters": counters,
        "shape": f"{name}: {r['root']}", "roofline": roofline,
    }
    events = [{"t": at, "kind": "phase", "node": "", "what": pname} for pname, at in r["phases"]]
    rundir.write(d, o.t3fs_bin, manifest, events, series(r))
    return d, rate, pio


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("--t3fs-bin", required=True)
    a.add_argument("--root", action="append", required=True,
                   help="a directory to sort on (repeat: the t3fs mount, a local directory)")
    a.add_argument("--records", type=int, default=1_000_000)
    a.add_argument("--gen-tasks", type=int, default=4)
    a.add_argument("--sort-partitions", type=int, default=4)
    a.add_argument("--executors", type=int, default=2)
    a.add_argument("--out", default="runs/graysort")
    a.add_argument("--keep", action="store_true", help="keep the input, shuffle and output files")
    o = a.parse_args()
    results = []
    for root in o.root:
        name = "mount" if rundir.is_mount(root) else "local"
        print(f"graysort on {name} ({root}): {o.records} records, {o.executors} executors ...",
              flush=True)
        results.append((name, one_root(o, root)))
    local = next((r for n, r in results if n == "local"), None)
    local_rate = local and o.records * RECORD / 2**30 / (local["seconds"] / 60)
    ok = True
    print(f"{'root':<6} {'GiB/min':>8} {'seconds':>8}  phases (s, read MiB/s, write MiB/s)  valsort")
    for name, r in results:
        bound = ("local directory, same run", local_rate) if name != "local" and local else None
        d, rate, pio = write_run(o, r, name, bound)
        ok &= bool(r["valsort"].get("ok"))
        phases = "; ".join(f"{k} {v[0]:.1f} s r {v[1]:.0f} w {v[2]:.0f}" for k, v in pio.items())
        verdict = "PASS" if r["valsort"].get("ok") else f"FAIL {r['valsort']}"
        print(f"{name:<6} {rate:>8.3f} {r['seconds']:>8.1f}  {phases}  {verdict}")
        roles = ", ".join(f"{k} {v:.1f}" for k, v in sorted(r["service_roles"].items(),
                                                             key=lambda kv: -kv[1]))
        print(f"       t3fs services' CPU s over the whole run: {roles}")
        for k, b in binding(pio).items():
            print(f"       {k:<8} CPU s: pipeline {b['pipeline_cpu_s']:6.1f}  t3fs services "
                  f"{b['services_cpu_s']:6.1f}  host busy {100 * b['host_busy']:3.0f}%  pipeline "
                  f"waited {b['runqueue_s']:5.1f} s for a CPU")
        if bound:
            print(f"       {100 * rate / bound[1]:.0f}% of the local directory's rate; run directory {d}")
        else:
            print(f"       run directory {d}")
    if local and len(results) > 1:
        print(what_binds(results, local))
    sys.exit(0 if ok else 1)


def what_binds(results, local):
    """One paragraph per other run: how much longer it took than the local one, the extra CPU
    it cost (the t3fs services beyond their idle use in the local run, the pipeline's own
    system calls through FUSE), and how much longer the pipeline's threads waited for a CPU;
    time neither accounts for is the pipeline blocked on the file system (a request's round
    trip, a chain's replication, an fsync)."""
    cores = os.cpu_count() or 1
    lines = []
    lb = binding(phase_io(local))
    total = lambda b, key: sum(x[key] for x in b.values())
    for name, r in results:
        if r is local:
            continue
        b = binding(phase_io(r))
        svc = total(b, "services_cpu_s") - total(lb, "services_cpu_s")
        pipe = total(b, "pipeline_cpu_s") - total(lb, "pipeline_cpu_s")
        runq = total(b, "runqueue_s") - total(lb, "runqueue_s")
        extra = r["seconds"] - local["seconds"]
        lines.append(
            f"what binds on the {name}: it took {extra:.1f} s longer than the local directory. "
            f"It cost {svc:.1f} CPU s more in the t3fs services and {pipe:+.1f} in the pipeline "
            f"(its system calls through FUSE): {(svc + pipe) / cores:.1f} s of this host's "
            f"{cores} cores. The pipeline's threads waited {runq:+.1f} s more for a CPU (summed "
            f"over its threads); the host was {100 * min(x['host_busy'] for x in b.values()):.0f}"
            f"-{100 * max(x['host_busy'] for x in b.values()):.0f}% busy by phase "
            f"({100 * min(x['host_busy'] for x in lb.values()):.0f}"
            f"-{100 * max(x['host_busy'] for x in lb.values()):.0f}% on the local directory).")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
