#!/usr/bin/env bash
# A private, single-member etcd for the etcd KV engine's tests and benches (services/src/etcd_kv.rs).
#
#   bash scripts/etcd.sh start   # starts it (if not running), waits until healthy, prints the endpoint
#   bash scripts/etcd.sh stop    # kills it and removes its data directory (the log stays); idempotent
#
# It listens on 127.0.0.1 only, on uncommon ports (client 23790, peer 23800), so it never
# clashes with a system etcd on 2379/2380 and is never reachable from another host. The data
# directory is fixed (wiped on start and stop) so `stop` finds what `start` made. Flags:
# --max-txn-ops is raised from etcd's default of 128 because one t3fs commit is one etcd txn
# (a compare per read-conflict range, a put per written key); --quota-backend-bytes is 8 GiB so
# benches do not trip the space alarm. Then run, for example:
#   T3FS_ETCD_ENDPOINTS=http://127.0.0.1:23790 cargo nextest run -p t3fs-real --features etcd
set -euo pipefail

CLIENT_PORT=23790
PEER_PORT=23800
BASE="${TMPDIR:-/tmp}/t3fs-etcd"
DATA="$BASE/data"
LOG="$BASE/etcd.log"
PIDFILE="$BASE/etcd.pid"
ENDPOINT="http://127.0.0.1:$CLIENT_PORT"

healthy() { curl -fsS --max-time 1 "$ENDPOINT/health" 2>/dev/null | grep -q '"health":"true"'; }

# The recorded pid counts only while it is still an etcd process (a stale pid file must never
# make `stop` signal an unrelated process that reused the pid).
running() { [ -f "$PIDFILE" ] && [ "$(cat "/proc/$(cat "$PIDFILE")/comm" 2>/dev/null)" = etcd ]; }

start() {
  if ! command -v etcd >/dev/null; then
    echo "error: etcd not found; install it (Debian: apt-get install etcd-server)" >&2
    exit 2
  fi
  if running && healthy; then
    echo "$ENDPOINT"
    return
  fi
  stop >/dev/null
  mkdir -p "$BASE"
  # setsid: etcd must outlive this script and the shell that ran it.
  setsid etcd \
    --name t3fs-test \
    --data-dir "$DATA" \
    --listen-client-urls "$ENDPOINT" \
    --advertise-client-urls "$ENDPOINT" \
    --listen-peer-urls "http://127.0.0.1:$PEER_PORT" \
    --initial-advertise-peer-urls "http://127.0.0.1:$PEER_PORT" \
    --initial-cluster "t3fs-test=http://127.0.0.1:$PEER_PORT" \
    --initial-cluster-state new \
    --max-txn-ops 100000 \
    --max-request-bytes 67108864 \
    --quota-backend-bytes 8589934592 \
    >"$LOG" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 100); do
    if healthy; then
      echo "$ENDPOINT"
      return
    fi
    if ! running; then
      echo "error: etcd exited during start; last lines of $LOG:" >&2
      tail -n 20 "$LOG" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "error: etcd not healthy after 10 s; see $LOG" >&2
  exit 1
}

stop() {
  if running; then
    pid=$(cat "$PIDFILE")
    kill "$pid"
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$DATA" "$PIDFILE"
  echo "stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
