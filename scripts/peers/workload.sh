#!/usr/bin/env bash
# One workload, the same on every mount: fio 1 MiB sequential write with an fsync at the end,
# 1 MiB sequential read with cold caches, 4 KiB random read with 4 jobs (reads with O_DIRECT, so
# the page cache answers none of them), and mdtest-style metadata phases (meta.py: create,
# stat, rename, unlink) with one rank over N files and with 8 ranks over N/8 files each.
# Prints one line: SYSTEM write_MiBs read_MiBs randread_iops, then create stat rename unlink
# per second with 1 rank, then the same with 8.
# usage: workload.sh SYSTEM MOUNT [SIZE_MIB] [FILES]
set -euo pipefail
SYS=$1; M=$2; SIZE=${3:-256}; N=${4:-1000}
D="$M/peers-$$"; mkdir -p "$D"
fio_json() { fio --output-format=json "$@" | python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"]
rw = sys.argv[1]
if rw == "iops":
    print(round(sum(x["read"]["iops"] for x in j)))
else:
    print(round(sum(x[rw]["bw_bytes"] for x in j) / 2**20, 1))
' "${FIO_FIELD}"; }
FIO_FIELD=write fio_json >/tmp/peers-w.$$ --name=seqw --filename="$D/seq" --rw=write --bs=1M \
  --size=${SIZE}M --end_fsync=1 --ioengine=psync
sync; echo 3 > /proc/sys/vm/drop_caches
FIO_FIELD=read fio_json >/tmp/peers-r.$$ --name=seqr --filename="$D/seq" --rw=read --bs=1M \
  --size=${SIZE}M --ioengine=psync --direct=1
fio --name=lay --filename="$D/rand" --rw=write --bs=1M --size=64M --ioengine=psync >/dev/null
sync; echo 3 > /proc/sys/vm/drop_caches
FIO_FIELD=iops fio_json >/tmp/peers-i.$$ --name=randr --filename="$D/rand" --rw=randread --bs=4k \
  --size=64M --numjobs=4 --time_based --runtime=15 --ioengine=psync --direct=1
# mdtest-style phases (meta.py): one rank over N files, then 8 ranks over N/8 files each.
META1=$(python3 "$(dirname "$0")/meta.py" "$D" "$N" 1)
META8=$(python3 "$(dirname "$0")/meta.py" "$D" "$(( (N + 7) / 8 ))" 8)
rm -rf "$D"
echo "$SYS $(cat /tmp/peers-w.$$) $(cat /tmp/peers-r.$$) $(cat /tmp/peers-i.$$) $META1 $META8"
rm -f /tmp/peers-?.$$
