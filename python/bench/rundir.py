"""A t3fs run directory written from Python (the format of t3fs-reports: manifest.json,
events.jsonl, series.json, chains.json, history.jsonl, hist/), rendered by ``t3fs report``; and
what the workload scripts share about where they run: the checkout's commit and whether a
directory is a FUSE mount.

Not here: what a run measured (graysort.py, dlio.py).
"""

import json
import os
import subprocess
import sys


# The `[cluster]` of a twin's performance scenario: `t3fs cluster up`'s loopback cluster (3
# storage nodes, 3 replicas) and this host as its one client.
LOOPBACK_CLUSTER = """[cluster]
storage_nodes = 3       # cluster up's loopback cluster
clients = 1             # this host
targets_per_disk = 1
replicas = 3
table = "balanced"
"""


def commit():
    """The checkout's commit (the report's provenance), or empty outside a git checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run(["git", "-C", here, "rev-parse", "--short=12", "HEAD"],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def is_mount(path):
    """Whether `path` lies on a FUSE file system (the t3fs mount), from /proc/self/mountinfo."""
    best, fstype = "", ""
    real = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split(" ")[4]
            inside = real == point or real.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best):
                best, fstype = point, line.split(" - ")[1].split(" ")[0]
    return fstype.startswith("fuse")


def write(d, t3fs_bin, manifest, events=(), series=None, files=None):
    """Writes run directory `d` (manifest fields beyond the defaults in `manifest`), then renders
    its report with `t3fs report`."""
    os.makedirs(os.path.join(d, "hist"), exist_ok=True)
    m = {"commit": commit(), "seed": 0, "mode": "real", "command": " ".join(sys.argv),
         "host": os.uname().nodename, "profile": "", "trace": "", "events": 0,
         "faults_reached": {}, "rows_reached": {}, "probe": {}, "reason": ""}
    m.update(manifest)
    texts = {
        "manifest.json": json.dumps(m, indent=1),
        "events.jsonl": "".join(json.dumps(e) + "\n" for e in events),
        "history.jsonl": "",
        "chains.json": "[]",
        "series.json": json.dumps(series or {"interval": 1.0, "ops": {}, "counters": {}}),
    }
    texts.update(files or {})
    for name, text in texts.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    subprocess.run([t3fs_bin, "report", d], check=True, capture_output=True)
    return d


def compare_twin(t3fs_bin, run, twin, out):
    """`t3fs report compare RUN TWIN --out OUT` (a real run beside its simulated twin); exits
    with the tool's error if it fails. Prints where the comparison is."""
    done = subprocess.run([t3fs_bin, "report", "compare", run, twin, "--out", out],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: t3fs report compare: {done.stderr.strip()}")
    print(f"         side by side: {out}/compare.html")


def sim_twin(t3fs_bin, text, path, out, name):
    """Writes scenario `text` to `path`, runs `t3fs sim run PATH --out OUT` (exiting with its
    error if it fails), prints its summary line and returns the twin's run directory (scenario
    `name`, seed 1)."""
    with open(path, "w") as f:
        f.write(text)
    sim = subprocess.run([t3fs_bin, "sim", "run", path, "--out", out],
                         capture_output=True, text=True)
    if sim.returncode != 0:
        sys.exit(f"error: t3fs sim run {path}: {sim.stderr.strip()}")
    print(f"twin: {sim.stdout.strip().splitlines()[0]}")
    return os.path.join(out, f"{name}-flow-seed1")
