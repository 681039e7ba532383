#!/usr/bin/env bash
# The Python benchmarks at full size and `t3fs calibrate` on a bigger host (the device machine:
# 16 cores, a GPU, no network), in one bounded run. It takes a prebuilt release binary and the
# package's wheel from $1 (default .dev: `t3fs` and `t3fs-*.whl`, built on an x86-64 host) and
# the host's own python3 with torch; every result goes into $OUT/results.tar.gz, the log into
# $OUT/log.txt. Each step has its own time limit; a step that fails or times out is logged
# and the rest still run. The cluster is stopped on exit, pass or fail. FILES, FILES_3M,
# CKPT_MIB, READ_MIB, LIST_FILES and CALIBRATE_ARGS shrink it for a try on a small host.
set -u
cd "$(dirname "$0")/../.."
DEV=$(realpath "${1:-.dev}")
OUT=${OUT:-/tmp/t3fs-device-out}
mkdir -p "$OUT"
RES=/tmp/t3fs-results
rm -rf "$RES" /tmp/t3fs-c && mkdir -p "$RES"
exec > >(tee "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1
BIN=$DEV/t3fs
chmod +x "$BIN"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$DEV"/t3fs-*.whl || exit 1
export PYTHONPATH=/tmp/site
echo "host: $(nproc) CPUs, $(free -g | awk '/Mem/ {print $2}') GiB; $(nvidia-smi -L 2>/dev/null || echo no GPU)"
echo "fuse: $(command -v fusermount3 || echo no fusermount3) $(ls /dev/fuse 2>/dev/null || echo no /dev/fuse)"
python3 -c "import torch, fsspec; print('torch', torch.__version__, 'fsspec', fsspec.__version__)"

step() { # step SECONDS NAME COMMAND...
  local s=$1 name=$2; shift 2
  echo "=== $name (limit ${s}s) $(date +%T)"
  timeout "$s" "$@" || echo "=== $name: exit $?"
}
"$BIN" cluster up --dir /tmp/t3fs-c >"$RES/cluster-up.log" 2>&1 || { cat "$RES/cluster-up.log"; exit 1; }
trap '"$BIN" cluster down --dir /tmp/t3fs-c >/dev/null 2>&1; tar -C "$RES" -czf "$OUT/results.tar.gz" .' EXIT
C=(--cluster /tmp/t3fs-c --t3fs-bin "$BIN")
B=python/bench
step 100 "GPU training loop, 20000 x 100 KiB" python3 $B/gpu_train.py "${C[@]}" --files "${FILES:-20000}" --workers 8 --out "$RES/gpu-train"
step 60 "DataLoader epoch, 20000 x 100 KiB" python3 $B/small_files.py "${C[@]}" --files "${FILES:-20000}" --workers 8 --out "$RES/small-100k"
step 45 "DataLoader epoch, 1000 x 3 MiB" python3 $B/small_files.py "${C[@]}" --files "${FILES_3M:-1000}" --size 3145728 --workers 8 --out "$RES/small-3m"
step 50 "checkpoint 1 GiB" python3 $B/checkpoint.py "${C[@]}" --mib "${CKPT_MIB:-1024}" --depth 32 --out "$RES/checkpoint"
step 40 "readahead windows" python3 $B/readahead.py --cluster /tmp/t3fs-c --mib "${READ_MIB:-256}" --rounds 3 --out "$RES/readahead"
step 70 "listing 100000" python3 $B/listing.py "${C[@]}" --files "${LIST_FILES:-100000}" --out "$RES/listing"
"$BIN" cluster down --dir /tmp/t3fs-c >/dev/null 2>&1
step 100 "calibrate" "$BIN" calibrate ${CALIBRATE_ARGS:---repeats 2 --seconds 4} --out "$RES/calibrate"
echo "=== done $(date +%T)"
