"""The t3fs file system as users meet it: URLs with no t3fs import, Python's own exceptions,
ranged reads of multi-chunk files, appends, renames, and a client after a fork."""

import os
import subprocess
import sys

import fsspec
import pytest


def test_a_url_opens_with_no_t3fs_import(cluster, t3fs_fs, scratch):
    t3fs_fs.pipe_file(f"{scratch}/hello.txt", b"hello from t3fs")
    code = (
        "import fsspec, sys\n"
        f"data = fsspec.open('t3fs://{scratch}/hello.txt', 'rb').open().read()\n"
        "sys.stdout.write(data.decode())\n"
    )
    env = dict(os.environ, T3FS_CLUSTER=cluster)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout == b"hello from t3fs"


def test_failures_are_pythons_own_exceptions(t3fs_fs, scratch):
    with pytest.raises(FileNotFoundError):
        t3fs_fs.cat_file(f"{scratch}/absent")
    with pytest.raises(FileNotFoundError):
        t3fs_fs.info(f"{scratch}/absent")
    t3fs_fs.pipe_file(f"{scratch}/f", b"x")
    with pytest.raises(NotADirectoryError):
        t3fs_fs.info(f"{scratch}/f/below")
    with pytest.raises(IsADirectoryError):
        t3fs_fs.open(scratch, "rb")
    with pytest.raises(FileExistsError):
        t3fs_fs.open(f"{scratch}/f", "xb")
    with pytest.raises(FileExistsError):
        t3fs_fs.mkdir(scratch)
    t3fs_fs.pipe_file(f"{scratch}/d/inner", b"y")
    with pytest.raises(OSError) as e:
        t3fs_fs.client.remove(f"{scratch}/d")
    assert e.value.errno == 39  # ENOTEMPTY
    assert not isinstance(e.value, FileNotFoundError)


def test_ranged_reads_of_a_multi_chunk_file(t3fs_fs, scratch):
    data = os.urandom(3 * 2**20 + 12345)  # spans four 1 MiB chunks
    with t3fs_fs.open(f"{scratch}/big", "wb", block_size=2**20) as f:
        for i in range(0, len(data), 100_000):
            f.write(data[i : i + 100_000])
    assert t3fs_fs.size(f"{scratch}/big") == len(data)
    assert t3fs_fs.cat_file(f"{scratch}/big") == data
    assert t3fs_fs.cat_file(f"{scratch}/big", start=2**20 - 7, end=2**20 + 9) == data[2**20 - 7 : 2**20 + 9]
    assert t3fs_fs.cat_file(f"{scratch}/big", start=-100) == data[-100:]
    with t3fs_fs.open(f"{scratch}/big", "rb", block_size=65536) as f:
        f.seek(3 * 2**20 - 3)
        assert f.read(10) == data[3 * 2**20 - 3 : 3 * 2**20 + 7]
        f.seek(0)
        assert f.read() == data


def test_append_writes_after_the_end(t3fs_fs, scratch):
    path = f"{scratch}/log"
    with t3fs_fs.open(path, "ab") as f:
        f.write(b"one\n")
    with t3fs_fs.open(path, "ab") as f:
        assert f.tell() == 4
        f.write(b"two\n")
    assert t3fs_fs.cat_file(path) == b"one\ntwo\n"
    with t3fs_fs.open(path, "wb") as f:
        f.write(b"new")
    assert t3fs_fs.cat_file(path) == b"new"


def test_listing_rename_and_recursive_remove(t3fs_fs, scratch):
    for i in range(70):  # more than one batch stat (64) per listing
        t3fs_fs.pipe_file(f"{scratch}/many/f{i:03}", bytes([i]) * i)
    names = t3fs_fs.ls(f"{scratch}/many", detail=False)
    assert names == [f"{scratch}/many/f{i:03}" for i in range(70)]
    sizes = {e["name"]: e["size"] for e in t3fs_fs.ls(f"{scratch}/many")}
    assert sizes[f"{scratch}/many/f069"] == 69
    t3fs_fs.mv(f"{scratch}/many", f"{scratch}/moved")
    assert not t3fs_fs.exists(f"{scratch}/many")
    assert t3fs_fs.cat_file(f"{scratch}/moved/f010") == bytes([10]) * 10
    assert len(t3fs_fs.find(scratch)) == 70
    t3fs_fs.rm(f"{scratch}/moved", recursive=True)
    assert t3fs_fs.ls(scratch, detail=False) == []


