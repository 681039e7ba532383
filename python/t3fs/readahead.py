"""The sequential prefetch window of a t3fs reader.

While each fetch starts where the last one ended, up to ``depth`` blocks of ``block`` bytes
after it are read in the background (the native read releases the GIL, and each block is many
chunk reads in flight), so the reader's next fetch finds its bytes already here. A fetch
anywhere else is random access: the window is dropped (its reads cancelled where they have not
started) and the fetch reads just what it asked for, until reads run sequentially again.

Invariants: the bytes returned are exactly the file's ``[start, end)`` as of the open; at most
``depth`` blocks are held or in flight per file, so memory is bounded by ``depth * block``;
nothing is prefetched past the file's length.

Not here: fsspec's own caching above it (``T3fsFile`` picks the cache type), writes.
"""

import collections
import os
from concurrent.futures import Future, ThreadPoolExecutor

# Background readers per process, shared by every open file (made again after a fork).
_WORKERS = 8
_POOL = []


def _pool():
    pid = os.getpid()
    if not _POOL or _POOL[0][0] != pid:
        _POOL[:] = [(pid, ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="t3fs-readahead"))]
    return _POOL[0][1]


def _done(value):
    f = Future()
    f.set_result(value)
    return f


class Readahead:
    """The window of one open file: ``fetch(start, end)`` answers bytes and keeps the window
    ahead of sequential reads."""

    def __init__(self, handle, size, block, depth=4):
        self.handle = handle
        self.size = size
        self.block = max(1, block)
        self.depth = max(0, depth)
        # (start, end, future of the bytes), in file order, contiguous from the first.
        self.blocks = collections.deque()
        self.last_end = 0
        # Counters for tests and benchmarks: blocks read ahead, and those a caller used.
        self.prefetched = 0
        self.used = 0

    def fetch(self, start, end):
        """The bytes ``[start, end)``."""
        parts = self._parts(start, end)
        if len(parts) == 1 and isinstance(parts[0], bytes):
            return parts[0]
        return b"".join(parts)

    def fetch_into(self, start, out):
        """Fills ``out`` (a writable byte buffer) with the bytes from ``start``: one copy from
        the window, none through an intermediate ``bytes``."""
        out = memoryview(out).cast("B")
        at = 0
        for p in self._parts(start, start + len(out)):
            out[at : at + len(p)] = p
            at += len(p)

    def _parts(self, start, end):
        """The pieces of ``[start, end)`` in order: from the window while reads run on from
        where the last ended (and the window moves on), else read directly (and the window
        is dropped)."""
        if end <= start:
            return []
        if start != self.last_end:
            self.drop()
            parts = [self.handle.read(start, end - start)]
        else:
            parts = self._sequential(start, end)
            self._refill(end)
        self.last_end = end
        return parts

    def _sequential(self, start, end):
        parts = []
        pos = start
        while pos < end:
            while self.blocks and self.blocks[0][1] <= pos:
                self.blocks.popleft()[2].cancel()
            head = self.blocks[0] if self.blocks else None
            if head is not None and head[0] <= pos:
                s, e, fut = self.blocks.popleft()
                data = memoryview(fut.result())[pos - s :]
                self.used += 1
                take = min(end, e) - pos
                parts.append(data[:take])
                if pos + take < e:  # the rest of the block stays for the next fetch
                    self.blocks.appendleft((pos + take, e, _done(data[take:])))
                pos += take
            else:
                stop = min(end, head[0]) if head is not None else end
                parts.append(self.handle.read(pos, stop - pos))
                pos = stop
        return parts

    def _refill(self, end):
        nxt = self.blocks[-1][1] if self.blocks else end
        while len(self.blocks) < self.depth and nxt < self.size:
            stop = min(self.size, nxt + self.block)
            self.blocks.append((nxt, stop, _pool().submit(self.handle.read, nxt, stop - nxt)))
            self.prefetched += 1
            nxt = stop

    def drop(self):
        """Forgets the window (random access, or the file closing)."""
        while self.blocks:
            self.blocks.popleft()[2].cancel()
