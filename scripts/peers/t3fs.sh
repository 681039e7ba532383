#!/usr/bin/env bash
# t3fs with 3 replicas on this host: `t3fs cluster up` (loopback, 3 storage nodes) and
# `t3fs mount` (the FUSE mount under test), with the same interface as the peers' scripts.
# usage: t3fs.sh up BASE | run BASE CMD... | down BASE   (T3FS: the binary; default release;
# T3FS_MOUNT_FLAGS: extra `t3fs mount` flags, e.g. --writeback-cache; T3FS_STORE: the chunk
# store, default uring: io_uring with O_DIRECT, what 3FS's storage service uses, so the three
# replicas' writes do not each copy through this host's one page cache)
set -euo pipefail
B=${2:?usage: t3fs.sh up|run|down BASE}
T=${T3FS:-target/release/t3fs}
case $1 in
up)
  rm -rf "$B"; mkdir -p "$B/mnt"
  "$T" cluster up --dir "$B/cluster" --store "${T3FS_STORE:-uring}" >/dev/null
  ;;
run)
  shift 2
  # shellcheck disable=SC2086
  "$T" mount "$B/mnt" --cluster "$B/cluster" ${T3FS_MOUNT_FLAGS:-} 2>"$B/mount.log" &
  for _ in $(seq 100); do grep -q " $B/mnt fuse" /proc/mounts && break; sleep 0.1; done
  "$@"
  fusermount3 -u "$B/mnt"; wait
  ;;
down)
  fusermount3 -uz "$B/mnt" 2>/dev/null || true
  "$T" cluster down --dir "$B/cluster" >/dev/null 2>&1 || true
  rm -rf "$B"
  ;;
*) echo "usage: t3fs.sh up|run|down BASE" >&2; exit 2 ;;
esac
