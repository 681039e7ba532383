#!/usr/bin/env bash
# GlusterFS with 3 replicas on this host (root): glusterd and a replica-3 volume of three bricks
# in network namespace t3peer_gl (`force`: the bricks share a host), mounted inside the
# namespace; commands that use the mount run through `gluster.sh run`.
# usage: gluster.sh up BASE | run BASE CMD... | down BASE
set -euo pipefail
NS=t3peer_gl; IP=10.78.0.2; B=${2:?usage: gluster.sh up|run|down BASE}
in_ns() { ip netns exec $NS "$@"; }
# shellcheck source=ns.sh
. "$(dirname "$0")/ns.sh"
case $1 in
up)
  ns_up $NS $IP t3glh t3gln
  rm -rf "$B"; mkdir -p "$B/b1" "$B/b2" "$B/b3" "$B/mnt"
  in_ns glusterd --log-file="$B/glusterd.log" -p "$B/glusterd.pid"
  sleep 3
  in_ns gluster --mode=script volume create t3v replica 3 \
    $IP:"$B/b1" $IP:"$B/b2" $IP:"$B/b3" force >/dev/null
  in_ns gluster --mode=script volume start t3v >/dev/null
  sleep 2
  ;;
run)
  shift 2
  in_ns sh -ec "mount -t glusterfs $IP:/t3v '$B/mnt'; \"\$@\"; umount '$B/mnt'" sh "$@"
  ;;
down)
  in_ns gluster --mode=script volume stop t3v >/dev/null 2>&1 || true
  in_ns gluster --mode=script volume delete t3v >/dev/null 2>&1 || true
  [ -f "$B/glusterd.pid" ] && kill "$(cat "$B/glusterd.pid")" 2>/dev/null || true
  pkill -f "glusterfsd.*$B" 2>/dev/null || true
  pkill -f "glusterfs.*t3v" 2>/dev/null || true
  ns_down $NS t3glh
  rm -rf "$B"
  ;;
*) echo "usage: gluster.sh up|run|down BASE" >&2; exit 2 ;;
esac
