"""The fsspec file system of t3fs (protocol ``t3fs``), over the native client.

Paths: ``t3fs:///a/b``, ``t3fs://a/b`` and ``/a/b`` all name ``/a/b`` of the cluster's one
namespace (t3fs has no buckets). Files are fsspec's buffered files: reads fetch ranges of
``block_size`` bytes straight from the chains' replicas; writes go out a block at a time, each
returning once committed on every replica, and the close tells meta the length. ``ab`` appends
after the file's end; ``xb`` fails with ``FileExistsError`` if the file exists. A rename is
rename(2) on the cluster (atomic); ``rm(recursive=True)`` of a directory is one meta request.

Fork safety: a DataLoader worker forked from a process with a live client gets a client of its
own on first use; the parent's is kept, never torn down, in the child (its threads are not there).

Not here: datasets and checkpoints (built on this), caching across processes.
"""

import io
import os
import re
import threading
from datetime import datetime, timezone

from fsspec.spec import AbstractBufferedFile, AbstractFileSystem
from fsspec.utils import stringify_path

from . import _native
from .readahead import Readahead

# Clients made in a parent process, kept alive in a forked child: collecting one there would
# shut down a runtime whose threads stayed in the parent.
_FORKED_OFF = []

# Bytes one read fetches or one write sends: several chunks of the default 1 MiB chunk size,
# so a block spreads over several chains.
BLOCK_SIZE = 4 * 2**20

# Blocks a sequential reader keeps in flight ahead of where it reads, each a native read of
# many chunks in flight. Measured (python/bench/readahead.py, docs/results.md): on a 2-core
# host sharing its cores with a loopback cluster, 2 blocks read 64 KiB and 1 MiB reads 1.3 and
# 1.6 times as fast as fsspec's block cache alone; on a 16-core host 4 blocks (then under
# fsspec's cache) 1.4 times.
READAHEAD = 2


