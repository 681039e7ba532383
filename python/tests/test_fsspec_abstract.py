"""fsspec's own abstract test suite (shipped in its wheel) against a real cluster."""

import uuid

import pytest
from fsspec.tests import abstract


class T3fsFixtures(abstract.AbstractFixtures):
    @pytest.fixture
    def fs(self, t3fs_fs):
        return t3fs_fs

    @pytest.fixture
    def fs_path(self, t3fs_fs):
        path = f"/abstract-{uuid.uuid4().hex[:12]}"
        t3fs_fs.makedirs(path)
        yield path
        if t3fs_fs.exists(path):
            t3fs_fs.rm(path, recursive=True)

    @pytest.fixture
    def supports_empty_directories(self):
        return True


class TestT3fsCopy(abstract.AbstractCopyTests, T3fsFixtures):
    pass


class TestT3fsGet(abstract.AbstractGetTests, T3fsFixtures):
    pass


class TestT3fsPut(abstract.AbstractPutTests, T3fsFixtures):
    pass


class TestT3fsOpen(abstract.AbstractOpenTests, T3fsFixtures):
    pass


class TestT3fsPipe(abstract.AbstractPipeTests, T3fsFixtures):
    pass
