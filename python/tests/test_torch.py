"""PyTorch on t3fs against a real cluster: both datasets under a DataLoader with forked
workers, torch.save/torch.load checkpoints, torch's distributed checkpoint, and Lightning."""

import torch
from torch.utils.data import DataLoader

from t3fs.torch import (
    T3fsCheckpoint,
    T3fsIterableDataset,
    T3fsMapDataset,
    T3fsStorageReader,
    T3fsStorageWriter,
)


def _samples(fs, root, n=40):
    for i in range(n):
        fs.pipe_file(f"{root}/shard{i % 3}/sample{i:03}.bin", i.to_bytes(4, "little") * (i + 1))
    return {f"{root}/shard{i % 3}/sample{i:03}.bin": i for i in range(n)}


def _decode(sample):
    path, data = sample
    return path, int.from_bytes(data[:4], "little"), len(data)


def test_a_map_dataset_under_forked_workers(t3fs_fs, scratch):
    expected = _samples(t3fs_fs, scratch)
    ds = T3fsMapDataset.from_prefix(scratch, transform=_decode, fs=t3fs_fs)
    assert len(ds) == len(expected)
    loader = DataLoader(ds, batch_size=4, num_workers=4, collate_fn=list)
    seen = [s for batch in loader for s in batch]
    assert [p for p, _, _ in seen] == sorted(expected)
    for path, value, size in seen:
        assert value == expected[path] and size == 4 * (value + 1)


def test_a_batch_is_read_in_one_call_and_a_missing_file_names_itself(t3fs_fs, scratch):
    expected = _samples(t3fs_fs, scratch, n=70)  # two stat requests of 64 and 6
    t3fs_fs.touch(f"{scratch}/empty")
    paths = sorted(expected) + [f"{scratch}/empty"]
    ds = T3fsMapDataset.from_paths(paths, transform=_decode, fs=t3fs_fs)
    got = ds.__getitems__(list(range(len(paths))))
    assert [g[0] for g in got] == paths
    assert all(v == expected[p] for p, v, _ in got[:-1])
    assert t3fs_fs.client.read_files([f"{scratch}/empty"]) == [b""]
    try:
        t3fs_fs.client.read_files([paths[0], f"{scratch}/absent"])
        raise AssertionError("a missing file was read")
    except FileNotFoundError as e:
        assert "absent" in str(e)


def test_an_iterable_dataset_shards_over_workers(t3fs_fs, scratch):
    expected = _samples(t3fs_fs, scratch, n=30)
    ds = T3fsIterableDataset.from_prefix(scratch, transform=_decode, fs=t3fs_fs)
    seen = [s for s in DataLoader(ds, batch_size=None, num_workers=2)]
    assert sorted(p for p, _, _ in seen) == sorted(expected)  # each file once, none twice


def _model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))


def test_a_checkpoint_round_trips_through_torch_save_and_load(t3fs_fs, scratch):
    model = _model()
    ckpt = T3fsCheckpoint(fs=t3fs_fs)
    with ckpt.writer(f"{scratch}/ckpt/model.pt") as f:
        torch.save(model.state_dict(), f)
    with ckpt.reader(f"{scratch}/ckpt/model.pt") as f:
        loaded = torch.load(f, weights_only=True)
    assert loaded.keys() == model.state_dict().keys()
    for k, v in model.state_dict().items():
        assert torch.equal(loaded[k], v)


def test_distributed_checkpoint_saves_and_loads(t3fs_fs, scratch):
    import torch.distributed.checkpoint as dcp

    model = _model()
    dcp.save(model.state_dict(), storage_writer=T3fsStorageWriter(f"{scratch}/dcp"))
    assert t3fs_fs.exists(f"{scratch}/dcp/.metadata")
    target = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    dcp.load(target, storage_reader=T3fsStorageReader(f"{scratch}/dcp"))
    for k, v in model.state_dict().items():
        assert torch.equal(target[k], v)


def test_lightning_saves_loads_and_removes_through_the_plugin(t3fs_fs, scratch, tmp_path):
    import lightning.pytorch as pl

    from t3fs.lightning import T3fsLightningCheckpoint

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = _model()

        def training_step(self, batch, _):
            return self.net(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data = torch.utils.data.TensorDataset(torch.randn(16, 64))
    io = T3fsLightningCheckpoint(fs=t3fs_fs)
    trainer = pl.Trainer(
        max_epochs=1, plugins=[io], default_root_dir=str(tmp_path), enable_checkpointing=False,
        logger=False, enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
    )
    model = Tiny()
    trainer.fit(model, DataLoader(data, batch_size=4))
    path = f"{scratch}/lightning/last.ckpt"
    trainer.save_checkpoint(path)
    loaded = io.load_checkpoint(path)
    assert loaded["epoch"] == trainer.current_epoch and loaded["global_step"] == 4
    for k, v in model.state_dict().items():
        assert torch.equal(loaded["state_dict"][k], v)
    io.remove_checkpoint(path)
    assert not t3fs_fs.exists(path)


def test_async_lightning_checkpoints_driven_by_model_checkpoint(t3fs_fs, scratch, tmp_path):
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint

    from t3fs.lightning import T3fsAsyncLightningCheckpoint

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = _model()

        def training_step(self, batch, _):
            loss = self.net(batch[0]).pow(2).mean()
            self.log("loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data = torch.utils.data.TensorDataset(torch.randn(16, 64))
    io = T3fsAsyncLightningCheckpoint(fs=t3fs_fs)
    every_epoch = ModelCheckpoint(dirpath=f"t3fs://{scratch}/async", save_top_k=-1, every_n_epochs=1)
    trainer = pl.Trainer(
        max_epochs=3, plugins=[io], callbacks=[every_epoch], default_root_dir=str(tmp_path),
        logger=False, enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
    )
    model = Tiny()
    trainer.fit(model, DataLoader(data, batch_size=4))  # teardown waits for the saves
    names = sorted(p.rsplit("/", 1)[-1] for p in t3fs_fs.ls(f"{scratch}/async", detail=False))
    assert names == [f"epoch={e}-step={4 * (e + 1)}.ckpt" for e in range(3)]
    last = io.checkpoint_io.load_checkpoint(f"t3fs://{scratch}/async/{names[-1]}")
    assert last["global_step"] == 12
    for k, v in model.state_dict().items():
        assert torch.equal(last["state_dict"][k], v)


def _dcp_rank(rank, world, port, root, cluster):
    """One rank of a two-process save and load (gloo on CPU)."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        torch.manual_seed(100 + rank)  # each rank holds its own tensor, and one both share
        state = {f"rank{rank}": torch.randn(1000), "shared": torch.arange(10.0)}
        writer = T3fsStorageWriter(f"{root}/dcp2", cluster=cluster)
        dcp.save(state, storage_writer=writer)
        target = {k: torch.zeros_like(v) for k, v in state.items()}
        dcp.load(target, storage_reader=T3fsStorageReader(f"{root}/dcp2", cluster=cluster))
        for k, v in state.items():
            if not torch.equal(target[k], v):
                raise AssertionError(f"rank {rank}: {k} came back different")
    finally:
        dist.destroy_process_group()


def test_distributed_checkpoint_with_two_processes_over_gloo(cluster, t3fs_fs, scratch):
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_dcp_rank, args=(2, port, scratch, cluster), nprocs=2, join=True)
    files = t3fs_fs.ls(f"{scratch}/dcp2", detail=False)
    assert f"{scratch}/dcp2/.metadata" in files
    assert len([f for f in files if f.endswith(".distcp")]) == 2  # one file per rank
