#!/usr/bin/env bash
# Interleaved A/B of the services' runtimes: two loopback clusters up at once, A with every
# service on 2 tokio workers, B with the roles' defaults (storage 2, meta, mgmtd and kv on their
# main thread), the same jobs alternating A, B for ROUNDS rounds; one line per job and cluster.
# usage: scripts/peers/runtime_ab.sh [BASE] [ROUNDS]   (T3FS: the binary; default release)
# Both clusters are taken down on exit, pass or fail.
set -uo pipefail
cd "$(dirname "$0")/../.."
T=${T3FS:-target/release/t3fs}; B=${1:-/tmp/t3fs-runtime-ab}; ROUNDS=${2:-3}
down() { for c in A B; do "$T" cluster down --dir "$B/$c" >/dev/null 2>&1; done; }
trap down EXIT
rm -rf "$B"; mkdir -p "$B"
"$T" cluster up --dir "$B/A" --store uring --worker-threads 2 >/dev/null || exit 1
"$T" cluster up --dir "$B/B" --store uring >/dev/null || exit 1
job() { # CLUSTER NAME fio-style args...
  local c=$1 n=$2; shift 2
  "$T" bench io --cluster "$B/$c" --out "$B/out-$c-$n" "$@" >"$B/log-$c-$n-$r" 2>&1 || return
  python3 - "$B/out-$c-$n/summary.json" "$r $n $c" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
for k in ("read", "write"):
    d = j.get(k, {})
    if d.get("io_bytes", 0) > 0:
        p = d["clat_ns"]["percentile"]
        print(f"{sys.argv[2]} {k} iops {d['iops']:.0f} MiB/s {d['bw'] / 1024:.1f} "
              f"p50_us {p['50.000000'] / 1000:.0f} p99_us {p['99.000000'] / 1000:.0f}")
PY
}
meta() { # CLUSTER RANKS
  echo "$r meta-x$2 $1 $("$T" bench meta --cluster "$B/$1" -n 500 -u --ranks "$2" 2>&1 |
    grep -E 'File (creation|stat|removal)' | awk '{printf "%s %s ", $2, $3}')"
}
for r in $(seq "$ROUNDS"); do
  for c in A B; do
    job $c rr4k-qd8 --rw randread --bs 4k --size 256m --iodepth 8 --runtime 6 --time-based
    job $c rr4k-qd1 --rw randread --bs 4k --size 256m --iodepth 1 --runtime 6 --time-based
    job $c w1m-qd1 --rw write --bs 1m --size 256m --iodepth 1 --runtime 6 --time-based
    job $c r1m-qd8 --rw read --bs 1m --size 256m --iodepth 8 --runtime 6 --time-based
    meta $c 1
    meta $c 8
  done
done
