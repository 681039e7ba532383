#!/usr/bin/env bash
# GraySort through the real smallpond on a t3fs FUSE mount and, in the same run, a local
# directory, at a size of seconds (issue 40, item 7): smallpond 0.15 (with duckdb < 1.5, which
# it needs) goes into a cached environment of its own, because it pins pyarrow 16 and the
# package's environment has a newer one. Starts a cluster and a mount, runs
# python/bench/graysort.py (which fails unless valsort passes on both), and stops both, pass or
# fail.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${T3FS_WORKLOADS_VENV:-$HOME/.cache/t3fs/workloads-venv}
bash scripts/workloads-env.sh "$VENV"

T3FS_BIN=${T3FS_BIN:-$PWD/target/release/t3fs}
[ -x "$T3FS_BIN" ] || cargo build --release --locked
# shellcheck source=lib/cluster-mount.sh
source scripts/lib/cluster-mount.sh
t3fs_cluster_and_mount graysort
tmp=$T3FS_TMP
# smallpond's executors start `python` from PATH.
PATH="$VENV/bin:$PATH" timeout 600 "$VENV/bin/python" python/bench/graysort.py \
  --t3fs-bin "$T3FS_BIN" --root "$tmp/mnt" --root "$tmp/local" --records 100000 \
  --gen-tasks 2 --sort-partitions 2 --executors 2 --out target/runs/graysort 2>"$tmp/smallpond.log" \
  || { echo "error: graysort failed; smallpond's log:" >&2; tail -40 "$tmp/smallpond.log" >&2; exit 1; }

# The run's simulated twin (issue 40 item 6): this host's per-core costs at a size of seconds
# (noise-bound at this size: the path is what CI checks, not the figure), the performance
# model's pipeline run of the same shape, and each real run beside it in `t3fs report compare`.
"$VENV/bin/python" python/bench/graysort_costs.py --t3fs-bin "$T3FS_BIN" --rows 100000,200000 \
  --partitions 2,8 --repeat 1 --scaling-rows 100000 --dir "$tmp" >"$tmp/costs.json" \
  2>"$tmp/costs.log" \
  || { echo "error: graysort_costs.py failed:" >&2; tail -20 "$tmp/costs.log" >&2; exit 1; }
"$VENV/bin/python" python/bench/graysort_twin.py --t3fs-bin "$T3FS_BIN" --costs "$tmp/costs.json" \
  --run target/runs/graysort/mount --run target/runs/graysort/local --out target/runs/graysort/twin
for side in mount local; do
  test -s "target/runs/graysort/twin/compare-$side/compare.md" \
    || { echo "error: no comparison of the $side run with its twin" >&2; exit 1; }
done
