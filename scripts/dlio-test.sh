#!/usr/bin/env bash
# MLPerf Storage's unet3d training with the real DLIO on a t3fs FUSE mount and, in the same run,
# a local directory, at its smallest size (issue 40, item 7): DLIO goes into the Python package's
# cached environment (scripts/dlio-env.sh; scripts/python-tests.sh installed the t3fs package
# there), a cluster and a mount are started and stopped, pass or fail, and python/bench/dlio.py
# must see DLIO train and report at 1 and 2 accelerators on the mount, on the mount's data read
# by the native client (DLIO's custom reader t3fs.dlio.T3fsNpzReader), and on the local
# directory, and save a checkpoint with DLIO's checkpoint step on the mount and the local
# directory.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${T3FS_DLIO_VENV:-${T3FS_PY_VENV:-$HOME/.cache/t3fs/py-venv}}
bash scripts/dlio-env.sh "$VENV"
T3FS_BIN=${T3FS_BIN:-$PWD/target/release/t3fs}
[ -x "$T3FS_BIN" ] || cargo build --release --locked
# shellcheck source=lib/cluster-mount.sh
source scripts/lib/cluster-mount.sh
t3fs_cluster_and_mount dlio
tmp=$T3FS_TMP
# DLIO's ranks start `dlio_benchmark` from PATH.
PATH="$VENV/bin:$PATH" timeout 900 "$VENV/bin/python" python/bench/dlio.py \
  --t3fs-bin "$T3FS_BIN" --root "$tmp/mnt" --root "$tmp/local" --files 42 \
  --record-bytes 1048576 --epochs 1 --accelerators 1,2 --native-cluster "$tmp/cluster" \
  --checkpoint-mib 32 \
  --out target/runs/dlio
for name in mount native local; do
  grep -q '"exit": 0,' "target/runs/dlio/$name/manifest.json" \
    || { echo "error: DLIO did not train (or save its checkpoint) on $name" >&2; exit 1; }
done

# The runs' simulated twin (issue 40 item 6): the performance model's training run of the same
# shape (DLIO's workload file's computation time, the runs' sample size and accelerator
# counts), each real run beside it in `t3fs report compare`.
"$VENV/bin/python" python/bench/dlio_twin.py --t3fs-bin "$T3FS_BIN" --run target/runs/dlio/mount \
  --run target/runs/dlio/native --run target/runs/dlio/local --out target/runs/dlio/twin
for name in mount native local; do
  test -s "target/runs/dlio/twin/compare-$name/compare.md" \
    || { echo "error: no comparison of the $name run with its twin" >&2; exit 1; }
done
