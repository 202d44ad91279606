"""The reference store: read-only store behaviour, local and HTTP targets, and the hostile cases.

The shared conformance suite's read-only subset (:class:`ReadConformance`) runs over a
reference set of inline values, ranges and whole local targets.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import random

import pytest

from nczfs.toolbox.errors import InvalidKey, KeyNotFound, ReadOnly, to_errno
from nczfs.store.values import ByteRange
from nczfs.store.reference.store import ReferenceStore
from nczfs.store.threads import ThreadedStore
from tests.http_range_server import RangeServer
from tests.store.readconformance import Held, ReadConformance
from nczfs.store import optional
from tests.store.offers import OFFERS

BLOB = random.Random(8).randbytes(10_000)


def write_refs(path, doc) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.fixture
def refdir(tmp_path):
    d = tmp_path / "refs"
    d.mkdir()
    (d / "blob.bin").write_bytes(BLOB)
    return d


@pytest.fixture
def server():
    s = RangeServer({"/blob.bin": BLOB})
    yield s
    s.close()


def errno_of(excinfo) -> int:
    return to_errno(excinfo.value)


# ---------------------------------------------------------------------- read-only store behaviour


@pytest.fixture
async def store(refdir):
    doc = {
        ".zgroup": '{"zarr_format":2}',
        "g/v/.zarray": "{}",
        "g/v/0.0": ["blob.bin", 100, 50],
        "g/v/0.1": ["blob.bin"],
        "g/w/0": "base64:AAEC",
        "g/z": "zzz",
        "top": "t",
    }
    s = ThreadedStore(ReferenceStore(write_refs(refdir / "r.json", doc)))
    yield s
    await s.close()


async def test_tree_is_implied_by_the_keys(store):
    assert [(e.name, e.is_dir) for e in await store.list_dir("")] == [(".zgroup", False), ("g", True), ("top", False)]
    assert [(e.name, e.is_dir) for e in await store.list_dir("g")] == [("v", True), ("w", True), ("z", False)]
    assert [e.name for e in await store.list_dir("g/v")] == [".zarray", "0.0", "0.1"]
    assert await store.list_dir("missing") == [] and await store.list_dir("top") == []
    assert await store.list_prefix("g") == ["g/v/.zarray", "g/v/0.0", "g/v/0.1", "g/w/0", "g/z"]
    assert await store.dir_exists("") and await store.dir_exists("g/v")
    assert not await store.dir_exists("g/z") and not await store.dir_exists("nope")
    assert (await store.entry("g")).is_dir and (await store.entry("g/z")).info.size == 3
    assert await store.entry("g/nope") is None


async def test_sizes_are_exact(store):
    sizes = {e.name: e.info.size for e in await store.list_dir("g/v")}
    assert sizes == {".zarray": 2, "0.0": 50, "0.1": len(BLOB)}  # the whole target, by stat
    assert (await store.stat("g/w/0")).size == 3
    assert (await store.stat("g/v/0.0")).etag == (await store.stat("top")).etag  # one tag: the JSON version


async def test_reads_and_ranges(store):
    assert await store.get("g/v/0.0") == BLOB[100:150]
    assert await store.get("g/v/0.1") == BLOB
    assert await store.get("g/w/0") == b"\x00\x01\x02"
    assert await store.get("g/v/0.0", ByteRange(10, 20)) == BLOB[110:120]
    assert await store.get("g/v/0.0", ByteRange(40)) == BLOB[140:150]
    assert await store.get("g/v/0.0", ByteRange(40, 1000)) == BLOB[140:150]  # clipped at the reference's end
    assert await store.get("g/v/0.0", ByteRange(50, 60)) == b""
    assert await store.get("g/z", ByteRange(1, 2)) == b"z"


async def test_missing_keys_and_directories_are_key_not_found(store):
    for key in ("nope", "g", "g/v", "top/below", "g/z/x"):
        with pytest.raises(KeyNotFound):
            await store.get(key)
        with pytest.raises(KeyNotFound):
            await store.stat(key)


@pytest.mark.parametrize("key", ["/a", "a/", "a/../b", "a//b", "."])
async def test_invalid_keys_rejected(store, key):
    with pytest.raises(InvalidKey):
        await store.get(key)


async def test_every_write_is_refused_with_erofs(store):
    for call in (
        store.set("new", b"x"), store.set("top", b"x"), store.delete("top"), store.copy("top", "t2"),
        store.rename("top", "t2"), optional.rename_dir(store, "g", "h"), optional.mkdir(store, "d"),
        optional.rmdir(store, "g"),
    ):
        with pytest.raises((ReadOnly, Exception)) as info:
            await call
        assert errno_of(info) in (errno.EROFS, errno.ENOTSUP)
    assert store.capabilities.read_only and not store.capabilities.supports_writes
    assert await store.get("top") == b"t"



class TestReferenceReads(ReadConformance):
    optional = OFFERS[ReferenceStore]
    """Inline text and base64 values, a range of a local file and a whole one."""

    @pytest.fixture
    def held(self, refdir) -> Held:
        doc = {".zgroup": '{"zarr_format":2}', "g/v/.zarray": "{}", "g/v/0.0": ["blob.bin", 100, 50],
               "g/v/0.1": ["blob.bin"], "g/w/0": "base64:AAEC", "g/z": "zzz", "top": "t"}
        objects = {".zgroup": b'{"zarr_format":2}', "g/v/.zarray": b"{}", "g/v/0.0": BLOB[100:150],
                   "g/v/0.1": BLOB, "g/w/0": b"\x00\x01\x02", "g/z": b"zzz", "top": b"t"}
        return Held(ReferenceStore(write_refs(refdir / "r.json", doc)), objects)


# ---------------------------------------------------------------------- local targets


def test_templates_and_gen_over_local_files(refdir):
    """The issue's example with local files: gen_key0..4, 1000 bytes at (i+1)*1000 of file_i."""
    parts = {i: random.Random(i).randbytes(6000) for i in range(5)}
    for i, data in parts.items():
        (refdir / f"part_{i}").write_bytes(data)
    doc = {
        "version": 1,
        "templates": {"u": "part", "f": "{{c}}.bin"},
        "gen": [
            {"key": "gen_key{{i}}", "url": "{{u}}_{{i}}", "offset": "{{(i + 1) * 1000}}", "length": "1000",
             "dimensions": {"i": {"stop": 5}}},
        ],
        "refs": {"inline": "text", "b64": "base64:3q2+7w==", "macro": ["{{f(c='blob')}}", 5, 3]},
    }
    s = ReferenceStore(write_refs(refdir / "v1.json", doc))
    try:
        for i in range(5):
            assert s.get(f"gen_key{i}") == parts[i][(i + 1) * 1000 : (i + 2) * 1000]
            assert s.stat(f"gen_key{i}").size == 1000
        assert s.get("inline") == b"text" and s.get("b64") == b"\xde\xad\xbe\xef"
        assert s.get("macro") == BLOB[5:8]
    finally:
        s.close()


