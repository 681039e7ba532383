"""t3fs from Python: an fsspec file system for ``t3fs://`` paths over the native client.

``fsspec.open("t3fs:///data/x.bin")`` works with no import of this package: fsspec finds
:class:`t3fs.fs.T3fsFileSystem` through its ``fsspec.specs`` entry point, and the file system
connects to the cluster named by ``T3FS_CLUSTER`` (a ``t3fs cluster up`` directory), or by
``T3FS_MGMTD`` and ``T3FS_TOKEN``, unless ``storage_options`` name one.

:class:`Client` is the native client itself (one connection, its own threads); every call that
waits on the cluster releases the GIL.
"""

from ._native import Client, File
from .fs import T3fsFileSystem

__all__ = ["Client", "File", "T3fsFileSystem"]
