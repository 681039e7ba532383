#!/usr/bin/env bash
# MLPerf Storage's unet3d training with the real DLIO on a t3fs FUSE mount and, in the same run,
# a local directory, at its smallest size (issue 40, item 7): DLIO goes into the Python package's
# cached environment (scripts/dlio-env.sh; scripts/python-tests.sh installed the t3fs package
# there), a cluster and a mount are started and stopped, pass or fail, and python/bench/dlio.py
# must see DLIO train and report at 1 and 2 accelerators on the mount, on the mount's data read
# by the native client (DLIO's custom reader t3fs.dlio.T3fsNpzReader), and on the local
# directory.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${T3FS_DLIO_VENV:-${T3FS_PY_VENV:-$HOME/.cache/t3fs/py-venv}}
bash scripts/dlio-env.sh "$VENV"
T3FS_BIN=${T3FS_BIN:-$PWD/target/release/t3fs}
[ -x "$T3FS_BIN" ] || cargo build --release --locked
tmp=$(mktemp -d /tmp/t3fs-dlio.XXXXXX)
mount_pid=
cleanup() {
  fusermount3 -uz "$tmp/mnt" 2>/dev/null || true
  [ -n "$mount_pid" ] && kill "$mount_pid" 2>/dev/null || true
  "$T3FS_BIN" cluster down --dir "$tmp/cluster" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
"$T3FS_BIN" cluster up --dir "$tmp/cluster" >/dev/null
mkdir -p "$tmp/mnt" "$tmp/local"
"$T3FS_BIN" mount --cluster "$tmp/cluster" "$tmp/mnt" 2>"$tmp/mount.log" &
mount_pid=$!
for _ in $(seq 300); do
  grep -q " $tmp/mnt fuse" /proc/mounts && break
  sleep 0.1
done
grep -q " $tmp/mnt fuse" /proc/mounts || { echo "error: the mount did not come up" >&2; cat "$tmp/mount.log" >&2; exit 1; }
# DLIO's ranks start `dlio_benchmark` from PATH.
PATH="$VENV/bin:$PATH" timeout 900 "$VENV/bin/python" python/bench/dlio.py \
  --t3fs-bin "$T3FS_BIN" --root "$tmp/mnt" --root "$tmp/local" --files 42 \
  --record-bytes 1048576 --epochs 1 --accelerators 1,2 --native-cluster "$tmp/cluster" \
  --out target/runs/dlio
for name in mount native local; do
  grep -q '"label": "PASS"' "target/runs/dlio/$name/manifest.json" \
    || { echo "error: DLIO did not train on $name" >&2; exit 1; }
done
