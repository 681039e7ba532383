#!/usr/bin/env bash
# MooseFS with 3 replicas on this host (root): a master and three chunkservers in network
# namespace t3peer_mfs (MooseFS refuses loopback addresses, so the namespace has a veth address),
# mounted with mfsmount inside the namespace, goal 3 on the root. Mounts made inside
# `ip netns exec` live in that command's mount namespace, so commands that use the mount run
# through `moosefs.sh run`.
# usage: moosefs.sh up BASE | run BASE CMD... | down BASE
set -euo pipefail
NS=t3peer_mfs; IP=10.77.0.2; B=${2:?usage: moosefs.sh up|run|down BASE}
in_ns() { ip netns exec $NS "$@"; }
case $1 in
up)
  ip netns add $NS 2>/dev/null || true
  ip link add t3mfsh type veth peer name t3mfsn 2>/dev/null || true
  ip link set t3mfsn netns $NS 2>/dev/null || true
  in_ns ip addr replace $IP/24 dev t3mfsn
  in_ns ip link set t3mfsn up; in_ns ip link set lo up
  rm -rf "$B"; mkdir -p "$B/master" "$B/mnt"
  printf 'DATA_PATH = %s/master\nEXPORTS_FILENAME = %s/exports.cfg\n' "$B" "$B" > "$B/master.cfg"
  echo "* / rw,alldirs,maproot=0" > "$B/exports.cfg"
  echo "MFSM NEW" > "$B/master/metadata.mfs"
  for i in 1 2 3; do
    mkdir -p "$B/cs$i/data" "$B/cs$i/hdd"; echo "$B/cs$i/hdd" > "$B/cs$i/hdd.cfg"
    printf 'DATA_PATH = %s\nHDD_CONF_FILENAME = %s\nMASTER_HOST = %s\nCSSERV_LISTEN_PORT = 940%s\n' \
      "$B/cs$i/data" "$B/cs$i/hdd.cfg" $IP $i > "$B/cs$i/cs.cfg"
  done
  chown -R mfs:mfs "$B"
  in_ns mfsmaster -c "$B/master.cfg" start >/dev/null 2>&1
  for i in 1 2 3; do in_ns mfschunkserver -c "$B/cs$i/cs.cfg" start >/dev/null 2>&1; done
  sleep 5
  ;;
run)
  shift 2
  in_ns sh -ec "mfsmount '$B/mnt' -H $IP >/dev/null 2>&1; mfssetgoal -r 3 '$B/mnt' >/dev/null; \"\$@\"; umount '$B/mnt'" sh "$@"
  ;;
down)
  for i in 1 2 3; do in_ns mfschunkserver -c "$B/cs$i/cs.cfg" stop >/dev/null 2>&1 || true; done
  in_ns mfsmaster -c "$B/master.cfg" stop >/dev/null 2>&1 || true
  ip netns del $NS 2>/dev/null || true
  ip link del t3mfsh 2>/dev/null || true
  rm -rf "$B"
  ;;
*) echo "usage: moosefs.sh up|run|down BASE" >&2; exit 2 ;;
esac
