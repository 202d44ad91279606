import zipfile

import pytest

from nczfs.store.zip import ZipStore
from tests.store.conformance import StoreConformance
from tests.ziputil import rewrite_zip, zip_members


class ZipConformance(StoreConformance):
    layout = "netcdf"

    @pytest.fixture
    def sync_store(self, tmp_path) -> ZipStore:
        self.archive = tmp_path / "medium.zarr.zip"
        self.medium = ZipStore(str(self.archive), layout=self.layout)
        yield self.medium
        self.medium.close()

    def read_only_store(self) -> ZipStore:
        self.medium.sync()
        return ZipStore(str(self.archive), read_only=True)

    def put_raw(self, key: str, data: bytes) -> None:
        self.medium.sync()
        rewrite_zip(self.archive, {key: data}, default_layout=self.layout)

    def get_raw(self, key: str) -> bytes | None:
        self.medium.sync()
        return zip_members(self.archive, self.layout).get(key)

    async def test_layout_of_the_written_archive(self, store):
        await store.set("g/v/0", b"chunk")
        await store.sync()
        names = zipfile.ZipFile(self.archive).namelist()
        if self.layout == "netcdf":
            assert names == ["medium.zarr/", "medium.zarr/g/", "medium.zarr/g/v/", "medium.zarr/g/v/0"]
        else:
            assert names == ["g/v/0"]


class TestZipNetcdfLayout(ZipConformance):
    layout = "netcdf"


class TestZipFlatLayout(ZipConformance):
    layout = "flat"