class T3fsFileSystem(AbstractFileSystem):
    """fsspec's view of a t3fs cluster.

    ``cluster`` is a ``t3fs cluster up`` directory, or mgmtd's address with the cluster's
    credential (``TOKEN@HOST:PORT``, or ``HOST:PORT`` with ``token``); or give ``mgmtd``
    (``HOST:PORT``) and ``token``. With neither, ``T3FS_CLUSTER`` (either form) or
    ``T3FS_MGMTD`` with ``T3FS_TOKEN`` are used (``T3FS_TOKEN`` also completes ``HOST:PORT``).
    ``auto_mkdir`` (default on, as object stores behave) makes a written file's missing parent
    directories.
    """

    protocol = "t3fs"
    root_marker = "/"

    def __init__(
        self, cluster=None, mgmtd=None, token=None, block_size=BLOCK_SIZE, auto_mkdir=True, **kwargs
    ):
        super().__init__(**kwargs)
        if cluster is None and mgmtd is None:
            cluster = os.environ.get("T3FS_CLUSTER")
            mgmtd = os.environ.get("T3FS_MGMTD")
        token = token or os.environ.get("T3FS_TOKEN")
        if cluster is not None and mgmtd is None:
            cluster, mgmtd, token = _cluster_of(cluster, token)
        if cluster is None and (mgmtd is None or token is None):
            raise ValueError(
                "t3fs: name a cluster: storage_options cluster=DIR or cluster=TOKEN@HOST:PORT, or "
                "mgmtd=HOST:PORT and token; or set T3FS_CLUSTER (a `t3fs cluster up` directory or "
                "TOKEN@HOST:PORT), or T3FS_MGMTD and T3FS_TOKEN"
            )
        self._connect_args = (cluster, mgmtd, token)
        self.blocksize = block_size
        self.auto_mkdir = auto_mkdir
        self._client = None
        self._pid = None
        self._lock = threading.Lock()

    @property
    def client(self):
        """The native client of this process (a new one after a fork)."""
        pid = os.getpid()
        if self._client is None or self._pid != pid:
            with self._lock:
                if self._client is None or self._pid != pid:
                    if self._client is not None:
                        _FORKED_OFF.append(self._client)
                    cluster, mgmtd, token = self._connect_args
                    self._client = _native.Client(cluster, mgmtd=mgmtd, token=token)
                    self._pid = pid
        return self._client

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = stringify_path(path)
        if path.startswith("t3fs://"):
            path = path[len("t3fs://") :]
        path = "/" + path.lstrip("/")
        return path.rstrip("/") or "/"

    def info(self, path, **kwargs):
        return self.client.stat(self._strip_protocol(path))

    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        info = self.info(path)
        entries = self.client.ls(path) if info["type"] == "directory" else [info]
        return entries if detail else [e["name"] for e in entries]

    def mkdir(self, path, create_parents=True, **kwargs):
        path = self._strip_protocol(path)
        if create_parents:
            if self.exists(path):
                raise FileExistsError(path)
            self.makedirs(path, exist_ok=True)
        else:
            self.client.mkdir(path)

    def makedirs(self, path, exist_ok=False):
        path = self._strip_protocol(path)
        parts = [p for p in path.split("/") if p]
        for i in range(1, len(parts) + 1):
            prefix = "/" + "/".join(parts[:i])
            try:
                self.client.mkdir(prefix)
            except FileExistsError:
                if self.info(prefix)["type"] != "directory":
                    raise NotADirectoryError(prefix)
                if i == len(parts) and not exist_ok:
                    raise

    def rmdir(self, path):
        path = self._strip_protocol(path)
        if self.info(path)["type"] != "directory":
            raise NotADirectoryError(path)
        self.client.remove(path)

    def rm_file(self, path):
        self.client.remove(self._strip_protocol(path))

    def _rm(self, path):
        self.rm_file(path)

    def rm(self, path, recursive=False, maxdepth=None):
        # A whole tree in one meta request (it goes to GC, which frees its chunks).
        if isinstance(path, str) and recursive and maxdepth is None and not self._has_magic(path):
            self.client.remove(self._strip_protocol(path), recursive=True)
            return
        super().rm(path, recursive=recursive, maxdepth=maxdepth)

    @staticmethod
    def _has_magic(path):
        return any(c in path for c in "*?[")

    def mv(self, path1, path2, recursive=False, maxdepth=None, **kwargs):
        if isinstance(path1, str) and isinstance(path2, str) and not self._has_magic(path1):
            src, dst = self._strip_protocol(path1), self._strip_protocol(path2)
            if self.isdir(dst) and not self.isdir(src):
                dst = dst.rstrip("/") + "/" + src.rsplit("/", 1)[-1]
            self.client.rename(src, dst)
            return
        super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)

    def open_native(self, path, mode):
        """The native file of ``path`` in native ``mode`` (r, w, a, x); with ``auto_mkdir``, a
        writer's missing parent directories are made first."""
        path = self._strip_protocol(path)
        try:
            return self.client.open(path, mode)
        except FileNotFoundError:
            if mode == "r" or not self.auto_mkdir or path.count("/") < 2:
                raise
        self.makedirs(self._parent(path), exist_ok=True)
        return self.client.open(path, mode)

    def cp_file(self, path1, path2, **kwargs):
        if self.isdir(path1):  # a recursive copy names directories too
            self.makedirs(path2, exist_ok=True)
            return
        src = self.client.open(self._strip_protocol(path1), "r")
        try:
            dst = self.open_native(path2, "w")
            offset = 0
            try:
                while offset < src.size:
                    n = min(self.blocksize, src.size - offset)
                    dst.write(offset, src.read(offset, n))
                    offset += n
            finally:
                dst.close(offset)
        finally:
            src.close()

    def cat_file(self, path, start=None, end=None, **kwargs):
        f = self.client.open(self._strip_protocol(path), "r")
        try:
            start, end = _clamp(start, end, f.size)
            return f.read(start, end - start) if end > start else b""
        finally:
            f.close()

    def cat_ranges(self, paths, starts, ends, max_gap=None, on_error="return", **kwargs):
        """Byte ranges of files, each file's ranges read in one call (all in flight at once),
        answered in the order asked."""
        if not (len(paths) == len(starts) == len(ends)):
            raise ValueError("cat_ranges: paths, starts and ends differ in length")
        out = [None] * len(paths)
        by_path = {}
        for k, p in enumerate(paths):
            by_path.setdefault(self._strip_protocol(p), []).append(k)
        for path, ks in by_path.items():
            try:
                f = self.client.open(path, "r")
                try:
                    ranges = [_clamp(starts[k], ends[k], f.size) for k in ks]
                    pieces = f.read_ranges([(s, max(0, e - s)) for s, e in ranges])
                finally:
                    f.close()
                for k, piece in zip(ks, pieces):
                    out[k] = piece
            except Exception as e:
                if on_error != "return":
                    raise
                for k in ks:
                    out[k] = e
        return out

    def created(self, path):
        return datetime.fromtimestamp(self.info(path)["ctime"], tz=timezone.utc)

    def modified(self, path):
        return datetime.fromtimestamp(self.info(path)["mtime"], tz=timezone.utc)

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        # A reader's readahead window is its cache: fsspec's own block cache above it would
        # fetch past every read and split the window's blocks (measured slower). A caller may
        # still name any fsspec cache, or readahead=0 for fsspec's default alone.
        if mode == "rb" and kwargs.get("readahead", READAHEAD) > 0:
            kwargs.setdefault("cache_type", "none")
        return T3fsFile(
            self,
            self._strip_protocol(path),
            mode,
            block_size=block_size or self.blocksize,
            autocommit=autocommit,
            cache_options=cache_options,
            **kwargs,
        )


