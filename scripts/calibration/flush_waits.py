#!/usr/bin/env python3
"""What a durable write's flush waits for on this disk: writes completed before it, or writes
still in flight beside it.

Usage: flush_waits.py DIR [SECONDS]

In DIR (on the disk to test; its files are removed at the end), with O_DIRECT into preallocated
files as the chunk store's engine writes them:

1. One file is flushed with nothing written, then after its own 1 MiB write, with 0, 1, 2 or 4
   MiB written to another file just before (completed, not in flight).
2. One, two and three processes each loop "write 1 MiB, fdatasync" (and then again with a 64-byte
   record appended and fdatasync'ed after each, as the store's chunk record is), concurrently.

Prints each case's p50/p99 in microseconds. On the 2026-12-03 host (ext4 on a virtio disk) the
flush after one's own write cost 53-79 us whatever another file had written before it, but beside
one and two concurrent writers the data fdatasync rose from 55 to 247 and 407 us: a flush waits
for the writes in flight on the device, not for completed ones. That is the flush barrier of
sim/src/world/resources/sharing.rs. Standard library only.
"""
import mmap
import multiprocessing as mp
import os
import sys
import time

MIB = 1 << 20


def q(v, p):
    v = sorted(v)
    return v[int(p * (len(v) - 1))] * 1e6 if v else float("nan")


def aligned():
    buf = mmap.mmap(-1, MIB)  # page-aligned, as O_DIRECT needs
    buf.write(os.urandom(MIB))
    return buf


def prealloc(path):
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644)
    os.posix_fallocate(fd, 0, 64 * MIB)
    os.fsync(fd)
    return fd


def before(d, n=300):
    buf, a, b = aligned(), prealloc(f"{d}/fw-a"), prealloc(f"{d}/fw-b")
    try:
        s = []
        for _ in range(n):
            t = time.perf_counter()
            os.fdatasync(a)
            s.append(time.perf_counter() - t)
        print(f"fdatasync with nothing written: p50 {q(s, .5):.0f} p99 {q(s, .99):.0f} us")
        for other in (0, 1, 2, 4):
            w, s = [], []
            for i in range(n):
                for k in range(other):
                    os.pwritev(b, [buf], ((i * 3 + k) % 60) * MIB)
                t = time.perf_counter()
                os.pwritev(a, [buf], (i % 60) * MIB)
                t1 = time.perf_counter()
                os.fdatasync(a)
                w.append(t1 - t)
                s.append(time.perf_counter() - t1)
            print(f"own 1 MiB write p50 {q(w, .5):.0f}, then fdatasync p50 {q(s, .5):.0f} "
                  f"p99 {q(s, .99):.0f} us, {other} MiB written to another file just before")
    finally:
        for p in ("fw-a", "fw-b"):
            os.unlink(f"{d}/{p}")


def writer(args):
    d, i, secs, record = args
    buf, fd = aligned(), prealloc(f"{d}/fw-{i}")
    log = os.open(f"{d}/fw-log-{i}", os.O_CREAT | os.O_WRONLY | os.O_APPEND | os.O_TRUNC, 0o644)
    w, s, r, k, end = [], [], [], 0, time.time() + secs
    try:
        while time.time() < end:
            t = time.perf_counter()
            os.pwritev(fd, [buf], (k % 60) * MIB)
            t1 = time.perf_counter()
            os.fdatasync(fd)
            t2 = time.perf_counter()
            if record:
                os.write(log, b"r" * 64)
                os.fdatasync(log)
            w.append(t1 - t)
            s.append(t2 - t1)
            r.append(time.perf_counter() - t2)
            k += 1
    finally:
        os.unlink(f"{d}/fw-{i}")
        os.unlink(f"{d}/fw-log-{i}")
    return w, s, r


def beside(d, secs):
    for record in (False, True):
        for n in (1, 2, 3):
            with mp.Pool(n) as pool:
                rs = pool.map(writer, [(d, i, secs, record) for i in range(n)])
            w, s, r = (sum((x[j] for x in rs), []) for j in range(3))
            line = (f"{n} writer(s){' + record' if record else ''}: {len(w) / secs:.0f} ops/s, "
                    f"write p50 {q(w, .5):.0f} p99 {q(w, .99):.0f}, "
                    f"data fdatasync p50 {q(s, .5):.0f} p99 {q(s, .99):.0f}")
            if record:
                line += f", record+fdatasync p50 {q(r, .5):.0f} p99 {q(r, .99):.0f}"
            print(line + " us", flush=True)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    before(d)
    beside(d, secs)


if __name__ == "__main__":
    main()
