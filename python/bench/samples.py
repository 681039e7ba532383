"""The sample files the DataLoader benchmarks read: the same bytes written to t3fs (through
the package, 8 writers at once: the native writes release the GIL) and to a local directory,
named `NNN/sNNNNNN.bin`, a thousand to a directory.

Not here: reading them (each benchmark's own datasets).
"""

import os
from concurrent.futures import ThreadPoolExecutor


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
