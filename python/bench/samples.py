"""The sample files the DataLoader benchmarks read: the same bytes written to t3fs (through
the package, 8 writers at once: the native writes release the GIL) and to a local directory,
named `NNN/sNNNNNN.bin`, a thousand to a directory; and the dataset that reads them with plain
`open()` (from the FUSE mount or the local directory), whose transform sees `(path, bytes)` as
`t3fs.torch.T3fsMapDataset`'s does, so every path decodes its samples alike.
"""

import os
from concurrent.futures import ThreadPoolExecutor

from torch.utils.data import Dataset


def names(count):
    """The relative names of `count` samples."""
    return [f"{i // 1000:03}/s{i:06}.bin" for i in range(count)]


def write(fs, root, local, rel_names, data_of):
    """Writes `data_of(name)` as `root/name` on t3fs and `local/name` on the local disk."""

    def one(n):
        data = data_of(n)
        fs.pipe_file(f"{root}/{n}", data)
        os.makedirs(os.path.dirname(f"{local}/{n}"), exist_ok=True)
        with open(f"{local}/{n}", "wb") as f:
            f.write(data)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, rel_names))


class LocalFiles(Dataset):
    """Plain `open()` reads of whole files, `transform((path, bytes))` each."""

    def __init__(self, paths, transform):
        self.paths, self.transform = paths, transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            return self.transform((self.paths[i], f.read()))
