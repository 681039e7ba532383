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
# shellcheck source=ns.sh
. "$(dirname "$0")/ns.sh"
case $1 in
up)
  ns_up $NS $IP t3mfsh t3mfsn
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
  ns_down $NS t3mfsh
  rm -rf "$B"
  ;;
*) echo "usage: moosefs.sh up|run|down BASE" >&2; exit 2 ;;
esac