def test_relative_file_url_and_absolute_paths(refdir):
    doc = {"a": ["file://" + str(refdir / "blob.bin"), 1, 2], "b": [str(refdir / "blob.bin"), 3, 2], "c": ["./sub/../blob.bin", 5, 1]}
    s = ReferenceStore(write_refs(refdir / "r.json", doc))
    assert (s.get("a"), s.get("b"), s.get("c")) == (BLOB[1:3], BLOB[3:5], BLOB[5:6])
    s.close()


def test_file_handles_are_reused(refdir):
    doc = {f"k{i}": ["blob.bin", i * 10, 10] for i in range(50)}
    s = ReferenceStore(write_refs(refdir / "r.json", doc))
    fds_before = len(os.listdir("/proc/self/fd"))
    for i in range(50):
        assert s.get(f"k{i}") == BLOB[i * 10 : i * 10 + 10]
    assert len(s.targets.local._open) == 1
    assert len(os.listdir("/proc/self/fd")) == fds_before + 1
    s.close()
    assert len(os.listdir("/proc/self/fd")) == fds_before


@pytest.fixture
def outside(tmp_path):
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.bin").write_bytes(b"secret bytes")
    return d


def hostile_doc(refdir, outside) -> dict:
    os.symlink(outside / "secret.bin", refdir / "link.bin")
    os.symlink(outside, refdir / "linkdir")
    return {
        "dotdot": ["../outside/secret.bin", 0, 6],
        "abs": [str(outside / "secret.bin"), 0, 6],
        "symlink": ["link.bin", 0, 6],
        "symlinkdir": ["linkdir/secret.bin", 0, 6],
        "shadow": ["/etc/shadow", 0, 10],
        "shadow_whole": ["file:///etc/shadow"],
        "fine": ["blob.bin", 0, 4],
    }


