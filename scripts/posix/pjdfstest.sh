#!/usr/bin/env bash
# pjdfstest (the POSIX conformance suite file-system projects run: chmod, chown, link, mkdir,
# mkfifo, mknod, open, rename, rmdir, symlink, truncate, unlink, utimensat) on a t3fs mount:
# a loopback cluster of 3 storage nodes, mounted with --allow-other (the suite switches to
# other users), the suite run from inside the mount, everything stopped on exit, pass or fail.
# usage: scripts/posix/pjdfstest.sh PJDFSTEST_DIR [OUT]   (root; autoconf, automake, gcc, perl's
# prove, fuse3; PJDFSTEST_DIR: a checkout of github.com/pjd/pjdfstest, built here if needed;
# T3FS: the binary, default target/release/t3fs). Writes OUT/prove.log and OUT/summary.txt
# (default OUT: runs/pjdfstest) and exits with prove's status.
set -euo pipefail
SRC=${1:?usage: pjdfstest.sh PJDFSTEST_DIR [OUT]}
OUT=${2:-runs/pjdfstest}
T=${T3FS:-target/release/t3fs}
[ "$(id -u)" = 0 ] || { echo "pjdfstest.sh: run as root (the suite changes users)" >&2; exit 2; }
SRC=$(cd "$SRC" && pwd)
if [ ! -x "$SRC/pjdfstest" ]; then
  (cd "$SRC" && autoreconf -ifs && ./configure && make pjdfstest) >/dev/null
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
B=$(mktemp -d /tmp/t3fs-pjdfstest.XXXXXX)
stop() {
  fusermount3 -uz "$B/mnt" 2>/dev/null || true
  wait 2>/dev/null || true
  "$T" cluster down --dir "$B/cluster" >/dev/null 2>&1 || true
  rm -rf "$B"
}
trap stop EXIT
mkdir -p "$B/mnt"
"$T" cluster up --dir "$B/cluster" --store uring >/dev/null
"$T" mount "$B/mnt" --cluster "$B/cluster" --allow-other 2>"$OUT/mount.log" &
for _ in $(seq 100); do grep -q " $B/mnt fuse" /proc/mounts && break; sleep 0.1; done
grep -q " $B/mnt fuse" /proc/mounts || { echo "pjdfstest.sh: the mount did not come up" >&2; exit 1; }
rc=0
(cd "$B/mnt" && prove -r "$SRC/tests/") >"$OUT/prove.log" 2>&1 || rc=$?
{
  echo "pjdfstest $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo '?') on t3fs $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  grep -E "^Files=|^Result:" "$OUT/prove.log" || true
  total=$({ grep -oE "Tests=[0-9]+" "$OUT/prove.log" || true; } | cut -d= -f2)
  failed=$({ grep -oE "Failed: [0-9]+\)" "$OUT/prove.log" || true; } | tr -dc '0-9\n' |
    awk '{s+=$1} END {print s+0}')
  echo "failing cases: $failed of ${total:-?}"
  grep -E "^/.*\(Wstat" "$OUT/prove.log" | sed "s|$SRC/tests/||" || true
} | tee "$OUT/summary.txt"
exit "$rc"
