"""What one core costs per byte in smallpond GraySort's two phases, measured on this host with
the engines the published benchmark (smallpond ``benchmarks/gray_sort_benchmark.py``) runs,
for the performance model's GraySort scenario (``scenarios/perf/3fs_graysort.toml``).

- shuffle: a task as smallpond's ``HashPartitionDuckDbTask`` runs it, on one DuckDB thread:
  load the input Parquet into a table ordered by bucket, then one ``COPY (SELECT ... WHERE
  buckets = i) TO ... (FORMAT PARQUET)`` per partition;
- sort: a task as the benchmark's ``sort_records`` with its default engine, polars on one
  thread: read the partition's Parquet (keys, records), sort by key, write the records as raw
  ``.dat``.

Each is timed in CPU seconds of this process (user + system) at several input sizes (and, for the
shuffle, two partition counts), the least of `--repeat` runs, then fitted to ``rows x (a + b log2 rows) (+ partitions x c)``,
a comparison sort's shape plus a per-partition cost, and the fit is evaluated at the task shape
of 3FS's run (110.5 TiB, 8,192 partitions, 4,800 shuffle tasks and 8,192 sort tasks under the
script's defaults). Files go to a local directory: the page cache's write cost is in the
figure, the disk's is not. A task of k cores is not k times one core: each phase's task is
also timed on one thread and on all of this host's cores (wall time, best of three), which gives
Amdahl's serial share s of the task, and the scenario's slots run at 1 / (s + (1 - s) / k) cores.

    POLARS_MAX_THREADS=1 python python/bench/graysort_costs.py --t3fs-bin target/release/t3fs

Prints the measurements and the per-core MiB/s the scenario takes, as JSON.
"""

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("POLARS_MAX_THREADS", "1")

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import polars  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

RECORD = 100
MIB = 1 << 20


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def gen_parquet(t3fs_bin, rows, buckets, path):
    """`rows` gensort records as the benchmark's input Parquet: (buckets, keys, records)."""
    dat = path + ".dat"
    subprocess.run([t3fs_bin, "graysort", "gen", "--start", "0", "--count", str(rows),
                    "--out", dat], check=True, capture_output=True)
    raw = np.fromfile(dat, dtype=np.uint8).reshape(-1, RECORD)
    os.unlink(dat)
    records = pa.FixedSizeBinaryArray.from_buffers(pa.binary(RECORD), len(raw),
                                                    [None, pa.py_buffer(raw.tobytes())])
    b = (raw[:, 0].astype(np.int64) - 32) * 95 + (raw[:, 1].astype(np.int64) - 32)
    table = pa.table({"buckets": (b * buckets // (95 * 95)).astype(np.int32),
                      "keys": pc.binary_slice(records.cast(pa.binary()), 0, 10),
                      "records": records.cast(pa.binary())})
    pq.write_table(table, path, row_group_size=1 << 20)


def shuffle_cost(src, partitions, out, threads=1):
    """CPU seconds of one shuffle task over `src` into `partitions` Parquet files: the partitions
    are written by `threads` workers, each on its own cursor, as smallpond's io_workers do."""
    os.makedirs(out, exist_ok=True)
    t0 = cpu()
    with duckdb.connect(":memory:") as conn:
        conn.execute(f"SET threads TO {threads}")
        conn.execute(f"CREATE TABLE t AS SELECT * FROM read_parquet('{src}') ORDER BY buckets")

        def write(batch):
            with conn.cursor() as cur:
                for i in batch:
                    cur.execute(f"COPY (SELECT * FROM t WHERE buckets = {i}) TO "
                                f"'{out}/p-{i}.parquet' (FORMAT PARQUET, ROW_GROUP_SIZE 10485760)")

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(write, [range(k, partitions, threads) for k in range(threads)]))
    spent = cpu() - t0
    shutil.rmtree(out)
    return spent


def sort_cost(src, out):
    """CPU seconds of one sort task over `src` (the benchmark's polars engine)."""
    t0 = cpu()
    data = polars.read_parquet(src, columns=["keys", "records"], rechunk=False)
    records = data.sort("keys").get_column("records")
    with open(out, "wb") as f:
        for chunk in records.get_chunks():
            arr = chunk.to_arrow()
            f.write(memoryview(arr.buffers()[2]))
    spent = cpu() - t0
    os.unlink(out)
    return spent


