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
# When each system acknowledges what it is told: the figures mean little without it.
durability() {
  case $1 in
    local-disk) echo "the page cache: data durable at fsync, metadata at the journal's commit (ext4: 5 s)";;
    t3fs) echo "a metadata change is fdatasync'ed in the KV's log before its answer; a write is on every replica's store before close/fsync returns";;
    t3fs-wb) echo "as t3fs; the kernel buffers writes until fsync or close";;
    moosefs) echo "the master answers metadata from memory and writes its changelog after (a crash of the master loses the last changes); chunk writes acknowledged by the chunkservers";;
    gluster) echo "answered once each brick's local file system has the change (its page cache); durable when the application fsyncs";;
  esac
}
{
  echo "| system | seq write MiB/s | seq read MiB/s (cold) | 4k randread IOPS (4 jobs) | create/s | stat/s | rename/s | unlink/s | create/s x8 | stat/s x8 | rename/s x8 | unlink/s x8 | durability |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  for r in "${rows[@]}"; do echo "| ${r// / | } | $(durability "${r%% *}") |"; done
  echo
  echo "$(date -u +%F) on $(nproc) cores; ${SIZE} MiB files, 1 MiB requests with an fsync at the end of the write; metadata: mdtest-style phases (scripts/peers/meta.py), one rank over $N files, then 8 ranks (x8) over $(( (N + 7) / 8 )) files each; 3 replicas each on one host."
} | tee "$OUT/table.md"
printf '%s\n' "${rows[@]}" | python3 "$HERE/chart.py" > "$OUT/chart.svg"
echo "chart: $OUT/chart.svg"
