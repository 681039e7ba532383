"""PyTorch over t3fs: datasets, checkpoints, and torch's distributed-checkpoint storage.

- :class:`T3fsMapDataset` and :class:`T3fsIterableDataset`: the files under a prefix as
  samples, each read whole in one request (a file is a sample, as in an image or shard dataset);
  the iterable one splits its files over DataLoader workers and distributed ranks.
- :class:`T3fsCheckpoint`: ``reader(path)`` / ``writer(path)`` file objects for
  ``torch.load`` / ``torch.save``.
- :class:`T3fsStorageWriter` / :class:`T3fsStorageReader`: ``torch.distributed.checkpoint``
  storage on t3fs (torch's file-system writer and reader over a t3fs ``FileSystemBase``).

DataLoader workers forked from the main process get a client of their own on first use (the
file system reconnects after a fork). Not here: Lightning's ``CheckpointIO`` (``lightning.py``).
"""

import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from .fs import T3fsFileSystem


# Bytes a checkpoint reader or writer moves per call: checkpoints are large and read whole, so
# a block of many chunks keeps many chunk I/Os in flight (32 at the default 1 MiB chunk size).
CHECKPOINT_BLOCK = 32 * 2**20

# Blocks a checkpoint reader keeps in flight ahead of torch.load: none. torch.load reads a
# whole tensor per call, which is already one native read with every chunk of it in flight; a
# window only added copies (python/bench/readahead.py: 425 against 330-370 MiB/s on 2 cores,
# 357 against 289-343 on 16).
CHECKPOINT_READAHEAD = 0


def _fs(fs=None, **storage_options):
    return fs if fs is not None else T3fsFileSystem(**storage_options)


def _bytes(sample):
    """The default transform: the sample's bytes."""
    return sample[1]


class T3fsMapDataset(Dataset):
    """The files under ``prefix`` (recursively, in name order), ``transform((path, data))`` each.
    A DataLoader batch is fetched by ``__getitems__`` in few round trips (64 files per stat
    request, their reads in flight together)."""

    def __init__(self, paths, transform=_bytes, fs=None, **storage_options):
        self.fs = _fs(fs, **storage_options)
        self.paths = list(paths)
        self.transform = transform

    @classmethod
    def from_prefix(cls, prefix, transform=_bytes, fs=None, **storage_options):
        fs = _fs(fs, **storage_options)
        return cls(sorted(fs.find(prefix)), transform=transform, fs=fs)

    @classmethod
    def from_paths(cls, paths, transform=_bytes, fs=None, **storage_options):
        fs = _fs(fs, **storage_options)
        return cls([fs._strip_protocol(p) for p in paths], transform=transform, fs=fs)

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        path = self.paths[i]
        return self.transform((path, self.fs.cat_file(path)))

    def __getitems__(self, indices):
        paths = [self.paths[i] for i in indices]
        return [self.transform(s) for s in zip(paths, self.fs.client.read_files(paths))]


class T3fsIterableDataset(IterableDataset):
    """The files under ``prefix`` as a stream; with ``enable_sharding`` each DataLoader worker of
    each distributed rank reads its own share (file ``k`` goes to shard ``k mod shards``)."""

    def __init__(self, paths, transform=_bytes, enable_sharding=True, fs=None, **storage_options):
        self.fs = _fs(fs, **storage_options)
        self.paths = list(paths)
        self.transform = transform
        self.enable_sharding = enable_sharding

    @classmethod
    def from_prefix(cls, prefix, transform=_bytes, enable_sharding=True, fs=None, **storage_options):
        fs = _fs(fs, **storage_options)
        return cls(sorted(fs.find(prefix)), transform, enable_sharding, fs=fs)

    def _shard(self):
        if not self.enable_sharding:
            return 0, 1
        rank, world = 0, 1
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        return rank * workers + worker, world * workers

    def __iter__(self):
        shard, shards = self._shard()
        for path in self.paths[shard::shards]:
            yield self.transform((path, self.fs.cat_file(path)))


class T3fsCheckpoint:
    """File objects for ``torch.save`` and ``torch.load`` on t3fs."""

    def __init__(self, fs=None, **storage_options):
        self.fs = _fs(fs, **storage_options)

    def reader(self, path):
        """A seekable, readable file object of ``path``. Each read is one native read with all
        its chunks in flight (``torch.load`` reads a tensor at a time), copied once into the
        caller's buffer (``readinto``); no fsspec cache sits above it."""
        return self.fs.open(
            path, "rb", block_size=CHECKPOINT_BLOCK, cache_type="none", readahead=CHECKPOINT_READAHEAD
        )

    def writer(self, path):
        """A writable file object; the checkpoint is in place once it is closed. It sends
        ``CHECKPOINT_BLOCK`` bytes a call, each chunk of them written in parallel."""
        return self.fs.open(path, "wb", block_size=CHECKPOINT_BLOCK)


def _url(path):
    return path if str(path).startswith("t3fs://") else "t3fs://" + str(path)


try:  # torch's fsspec-backed distributed-checkpoint storage (its public name since 2.10)
    from torch.distributed.checkpoint.fsspec_filesystem import FsspecReader, FsspecWriter
except ImportError:  # pragma: no cover - torch 2.2 to 2.9
    try:
        from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader, FsspecWriter
    except ImportError:  # older torch: no distributed-checkpoint storage here
        FsspecReader = FsspecWriter = None

if FsspecWriter is not None:

    class T3fsStorageWriter(FsspecWriter):
        """``torch.distributed.checkpoint`` storage writer for a t3fs directory (every rank
        writes its own files; the metadata file lands last)."""

        def __init__(self, path, **kwargs):
            super().__init__(_url(path), **kwargs)

    class T3fsStorageReader(FsspecReader):
        """``torch.distributed.checkpoint`` storage reader of a t3fs directory."""

        def __init__(self, path, **kwargs):
            super().__init__(_url(path), **kwargs)
