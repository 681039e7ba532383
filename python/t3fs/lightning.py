"""Lightning's ``CheckpointIO`` on t3fs: ``Trainer(plugins=[T3fsLightningCheckpoint()])`` saves,
loads and removes checkpoints through the native client (``t3fs://`` or absolute paths);
``T3fsAsyncLightningCheckpoint`` saves in a background thread while training goes on (the
native writes release the GIL), as Lightning's ``AsyncCheckpointIO`` does for any plugin.

Not here: what Lightning puts in a checkpoint, or when it saves one.
"""

import torch
from lightning.fabric.plugins.io.checkpoint_io import CheckpointIO
from lightning.pytorch.plugins.io import AsyncCheckpointIO

from .torch import T3fsCheckpoint


class T3fsLightningCheckpoint(CheckpointIO):
    """Saves with ``torch.save`` into a t3fs file; a checkpoint exists once its save returned."""

    def __init__(self, fs=None, **storage_options):
        self.checkpoint = T3fsCheckpoint(fs=fs, **storage_options)

    def save_checkpoint(self, checkpoint, path, storage_options=None):
        with self.checkpoint.writer(path) as f:
            torch.save(checkpoint, f)

    def load_checkpoint(self, path, map_location=None, weights_only=None):
        with self.checkpoint.reader(path) as f:
            # Lightning's own checkpoints hold more than tensors (hyperparameters, loops).
            return torch.load(f, map_location=map_location, weights_only=bool(weights_only))

    def remove_checkpoint(self, path):
        fs = self.checkpoint.fs
        if fs.exists(path):
            fs.rm(path)


class T3fsAsyncLightningCheckpoint(AsyncCheckpointIO):
    """Saves in a background thread: the save call returns once the tensors are cloned, and a
    checkpoint exists once the Trainer's teardown (or the next save's error check) has waited
    for it. A failed save raises at the next save or at teardown."""

    def __init__(self, fs=None, **storage_options):
        super().__init__(T3fsLightningCheckpoint(fs=fs, **storage_options))
