#!/usr/bin/env bash
# Side by side on this host (root): t3fs, MooseFS and GlusterFS, 3 replicas each, the same
# workload (workload.sh) on each FUSE mount, one after the other, and on the local disk as the
# bound; prints one table and writes it
# to OUT/table.md. Every cluster is torn down after its run, pass or fail.
# usage: scripts/peers/run.sh [OUT] [SIZE_MIB] [FILES]   (needs fio; Debian moosefs-*,
# glusterfs-*, fuse3)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/peers}; SIZE=${2:-256}; N=${3:-1000}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
HERE=$(pwd)/scripts/peers
rows=()
# The bound, measured in the same run: the same workload on a plain directory of this host's
# disk (one copy, no FUSE, no network). Three replicas on one host share this disk, so no
# system below can beat it on writes.
L=/tmp/t3peer-local; rm -rf "$L"; mkdir -p "$L"
rows+=("$("$HERE/workload.sh" local-disk "$L" "$SIZE" "$N" | tail -1)")
rm -rf "$L"
# t3fs twice: as mounted by default (a write returns once replicated), and with the kernel's
# writeback cache (writes buffered and acknowledged before replication, as the peers' client
# write-behind does by default).
for sys in t3fs t3fs-wb moosefs gluster; do
  B=/tmp/t3peer-$sys; script=$HERE/${sys%-wb}.sh
  flags=""; [ "$sys" = t3fs-wb ] && flags=--writeback-cache
  trap '"$script" down "$B"' EXIT
  "$script" up "$B"
  rows+=("$(T3FS_MOUNT_FLAGS=$flags "$script" run "$B" "$HERE/workload.sh" "$sys" "$B/mnt" "$SIZE" "$N" | tail -1)")
  "$script" down "$B"
  trap - EXIT
done
{
  echo "| system | seq write MiB/s | seq read MiB/s (cold) | 4k randread IOPS (4 jobs) | create/s | stat/s | rename/s | unlink/s |"
  echo "|---|---|---|---|---|---|---|---|"
  for r in "${rows[@]}"; do echo "| ${r// / | } |"; done
  echo
  echo "$(date -u +%F) on $(nproc) cores; ${SIZE} MiB files, 1 MiB requests with an fsync at the end of the write, $N files in the metadata loop; 3 replicas each on one host."
} | tee "$OUT/table.md"
printf '%s\n' "${rows[@]}" | python3 "$HERE/chart.py" > "$OUT/chart.svg"
echo "chart: $OUT/chart.svg"
