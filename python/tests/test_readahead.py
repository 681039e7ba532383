"""The reader's prefetch window: sequential reads find their bytes prefetched, random access
stops prefetching, and whatever the window does, the bytes read are the file's."""

import io
import os
import random

import torch


def _file(t3fs_fs, scratch, n):
    data = os.urandom(n)
    t3fs_fs.pipe_file(f"{scratch}/f", data)
    return f"{scratch}/f", data


def test_sequential_reads_are_served_from_the_window(t3fs_fs, scratch):
    path, data = _file(t3fs_fs, scratch, 2**20 + 777)
    with t3fs_fs.open(path, "rb", block_size=10_000, readahead=3, cache_type="none") as f:
        got = b"".join(iter(lambda: f.read(4_321), b""))
        window = f._window
    assert got == data
    assert window.prefetched > 50 and window.used >= window.prefetched - 3


def test_random_access_stops_prefetching(t3fs_fs, scratch):
    path, data = _file(t3fs_fs, scratch, 600_000)
    rng = random.Random(7)
    with t3fs_fs.open(path, "rb", block_size=8_192, readahead=4, cache_type="none") as f:
        f.read(100)  # a read at 0 counts as sequential: one window goes out
        before = f._window.prefetched
        for _ in range(200):
            at = rng.randrange(0, len(data) - 5_000)
            f.seek(at)
            assert f.read(5_000) == data[at : at + 5_000]
        assert f._window.prefetched == before, "random reads prefetched"
        assert not f._window.blocks, "the window was not dropped"
        f.seek(300_000)  # sequential again from here: the window comes back
        assert f.read(8_000) == data[300_000:308_000]
        assert f.read(8_000) == data[308_000:316_000]
        assert f._window.prefetched > before


def test_readinto_fills_the_buffer_across_blocks(t3fs_fs, scratch):
    path, data = _file(t3fs_fs, scratch, 300_001)
    with t3fs_fs.open(path, "rb", block_size=7_000, readahead=2, cache_type="none") as f:
        buf = bytearray(123_456)
        assert f.readinto(buf) == len(buf) and bytes(buf) == data[: len(buf)]
        rest = bytearray(400_000)
        assert f.readinto(rest) == len(data) - len(buf)
        assert bytes(rest[: len(data) - len(buf)]) == data[len(buf) :]
        assert f.readinto(bytearray(10)) == 0


def test_a_checkpoint_loads_through_the_window(t3fs_fs, scratch):
    from t3fs.torch import T3fsCheckpoint

    state = {f"t{i}": torch.randn(300_000 + i) for i in range(5)}
    ckpt = T3fsCheckpoint(fs=t3fs_fs)
    with ckpt.writer(f"{scratch}/m.pt") as f:
        torch.save(state, f)
    with ckpt.reader(f"{scratch}/m.pt") as f:
        back = torch.load(f, weights_only=True)
    assert back.keys() == state.keys() and all(torch.equal(back[k], state[k]) for k in state)
    buf = io.BytesIO(t3fs_fs.cat_file(f"{scratch}/m.pt"))
    assert torch.load(buf, weights_only=True).keys() == state.keys()
