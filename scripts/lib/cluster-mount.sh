# Sourced by the workload scripts (graysort-test.sh, dlio-test.sh): `t3fs_cluster_and_mount NAME`
# starts a cluster and mounts it in a fresh temporary folder, and stops both (and removes the
# folder) when the sourcing script exits, pass or fail. It sets T3FS_TMP: the cluster is in
# $T3FS_TMP/cluster, the mount at $T3FS_TMP/mnt, and $T3FS_TMP/local is an empty local directory
# for the side-by-side run. Needs T3FS_BIN.
t3fs_mount_pid=

t3fs_cluster_and_mount_stop() {
  fusermount3 -uz "$T3FS_TMP/mnt" 2>/dev/null || true
  [ -n "$t3fs_mount_pid" ] && kill "$t3fs_mount_pid" 2>/dev/null || true
  "$T3FS_BIN" cluster down --dir "$T3FS_TMP/cluster" >/dev/null 2>&1 || true
  rm -rf "$T3FS_TMP"
}

t3fs_cluster_and_mount() {
  T3FS_TMP=$(mktemp -d "/tmp/t3fs-$1.XXXXXX")
  trap t3fs_cluster_and_mount_stop EXIT
  "$T3FS_BIN" cluster up --dir "$T3FS_TMP/cluster" >/dev/null
  mkdir -p "$T3FS_TMP/mnt" "$T3FS_TMP/local"
  "$T3FS_BIN" mount --cluster "$T3FS_TMP/cluster" "$T3FS_TMP/mnt" 2>"$T3FS_TMP/mount.log" &
  t3fs_mount_pid=$!
  for _ in $(seq 300); do
    grep -q " $T3FS_TMP/mnt fuse" /proc/mounts && return 0
    sleep 0.1
  done
  echo "error: the mount did not come up" >&2
  cat "$T3FS_TMP/mount.log" >&2
  return 1
}
