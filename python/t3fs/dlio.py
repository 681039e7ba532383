"""A DLIO reader (``reader_classname=t3fs.dlio.T3fsNpzReader``) that reads DLIO's npz samples
through the t3fs native client instead of POSIX: DLIO lists and shards the files as usual on the
mount (``data_folder``), and every file's bytes come from the cluster by its path in the
namespace, one ``cat_file`` per file, as a training job using the Python package would read them.

Environment: ``T3FS_CLUSTER`` names the cluster directory, ``T3FS_DLIO_MOUNT`` the mount point
whose paths map onto the namespace (``/mnt/t3fs/a/b`` is ``/a/b``). DataLoader workers forked by
DLIO get their own client (T3fsFileSystem's fork rule).

Not here: formats other than npz, or writing (DLIO generates the data through the mount).
"""

import io
import os

import numpy as np
from dlio_benchmark.reader.reader_handler import FormatReader

_FS = {}


def _fs():
    from .fs import T3fsFileSystem

    pid = os.getpid()
    if pid not in _FS:
        _FS[pid] = T3fsFileSystem(cluster=os.environ["T3FS_CLUSTER"])
    return _FS[pid]


def _namespace_path(filename):
    mount = os.environ["T3FS_DLIO_MOUNT"]
    rel = os.path.relpath(os.path.realpath(filename), os.path.realpath(mount))
    if rel.startswith(".."):
        raise ValueError(f"{filename} is not under the mount {mount}")
    return "/" + rel


class T3fsNpzReader(FormatReader):
    """DLIO's npz reader with the file's bytes read by the native client."""

    def __init__(self, dataset_type, thread_index, epoch):
        super().__init__(dataset_type, thread_index)

    def open(self, filename):
        super().open(filename)
        data = _fs().cat_file(_namespace_path(filename))
        return np.load(io.BytesIO(data), allow_pickle=True)["x"]

    def close(self, filename):
        super().close(filename)

    def get_sample(self, filename, sample_index):
        super().get_sample(filename, sample_index)
        self.open_file_map[filename][..., sample_index]

    def next(self):
        for batch in super().next():
            yield batch

    def read_index(self, image_idx, step):
        return super().read_index(image_idx, step)

    def finalize(self):
        return super().finalize()

    def is_index_based(self):
        return True

    def is_iterator_based(self):
        return True