def test_a_forked_child_gets_a_client_of_its_own(t3fs_fs, scratch):
    t3fs_fs.pipe_file(f"{scratch}/shared", b"before the fork")
    parent_client = t3fs_fs.client
    pid = os.fork()
    if pid == 0:  # the child: the parent's client refuses, the file system reconnects
        code = 1
        try:
            try:
                parent_client.stat("/")
            except OSError:
                if t3fs_fs.cat_file(f"{scratch}/shared") == b"before the fork":
                    t3fs_fs.pipe_file(f"{scratch}/from-child", b"child")
                    code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert t3fs_fs.cat_file(f"{scratch}/from-child") == b"child"
    assert t3fs_fs.client is parent_client  # the parent keeps its own


def test_a_flush_persists_and_shows_the_length_before_close(t3fs_fs, scratch):
    path = f"{scratch}/stream"
    with t3fs_fs.open(path, "wb") as w:
        w.write(b"a" * 1000)
        assert w.flush() == 1000
        assert t3fs_fs.info(path)["size"] == 1000  # a reader sees it before the close
        assert t3fs_fs.cat_file(path) == b"a" * 1000
        w.write(b"b" * 24)
        assert w.flush() == 1024
    with t3fs_fs.open(path, "ab") as w:
        w.write(b"c")
        assert w.flush() == 1025
    assert t3fs_fs.cat_file(path) == b"a" * 1000 + b"b" * 24 + b"c"


def test_many_ranges_in_one_call_answered_in_order(t3fs_fs, scratch):
    data = os.urandom(3 * 2**20)
    t3fs_fs.pipe_file(f"{scratch}/r", data)
    t3fs_fs.pipe_file(f"{scratch}/s", b"0123456789")
    starts = [i * 7919 % (3 * 2**20 - 65536) for i in range(300)]
    paths = [f"{scratch}/r"] * 300 + [f"{scratch}/s", f"{scratch}/absent"]
    got = t3fs_fs.cat_ranges(paths, starts + [2, 0], [s + 65536 for s in starts] + [5, 1])
    assert all(got[i] == data[s : s + 65536] for i, s in enumerate(starts))
    assert got[300] == b"234"
    assert isinstance(got[301], FileNotFoundError)


def _mgmtd_and_token(cluster):
    """mgmtd's address and the cluster's credential, as `cluster up` wrote them."""
    import tomllib

    with open(os.path.join(cluster, "mgmtd-0", "node.toml"), "rb") as f:
        node = tomllib.load(f)
    return node["node"]["listen"], node["cluster"]["token"]


@pytest.mark.parametrize("form", ["token@address", "address with T3FS_TOKEN"])
def test_t3fs_cluster_may_name_mgmtd_and_the_credential(cluster, t3fs_fs, scratch, form):
    t3fs_fs.pipe_file(f"{scratch}/a.txt", b"reached through mgmtd")
    addr, token = _mgmtd_and_token(cluster)
    env = {k: v for k, v in os.environ.items() if not k.startswith("T3FS_")}
    if form == "token@address":
        env["T3FS_CLUSTER"] = f"{token}@{addr}"
    else:
        env.update(T3FS_CLUSTER=addr, T3FS_TOKEN=token)
    code = f"import fsspec, sys; sys.stdout.write(fsspec.open('t3fs://{scratch}/a.txt').open().read().decode())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout == b"reached through mgmtd"


def test_a_cluster_named_wrongly_is_a_clear_error(cluster, monkeypatch):
    from t3fs.fs import T3fsFileSystem

    with pytest.raises(ValueError, match="neither a directory nor TOKEN@HOST:PORT"):
        T3fsFileSystem(cluster="/no/such/dir", skip_instance_cache=True)
    monkeypatch.delenv("T3FS_TOKEN", raising=False)
    addr, _ = _mgmtd_and_token(cluster)
    with pytest.raises(ValueError, match="name a cluster"):  # an address without a credential
        T3fsFileSystem(cluster=addr, skip_instance_cache=True)
