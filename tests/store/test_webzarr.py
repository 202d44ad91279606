"""The web-server Zarr backend (read-only https://) against nginx: the tree from consolidated
metadata, chunk names from the chunk grid, ranges, 404 as a missing file."""

from __future__ import annotations

import errno
import shutil

import numpy as np
import pytest

from nczfs.toolbox.errors import KeyNotFound, ReadOnly, SourceError, to_errno
from nczfs.config.source import parse_source
from nczfs.store.values import ByteRange
from nczfs.store.objstore.webzarr import open_http
from nczfs.store.threads import ThreadedStore
from tests.store.readconformance import Held, ReadConformance
from nczfs.store.objstore.webzarr import WebZarrStore
from tests.store.offers import OFFERS


def publish(web_server, name: str, zarr_format: int, tmp_path, consolidated: bool = True) -> str:
    """A Zarr written by zarr-python into nginx's root: a 10 x 10 array in 4 x 4 chunks with
    only its first row of chunks written, and a group holding a 1-d array."""
    import zarr

    local = tmp_path / name
    root = zarr.open_group(str(local), mode="w", zarr_format=zarr_format)
    kw = {"chunk_key_encoding": {"name": "default", "separator": "/"}} if zarr_format == 3 else {}
    t = root.create_array("temp", shape=(10, 10), chunks=(4, 4), dtype="i4", fill_value=-1, **kw)
    t[0:4, :] = np.arange(40, dtype="i4").reshape(4, 10)
    g = root.create_group("g")
    v = g.create_array("v", shape=(5,), chunks=(2,), dtype="f8", fill_value=0.0)
    v[:] = np.arange(5.0)
    if consolidated:
        zarr.consolidate_metadata(str(local))
    shutil.copytree(local, web_server.root / name, dirs_exist_ok=True)
    return f"{web_server.url}/{name}"


def publish_whole(web_server, name: str, zarr_format: int, tmp_path) -> tuple[str, dict[str, bytes]]:
    """A consolidated Zarr with every chunk written (so that its chunk grid names only files that
    exist), in nginx's root: its URL and every file it holds."""
    import zarr

    local = tmp_path / name
    root = zarr.open_group(str(local), mode="w", zarr_format=zarr_format)
    kw = {"chunk_key_encoding": {"name": "default", "separator": "/"}} if zarr_format == 3 else {}
    t = root.create_array("temp", shape=(6, 6), chunks=(4, 4), dtype="i4", fill_value=-1, **kw)
    t[:] = np.arange(36, dtype="i4").reshape(6, 6)
    v = root.create_group("g").create_array("v", shape=(5,), chunks=(2,), dtype="f8", fill_value=0.0)
    v[:] = np.arange(1.0, 6.0)
    zarr.consolidate_metadata(str(local))
    shutil.copytree(local, web_server.root / name, dirs_exist_ok=True)
    files = {p.relative_to(local).as_posix(): p.read_bytes() for p in local.rglob("*") if p.is_file()}
    return f"{web_server.url}/{name}", files


class TestWebZarrReads(ReadConformance):
    optional = OFFERS[WebZarrStore]
    """A Zarr v2 and a v3 one served by nginx."""

    listings_carry_info = False  # the tree comes from the metadata: no sizes until a stat

    @pytest.fixture(params=[2, 3], ids=["v2", "v3"])
    def held(self, request, web_server, tmp_path) -> Held:
        url, files = publish_whole(web_server, f"whole{request.param}-{tmp_path.name}.zarr", request.param, tmp_path)
        return Held(open_url(url), files)


def open_url(url: str):
    return open_http(url, parse_source(url).location)


@pytest.mark.parametrize("zarr_format", [2, 3])
async def test_the_tree_comes_from_consolidated_metadata_and_the_chunk_grid(web_server, tmp_path, zarr_format):
    url = publish(web_server, f"tree{zarr_format}.zarr", zarr_format, tmp_path)
    store = ThreadedStore(open_url(url))
    names = [e.name for e in await store.list_dir("")]
    if zarr_format == 2:
        assert names == [".zattrs", ".zgroup", ".zmetadata", "g", "temp"] or names == [".zgroup", ".zmetadata", "g", "temp"]
        chunks = [e.name for e in await store.list_dir("temp") if not e.name.startswith(".")]
        assert chunks == [f"{i}.{j}" for i in range(3) for j in range(3)]
        present, missing = "temp/0.1", "temp/2.2"
    else:
        assert names == ["g", "temp", "zarr.json"]
        assert [e.name for e in await store.list_dir("temp")] == ["c", "zarr.json"]
        assert [e.name for e in await store.list_dir("temp/c")] == ["0", "1", "2"]
        assert all(e.is_dir for e in await store.list_dir("temp/c"))
        assert [e.name for e in await store.list_dir("temp/c/1")] == ["0", "1", "2"]
        present, missing = "temp/c/0/1", "temp/c/2/2"
    local = (web_server.root / url.rsplit("/", 1)[1] / present).read_bytes()
    assert await store.get(present) == local
    assert await store.get(present, ByteRange(2, 7)) == local[2:7]
    assert await store.get(present, ByteRange(len(local) + 5, len(local) + 9)) == b""
    info = await store.stat(present)
    assert info.size == len(local) and info.etag
    entry = await store.entry(present)
    assert entry is not None and entry.info.size == len(local)
    with pytest.raises(KeyNotFound) as failed:  # named by the grid, never written: 404
        await store.get(missing)
    assert to_errno(failed.value) == errno.ENOENT
    assert await store.entry(missing) is None
    assert await store.entry("temp/9.9") is None and await store.entry("nothing") is None
    with pytest.raises(ReadOnly):
        await store.set(present, b"x")
    await store.close()


def test_a_zarr_without_consolidated_metadata_is_refused_with_the_reason(web_server, tmp_path):
    url = publish(web_server, "plain.zarr", 3, tmp_path, consolidated=False)
    with pytest.raises(SourceError, match="consolidated"):
        open_url(url)
    with pytest.raises(SourceError, match="consolidated"):
        open_url(f"{web_server.url}/no-such.zarr")


def test_https_urls_are_s3_only_where_netcdf_c_says_so():
    assert parse_source("https://example.org/data/x.zarr").backend == "http"
    assert parse_source("https://example.org/bucket/x.zarr#mode=nczarr,s3").backend == "s3"
    assert parse_source("https://bkt.s3.eu-west-1.amazonaws.com/x.zarr").backend == "s3"
    assert parse_source("https://storage.googleapis.com/bkt/x.zarr").backend == "s3"
    assert parse_source("https://acct.blob.core.windows.net/ctr/x.zarr").backend == "azure"
    assert parse_source("gs://bucket/x.zarr").location == "bucket/x.zarr"
    assert parse_source("az://ctr/x.zarr").backend == "azure"
    assert parse_source("abfss://ctr@acct.dfs.core.windows.net/x.zarr").location == "ctr/x.zarr"
    with pytest.raises(SourceError, match="container"):
        parse_source("az://Bad_Name/x")