@pytest.mark.parametrize("key", ["dotdot", "abs", "symlink", "symlinkdir", "shadow", "shadow_whole"])
def test_targets_outside_the_allowed_roots_are_refused(refdir, outside, key, caplog):
    s = ReferenceStore(write_refs(refdir / "r.json", hostile_doc(refdir, outside)))
    with caplog.at_level(logging.WARNING, logger="nczfs.store.reference.targets"):
        with pytest.raises(Exception) as info:
            s.get(key)
    assert errno_of(info) == errno.EACCES
    assert "outside the allowed roots" in caplog.text and "refused reference target" in caplog.text
    assert s.get("fine") == BLOB[:4]
    s.close()


def test_allow_root_widens_and_replaces_the_default(refdir, outside):
    path = write_refs(refdir / "r.json", hostile_doc(refdir, outside))
    s = ReferenceStore(path, allow_roots=[str(outside), str(refdir)])
    assert s.get("dotdot") == s.get("symlink") == s.get("abs") == b"secret"
    with pytest.raises(Exception) as info:
        s.get("shadow")
    assert errno_of(info) == errno.EACCES
    s.close()
    only_outside = ReferenceStore(path, allow_roots=[str(outside)])
    with pytest.raises(Exception) as info:
        only_outside.get("fine")
    assert errno_of(info) == errno.EACCES
    only_outside.close()


def test_a_range_past_the_end_of_its_target_is_eio_with_a_log_line(refdir, caplog):
    doc = {"past": ["blob.bin", len(BLOB) - 10, 20], "beyond": ["blob.bin", len(BLOB) + 5, 1], "ok": ["blob.bin", len(BLOB) - 10, 10]}
    s = ReferenceStore(write_refs(refdir / "r.json", doc))
    for key in ("past", "beyond"):
        with caplog.at_level(logging.WARNING, logger="nczfs.store.reference.store"):
            with pytest.raises(Exception) as info:
                s.get(key, ByteRange(0, 1))  # even the bytes that exist: the reference is broken
        assert errno_of(info) == errno.EIO
        assert f"key '{key}'" in caplog.text and "past the end of the target" in caplog.text
    assert s.stat("past").size == 20  # listing still works
    assert s.get("ok") == BLOB[-10:]
    s.close()


def test_missing_and_special_targets_are_eio_not_a_hang(refdir):
    os.mkfifo(refdir / "fifo")
    (refdir / "d").mkdir()
    doc = {"missing": ["nothere.bin", 0, 4], "fifo": ["fifo", 0, 4], "dir": ["d", 0, 4], "whole_missing": ["nothere.bin"]}
    s = ReferenceStore(write_refs(refdir / "r.json", doc))
    for key in doc:
        with pytest.raises(Exception) as info:
            s.get(key)
        assert errno_of(info) == errno.EIO, key
    assert [e.name for e in s.list_dir("")] == ["dir", "fifo", "missing", "whole_missing"]
    s.close()


