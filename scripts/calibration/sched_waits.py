#!/usr/bin/env python3
"""Which threads of a loopback cluster wait for a core, and how long, per operation of a job.

Usage: sched_waits.py CLUSTER_DIR -- T3FS bench io --cluster CLUSTER_DIR ... --out OUT

Reads every cluster process's per-thread scheduler accounting (/proc/PID/task/TID/schedstat:
time on a core, time runnable but waiting for one, timeslices) before and after the command,
and the bench's own threads while it runs (sampled every 50 ms: its last 50 ms are missed), then
prints, per process and thread name, the CPU time and the wait per operation (the bench's
`total_ios` from OUT/summary.json). This is how the 2026-12-03 finding was made: in a depth-1
1 MiB write on a 2-core host the head's store thread ran 312 us and waited 327 us for a core per
write while the transport's tokio workers on the head ran 710 us and waited 590 us, which the
simulator's cores (each request's CPU reserved whole on the earliest free core) do not show.
Linux only (schedstat); standard library only.
"""
import json
import os
import subprocess
import sys
import time


def threads(pid):
    """{(tid, thread name): (run ns, wait ns, timeslices)} of one process, as far as readable."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[(tid, comm)] = tuple(map(int, f.read().split()[:3]))
        except OSError:
            continue
    return out


def services(cluster):
    """{pid: node name} of the processes serving CLUSTER_DIR (`t3fs serve ... --config DIR/NODE/`)."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline") as f:
                args = f.read().split("\0")
        except OSError:
            continue
        if "serve" in args and "--config" in args:
            cfg = os.path.realpath(args[args.index("--config") + 1])
            if cfg.startswith(os.path.realpath(cluster) + os.sep):
                found[pid] = os.path.basename(os.path.dirname(cfg))
    return found


def snapshot(procs):
    return {(name, key): v for pid, name in procs.items() for key, v in threads(pid).items()}


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit(__doc__)
    cluster, cmd = sys.argv[1], sys.argv[3:]
    if "--out" not in cmd:
        sys.exit("the bench command needs --out (its summary.json gives the operations)")
    out_dir = cmd[cmd.index("--out") + 1]
    procs = services(cluster)
    if not procs:
        sys.exit(f"no `t3fs serve` process with a config under {cluster}: is the cluster up?")
    before = snapshot(procs)
    bench = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    client = {}
    while bench.poll() is None:
        client.update(snapshot({str(bench.pid): "client"}))
        time.sleep(0.05)
    if bench.returncode != 0:
        sys.exit(f"the bench failed (exit {bench.returncode}): {' '.join(cmd)}")
    after = snapshot(procs)
    after.update(client)
    with open(os.path.join(out_dir, "summary.json")) as f:
        ops = sum(k["total_ios"] for j in json.load(f)["jobs"] for s, k in j.items()
                  if isinstance(k, dict) and "total_ios" in k)
    rows = {}
    for (name, (tid, comm)), v in after.items():
        v0 = before.get((name, (tid, comm)), (0, 0, 0))
        # io_uring workers and tokio workers are many threads of one role: sum them by name.
        role = comm.split("-")[0] + "-wrk" if comm.startswith("iou-wrk") else comm
        r = rows.setdefault((name, role), [0, 0, 0])
        for i in range(3):
            r[i] += v[i] - v0[i]
    print(f"{ops} operations; per operation, in microseconds:")
    print(f"{'process':12} {'thread':18} {'on a core':>10} {'waiting':>10} {'timeslices':>11}")
    for (name, role), (run, wait, sl) in sorted(rows.items(), key=lambda x: -x[1][1]):
        if run + wait >= ops * 1000:  # below 1 us per operation: idle threads
            print(f"{name:12} {role:18} {run / ops / 1e3:10.0f} {wait / ops / 1e3:10.0f} "
                  f"{sl / ops:11.1f}")


if __name__ == "__main__":
    main()