def wall_of(phase, src, threads, partitions):
    """Wall seconds of one `phase` task on `threads` threads, in a process of its own (polars
    reads its thread count once, at import)."""
    env = dict(os.environ, POLARS_MAX_THREADS=str(threads))
    code = (f"import sys, time; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
            f"import graysort_costs as g; t = time.perf_counter(); "
            + (f"g.sort_cost({src!r}, {src + '.out'!r})" if phase == "sort" else
               f"g.shuffle_cost({src!r}, {partitions}, {src + '.dir'!r}, {threads})")
            + "; print(time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def serial_fraction(phase, src, partitions, threads):
    """Amdahl's serial share of a task from its wall time on 1 and `threads` threads (best of
    three each): T(k) = T(1) (s + (1 - s) / k)."""
    t1 = min(wall_of(phase, src, 1, partitions) for _ in range(3))
    tk = min(wall_of(phase, src, threads, partitions) for _ in range(3))
    k = threads
    return {"t1": t1, "tk": tk, "threads": k,
            "serial": max(0.0, min(1.0, (tk / t1 - 1 / k) / (1 - 1 / k)))}


def speedup(serial, k):
    return 1 / (serial + (1 - serial) / k)


def fit(points, with_partitions):
    """Least squares of seconds = rows (a + b log2 rows) (+ partitions c): (a, b[, c])."""
    cols = [[r, r * math.log2(r)] + ([p] if with_partitions else []) for r, p, _ in points]
    coef, *_ = np.linalg.lstsq(np.array(cols, dtype=float),
                               np.array([s for *_, s in points]), rcond=None)
    return [float(c) for c in coef]


def per_core_mib_s(coef, rows, partitions=None):
    secs = rows * (coef[0] + coef[1] * math.log2(rows))
    if partitions is not None:
        secs += partitions * coef[2]
    return rows * RECORD / MIB / secs


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("--t3fs-bin", required=True)
    a.add_argument("--rows", default="1000000,4000000", help="input sizes, records")
    a.add_argument("--partitions", default="64,1024", help="shuffle partition counts")
    a.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    a.add_argument("--repeat", type=int, default=2, help="runs of each task; the least CPU counts")
    a.add_argument("--scaling-rows", type=int, default=4000000,
                   help="records of the task timed on 1 and all cores for Amdahl's serial share")
    o = a.parse_args()
    sizes = [int(x) for x in o.rows.split(",")]
    parts = [int(x) for x in o.partitions.split(",")]
    work = tempfile.mkdtemp(prefix="graysort-costs-", dir=o.dir)
    shuffle, sort = [], []
    try:
        for rows in sizes:
            src = os.path.join(work, f"in-{rows}.parquet")
            gen_parquet(o.t3fs_bin, rows, max(parts), src)
            for p in parts:
                spent = min(shuffle_cost(src, p, os.path.join(work, "out")) for _ in range(o.repeat))
                shuffle.append((rows, p, spent))
                print(f"shuffle {rows} rows into {p} partitions: {shuffle[-1][2]:.2f} CPU-s",
                      file=sys.stderr)
            spent = min(sort_cost(src, os.path.join(work, "out.dat")) for _ in range(o.repeat))
            sort.append((rows, None, spent))
            print(f"sort {rows} rows: {sort[-1][2]:.2f} CPU-s", file=sys.stderr)
            os.unlink(src)
        src = os.path.join(work, "scaling.parquet")
        gen_parquet(o.t3fs_bin, o.scaling_rows, max(parts), src)
        cores = os.cpu_count() or 1
        scaling = {ph: serial_fraction(ph, src, max(parts), cores) for ph in ("shuffle", "sort")}
        print(f"serial shares on {cores} cores: "
              + ", ".join(f"{k} {v['serial']:.2f}" for k, v in scaling.items()), file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sh, so = fit(shuffle, True), fit(sort, False)
    # 3FS's run under the benchmark script's defaults: 110.5 TiB of 100-byte records, 8,192
    # sort partitions, num_data_partitions = cores / 2 = 4,800 shuffle tasks.
    total = 110.5 * 2**40 / RECORD
    print(json.dumps({
        "host_cpu": open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t"),
        "shuffle_cpu_s": shuffle, "sort_cpu_s": sort,
        "shuffle_fit_a_b_c": sh, "sort_fit_a_b": so,
        "measured_shuffle_core_mib_s": [r * RECORD / MIB / s for r, _, s in shuffle],
        "measured_sort_core_mib_s": [r * RECORD / MIB / s for r, _, s in sort],
        "3fs_shuffle_core_mib_s": per_core_mib_s(sh, total / 4800, 8192),
        "3fs_sort_core_mib_s": per_core_mib_s(so, total / 8192),
        "scaling": scaling,
        "3fs_shuffle_speedup_2_cores": speedup(scaling["shuffle"]["serial"], 2),
        "3fs_sort_speedup_8_cores": speedup(scaling["sort"]["serial"], 8),
    }, indent=1))


if __name__ == "__main__":
    main()