def test_s3_targets_without_the_mounts_s3_options_are_eio(refdir):
    s = ReferenceStore(write_refs(refdir / "r.json", {"k": ["s3://bucket/key.nc", 0, 4], "ok": "x"}))
    with pytest.raises(Exception) as info:
        s.get("k")
    assert errno_of(info) == errno.EIO and "s3 targets need the" in str(info.value)
    assert s.get("ok") == b"x"
    s.close()


# ---------------------------------------------------------------------- http targets


def test_http_ranged_reads_reuse_one_connection(refdir, server):
    url = server.url + "/blob.bin"
    doc = {"version": 1, "templates": {"u": url}, "refs": {f"c/{i}": ["{{u}}", i * 100, 100] for i in range(30)}}
    doc["refs"]["whole"] = [url]
    s = ReferenceStore(write_refs(refdir / "r.json", doc))
    try:
        for i in range(30):
            assert s.get(f"c/{i}") == BLOB[i * 100 : (i + 1) * 100]
        assert s.get("c/3", ByteRange(10, 20)) == BLOB[310:320]
        assert s.stat("whole").size == len(BLOB) and s.get("whole") == BLOB
        ranges = [r for m, p, r in server.requests if m == "GET"]
        assert "bytes=0-99" in ranges and "bytes=310-319" in ranges
        assert server.connections == 1  # sequential reads: one kept-alive connection
    finally:
        s.close()


def test_http_errors_are_eio(refdir, server, caplog):
    doc = {"gone": [server.url + "/missing.bin", 0, 4], "past": [server.url + "/blob.bin", len(BLOB) - 2, 4]}
    s = ReferenceStore(write_refs(refdir / "r.json", doc))
    for key in doc:
        with caplog.at_level(logging.WARNING):
            with pytest.raises(Exception) as info:
                s.get(key)
        assert errno_of(info) == errno.EIO
        assert f"key '{key}'" in caplog.text
    s.close()


def test_http_server_ignoring_range_still_gives_the_right_bytes(refdir, server, monkeypatch):
    """A server that answers 200 with the whole target: the reader takes the bytes it asked for."""
    doc = {"k": [server.url + "/blob.bin", 30, 10], "whole": [server.url + "/blob.bin"]}
    s = ReferenceStore(write_refs(refdir / "r.json", doc))
    from nczfs.store.reference import targets as reftargets

    real_request = reftargets.HttpFiles._request

    def no_range(self, method, url, headers=None, preload=True):
        return real_request(self, method, url, None if method == "GET" else headers, preload)

    monkeypatch.setattr(reftargets.HttpFiles, "_request", no_range)
    try:
        assert s.get("k") == BLOB[30:40]
        assert s.get("whole", ByteRange(9_990, 20_000)) == BLOB[9_990:]
        assert s.get("k", ByteRange(2, 4)) == BLOB[32:34]
        assert [r for m, _, r in server.requests if m == "GET"] == [None, None, None]
        # the first and last GETs leave most of the body unread: their connection is dropped, not
        # reused; the HEAD and the GET of the whole target (read to its end) share one connection
        assert server.connections == 2
    finally:
        s.close()


def test_a_target_is_sized_once_even_when_asked_concurrently(refdir, server):
    from concurrent.futures import ThreadPoolExecutor

    url = server.url + "/blob.bin"
    s = ReferenceStore(write_refs(refdir / "r.json", {f"k{i}": [url, i * 100, 100] for i in range(40)}))
    try:
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda i: s.get(f"k{i}"), range(40)))
        assert got == [BLOB[i * 100 : (i + 1) * 100] for i in range(40)]
        assert [m for m, _, _ in server.requests].count("HEAD") == 1
        assert server.connections <= 8
    finally:
        s.close()
