#!/usr/bin/env bash
# CPU seconds (utime+stime) of every running t3fs service and mount over one command, with the
# host's busy and iowait CPU seconds and the wall time: where the CPU of a run goes.
# usage: scripts/peers/cpu_by_process.sh CMD...   (e.g. python3 scripts/peers/meta.py MNT 1000 8)
set -uo pipefail
tick=$(getconf CLK_TCK)
snap() {
  for p in $(pgrep -f 't3fs (serve|mount)'); do
    read -ra a < <(tr '\0' ' ' <"/proc/$p/cmdline")
    n=$(basename "$(dirname "${a[-1]}")"); [ "${a[1]}" = mount ] && n=mount
    echo "$p $n $(awk '{print $14 + $15}' "/proc/$p/stat")"
  done | sort
}
host() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8, $6}' /proc/stat; }
a=$(snap); read -r u0 w0 < <(host); t0=$(date +%s.%N)
"$@"
t1=$(date +%s.%N); read -r u1 w1 < <(host); b=$(snap)
[ -n "$a" ] && join <(echo "$a") <(echo "$b") | awk -v t="$tick" '{printf "%-12s %.2f s\n", $2, ($5 - $3) / t}'
awk -v t="$tick" -v w="$t1 - $t0" -v b="$((u1 - u0))" -v io="$((w1 - w0))" -v s="$t0" -v e="$t1" \
  'BEGIN {printf "wall %.2f s; host busy %.2f CPU s, iowait %.2f\n", e - s, b / t, io / t}'
