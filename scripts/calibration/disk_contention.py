#!/usr/bin/env python3
"""What lengthens a durable write on this disk: CPU-bound neighbours, loopback TCP, or other
durable writers.

Usage: disk_contention.py DIR [SECONDS]

In DIR (on the disk to test; its files are removed at the end), one thread writes 1 MiB at a
fresh offset and `fdatasync`s, in a loop, alone and then beside: two and one CPU-bound
processes, a loopback TCP stream of 1 MiB sends (and one paced at a send every 1.5 ms), and two
other processes doing the same durable writes. Prints each case's p50 and p90. This is how the
shared-disk model (sim/src/world/resources/sharing.rs) was chosen over a CPU term: on the
2026-12-02 host only the other durable writers doubled the write. Standard library only.
"""
import multiprocessing as mp
import os
import socket
import sys
import time

BIG = os.urandom(1 << 20)


def durable_loop(secs, path):
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    off, out, end = 0, [], time.time() + secs
    while time.time() < end:
        t = time.perf_counter()
        os.pwrite(fd, BIG, off)
        os.fdatasync(fd)
        out.append(time.perf_counter() - t)
        off = 0 if off > (128 << 20) else off + (1 << 20)
    os.close(fd)
    return out


def spin(secs):
    end = time.time() + secs
    while time.time() < end:
        pass


def server(port, secs):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(1)
    c, _ = s.accept()
    buf, end = bytearray(1 << 20), time.time() + secs
    while time.time() < end and c.recv_into(buf):
        pass


def client(port, secs, pace):
    time.sleep(0.05)
    c, end = socket.create_connection(("127.0.0.1", port)), time.time() + secs
    while time.time() < end:
        c.sendall(BIG)
        if pace:
            time.sleep(pace)
    c.close()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    os.makedirs(d, exist_ok=True)
    port = 23400 + os.getpid() % 500
    cases = [
        ("alone", lambda p: []),
        ("2 CPU-bound processes", lambda p: [mp.Process(target=spin, args=(secs + 0.2,))
                                             for _ in range(2)]),
        ("1 CPU-bound process", lambda p: [mp.Process(target=spin, args=(secs + 0.2,))]),
        ("a loopback TCP stream", lambda p: [mp.Process(target=server, args=(p, secs + 0.3)),
                                             mp.Process(target=client, args=(p, secs + 0.2, 0))]),
        ("TCP, 1 MiB every 1.5 ms", lambda p: [mp.Process(target=server, args=(p, secs + 0.3)),
                                               mp.Process(target=client,
                                                          args=(p, secs + 0.2, 0.0015))]),
        ("2 other durable writers", lambda p: [mp.Process(target=durable_loop,
                                                          args=(secs + 0.2, f"{d}/o{i}"))
                                               for i in range(2)]),
        ("alone, again", lambda p: []),
    ]
    try:
        for i, (name, make) in enumerate(cases):
            procs = make(port + i)
            for p in procs:
                p.start()
            time.sleep(0.15)
            v = sorted(durable_loop(secs, f"{d}/a"))
            for p in procs:
                p.join()
            print(f"{name:26} 1 MiB write + fdatasync p50 {v[len(v) // 2] * 1e6:5.0f} us, "
                  f"p90 {v[int(len(v) * 0.9)] * 1e6:5.0f} us ({len(v)})", flush=True)
    finally:
        for f in os.listdir(d):
            if f == "a" or f.startswith("o"):
                os.unlink(os.path.join(d, f))


if __name__ == "__main__":
    main()