def _cluster_of(value, token):
    """``(cluster dir, mgmtd address, token)`` of a cluster named as a directory or as
    ``[TOKEN@]HOST:PORT`` (a directory wins where both could be meant)."""
    value = os.fspath(value)
    if os.path.isdir(value):
        return value, None, token
    m = re.fullmatch(r"(?:(?P<token>[^@/]+)@)?(?P<addr>[^@/\s]+:\d+)", value)
    if m is None:
        raise ValueError(f"t3fs: cluster {value!r} is neither a directory nor TOKEN@HOST:PORT")
    return None, m.group("addr"), m.group("token") or token


def _clamp(start, end, size):
    """fsspec's range convention (negative counts from the end; None is the edge) in [0, size]."""
    start = 0 if start is None else (size + start if start < 0 else start)
    end = size if end is None else (size + end if end < 0 else end)
    return max(0, min(start, size)), max(0, min(end, size))


class T3fsFile(AbstractBufferedFile):
    """One open t3fs file under fsspec's buffering (modes ``rb``, ``wb``, ``ab``, ``xb``).
    A reader keeps up to ``readahead`` blocks of ``block_size`` in flight ahead of sequential
    reads (0 turns it off); with the window on, reads come from it with no fsspec cache above
    (``cache_type="none"``) unless the caller names one."""

    def __init__(self, fs, path, mode="rb", readahead=READAHEAD, **kwargs):
        native_mode = {"rb": "r", "wb": "w", "ab": "a", "xb": "x"}.get(mode)
        if native_mode is None:
            raise NotImplementedError(f"t3fs: mode {mode!r} (use rb, wb, ab or xb)")
        self.handle = fs.open_native(path, native_mode)
        size = self.handle.size
        super().__init__(fs, path, mode, size=size if mode == "rb" else None, **kwargs)
        # Appends start at the file's end; other writes at 0.
        self._start = size if mode == "ab" else 0
        # Sequential readahead: a window of blocks read in the background (see readahead.py).
        self._window = Readahead(self.handle, size, self.blocksize, readahead) if mode == "rb" else None
        self._in_write = False
        if mode == "ab":
            self.loc = size

    def _fetch_range(self, start, end):
        start, end = _clamp(start, end, self.size)
        return self._window.fetch(start, end)

    def readinto(self, b):
        """Reads into ``b`` straight from the readahead window when no fsspec cache sits above
        it (``cache_type="none"``, as checkpoint readers open): ``torch.load`` reads tensors this
        way, one copy each."""
        if self.mode != "rb" or self.closed or self.cache.name != "none":
            return super().readinto(b)
        out = memoryview(b).cast("B")
        n = max(0, min(len(out), self.size - self.loc))
        self._window.fetch_into(self.loc, out[:n])
        self.loc += n
        return n

    def _initiate_upload(self):
        self.offset = self._start

    def write(self, data):
        # fsspec's write flushes a full buffer itself: that flush only sends the block.
        self._in_write = True
        try:
            return super().write(data)
        finally:
            self._in_write = False

    def flush(self, force=False):
        """An explicit flush of a writer persists what was written so far: the buffer goes out
        (committed on every replica) and meta records the length, so a reader opening the file
        now sees it. Returns the persisted length. Reads, and the close's final flush, are
        fsspec's own."""
        if self.mode == "rb" or self.closed or force or self.forced or self._in_write:
            return super().flush(force=force)
        if self.offset is None:
            self.offset = 0
            self._initiate_upload()
        if self.buffer.tell():
            self._upload_chunk(final=False)
            self.offset += self.buffer.seek(0, 2)
            self.buffer = io.BytesIO()
        self.handle.sync(self.offset)
        return self.offset

    def _upload_chunk(self, final=False):
        data = self.buffer.getvalue()
        if data:
            self.handle.write(self.offset, data)
        if final:
            self.handle.close(self.offset + len(data))
        return True

    def close(self):
        try:
            super().close()
        finally:
            if self.mode == "rb":
                self._window.drop()
                self.handle.close()


# The name the fsspec registry and the issue tracker use.
T3FileSystem = T3fsFileSystem
