#!/usr/bin/env python3
"""mdtest-style metadata phases through a mounted file system, for the peers harness.

usage: meta.py DIR FILES_PER_RANK [RANKS]

Each rank is a process working in a directory of its own under DIR (mdtest's -u) and issues one
system call at a time, as an mdtest rank does. Phases run in order, each timed from the moment
every rank starts it until the last rank finishes it (a barrier on both sides): create (open
with O_CREAT|O_WRONLY, then close; an empty file, mdtest -w 0), stat, rename (to a new name in
the same directory), unlink. Prints one line: "create stat rename unlink" in operations per
second over all ranks. With RANKS 1 it is the single-threaded loop the harness always ran.

What it does not do: write data (mdtest -w), read files back (mdtest -e), or tree phases; the
harness's fio runs measure data.
"""

import multiprocessing as mp
import os
import sys
import time

PHASES = ("create", "stat", "rename", "unlink")


def phase(name, paths):
    if name == "create":
        for p in paths:
            os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
    elif name == "stat":
        for p in paths:
            os.stat(p)
    elif name == "rename":
        for p in paths:
            os.rename(p, p + ".r")
    else:
        for p in paths:
            os.unlink(p + ".r")


def rank(root, r, n, start, done):
    d = os.path.join(root, f"rank{r}")
    os.mkdir(d)
    paths = [os.path.join(d, f"f{i}") for i in range(n)]
    for name in PHASES:
        start.wait()
        phase(name, paths)
        done.wait()
    os.rmdir(d)


def main():
    root, n = sys.argv[1], int(sys.argv[2])
    ranks = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    start, done = mp.Barrier(ranks + 1), mp.Barrier(ranks + 1)
    procs = [mp.Process(target=rank, args=(root, r, n, start, done)) for r in range(ranks)]
    for p in procs:
        p.start()
    rates = []
    for _ in PHASES:
        start.wait()
        t = time.perf_counter()
        done.wait()
        rates.append(round(n * ranks / (time.perf_counter() - t)))
    for p in procs:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"meta.py: rank {p.name} failed with exit code {p.exitcode}")
    print(*rates)


if __name__ == "__main__":
    main()
