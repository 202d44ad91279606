"""The Icechunk backend: the conformance suite over a local repository, then Icechunk's own behaviour.

Icechunk holds Zarr v3 keys of existing nodes only; the suite's free-form keys ("g/v/obj") are
files Icechunk cannot hold, which wait in the writable session (and keep a commit from being
made until they are gone). The backdoor tests, which need the medium to hold such keys, are run
here with Zarr keys instead.
"""

from __future__ import annotations

import json

import icechunk
import numpy as np
import pytest
import zarr

from nczfs.toolbox.errors import BackendError, InvalidArgument, KeyNotFound, ReadOnly
from nczfs.store.icechunk.store import IcechunkStore
from nczfs.store.values import ByteRange
from nczfs.store.threads import ThreadedStore
from tests.store.conformance import StoreConformance
from tests.store.offers import OFFERS

icechunk.set_logs_filter("error")

GROUP = json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}}).encode()


def array_meta(shape=(4,), chunks=(2,), dtype="int32", **extra) -> bytes:
    return json.dumps({
        "zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {}, **extra,
    }).encode()


def local_repo(path):
    return icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))


def reopen(path):
    return icechunk.Repository.open(icechunk.local_filesystem_storage(str(path)))


def commit_elsewhere(path, writes: dict[str, bytes], message="elsewhere", branch="main") -> str:
    """Write ``writes`` in a session of another repository handle and commit them."""
    session = reopen(path).writable_session(branch)
    store = session.store
    for key, data in writes.items():
        zarr.core.sync.sync(store.set(key, zarr.core.buffer.default_buffer_prototype().buffer.from_bytes(data)))
    return session.commit(message)


def read_branch(path, key: str, branch="main") -> bytes | None:
    store = reopen(path).readonly_session(branch=branch).store
    try:
        buf = zarr.core.sync.sync(store.get(key, zarr.core.buffer.default_buffer_prototype()))
    except icechunk.IcechunkError as exc:  # a key below a node that is not there
        assert "node not found" in str(exc)
        return None
    return None if buf is None else buf.to_bytes()


class TestIcechunkStore(StoreConformance):
    optional = OFFERS[IcechunkStore]
    #: Zarr keys of existing nodes: the only ones Icechunk holds
    read_objects = {"zarr.json": GROUP, "g/zarr.json": GROUP, "g/v/zarr.json": array_meta(),
                    "g/v/c/0": bytes(range(8)), "g/v/c/1": bytes(range(8, 16))}

    @pytest.fixture
    def sync_store(self, tmp_path) -> IcechunkStore:
        self.path = tmp_path / "repo"
        store = IcechunkStore(local_repo(self.path))
        yield store
        store.close()

    def read_only_store(self) -> IcechunkStore:
        return IcechunkStore(reopen(self.path), read_only=True)

    def put_raw(self, key: str, data: bytes) -> None:
        commit_elsewhere(self.path, {key: data})

    def get_raw(self, key: str) -> bytes | None:
        try:
            return read_branch(self.path, key)
        except Exception:  # noqa: BLE001 - not a key Icechunk can hold: not in the medium
            return None

    # the backdoor tests, with keys Icechunk holds (the suite's own need free-form keys there)

    async def test_read_only_store_refuses_writes(self, store):
        for key, data in (("zarr.json", GROUP), ("keep/zarr.json", array_meta()), ("keep/c/0", b"A" * 8)):
            await store.set(key, data)
        await store.sync()
        ro = ThreadedStore(self.read_only_store())
        assert ro.capabilities.read_only
        for attempt in (lambda: ro.set("keep/c/0", b"changed!"), lambda: ro.set("keep/c/1", b"x" * 8),
                        lambda: ro.delete("keep/c/0"), lambda: ro.rename("keep/c/0", "keep/c/1"),
                        lambda: ro.copy("keep/c/0", "keep/c/1"), lambda: ro.rename_dir("keep", "gone")):
            with pytest.raises(ReadOnly):
                await attempt()
        assert await ro.get("keep/c/0") == b"A" * 8
        assert await ro.list_prefix("") == ["keep/c/0", "keep/zarr.json", "zarr.json"]
        assert self.get_raw("keep/c/1") is None
        await ro.close()

    async def test_writes_reach_the_medium(self, store):
        await store.set("w/zarr.json", array_meta())
        await store.set("w/c/0", b"through!")
        assert self.get_raw("w/c/0") is None  # not before the commit
        await store.sync()
        assert self.get_raw("w/c/0") == b"through!"
        await store.rename("w/c/0", "w/c/1")
        await store.sync()
        assert self.get_raw("w/c/0") is None and self.get_raw("w/c/1") == b"through!"
        await store.delete("w/c/1")
        await store.sync()
        assert self.get_raw("w/c/1") is None

    async def test_medium_writes_reach_the_store(self, store):
        self.put_raw("zarr.json", GROUP)
        commit_elsewhere(self.path, {"bd/zarr.json": array_meta(), "bd/c/0": b"backdoor", "bd/c/1": b"yy"})
        await store.sync()  # a session sees the commits made elsewhere once it follows its branch
        assert await store.get("bd/c/0") == b"backdoor"
        assert (await store.stat("bd/c/0")).size == 8
        assert [(e.name, e.is_dir) for e in await store.list_dir("bd")] == [("c", True), ("zarr.json", False)]
        assert [(e.name, e.is_dir) for e in await store.list_dir("bd/c")] == [("0", False), ("1", False)]
        assert await store.list_prefix("") == ["bd/c/0", "bd/c/1", "bd/zarr.json", "zarr.json"]
        commit_elsewhere(self.path, {"bd/c/0": b"changed!"})
        await store.sync()
        assert await store.get("bd/c/0") == b"changed!"


# ---------------------------------------------------------------------- Icechunk only


@pytest.fixture
def repo_path(tmp_path):
    path = tmp_path / "repo"
    local_repo(path)
    commit_elsewhere(path, {"zarr.json": GROUP, "v/zarr.json": array_meta((4, 4), (2, 2)),
                            "v/c/0/0": b"a" * 16, "v/c/1/1": b"b" * 16, "s/zarr.json": array_meta((), ())}, "v1")
    return path


@pytest.fixture
async def ice(repo_path):
    s = ThreadedStore(IcechunkStore(reopen(repo_path), where=str(repo_path)))
    yield s
    await s.close()


async def test_listings_tell_chunks_from_directories_and_carry_sizes(ice):
    """Before: every listed chunk and zarr.json had no size (readdirplus gave ls -l size 0)."""
    root = await ice.list_dir("")
    assert [(e.name, e.is_dir) for e in root] == [("s", True), ("v", True), ("zarr.json", False)]
    assert root[2].info.size == len(GROUP)
    assert [(e.name, e.is_dir) for e in await ice.list_dir("v")] == [("c", True), ("zarr.json", False)]
    assert [(e.name, e.is_dir) for e in await ice.list_dir("v/c")] == [("0", True), ("1", True)]
    chunks = await ice.list_dir("v/c/1")
    assert [(e.name, e.is_dir, e.info.size) for e in chunks] == [("1", False, 16)]
    assert await ice.list_prefix("v/c") == ["v/c/0/0", "v/c/1/1"]
    assert (await ice.entry("v/c/0")).is_dir and not (await ice.entry("v/c/0/0")).is_dir
    assert await ice.entry("v/c/0/1") is None and await ice.entry("nope") is None


async def test_a_ranged_read_of_metadata_past_its_end_is_clipped(ice):
    """Before: Icechunk 1.1 panicked on it (read() of zarr.json with a 4 KiB buffer failed, EIO)."""
    whole = await ice.get("zarr.json")
    assert await ice.get("zarr.json", ByteRange(0, 4096)) == whole
    assert await ice.get("zarr.json", ByteRange(5, 10_000)) == whole[5:]
    assert await ice.get("v/c/0/0", ByteRange(10, 100)) == b"a" * 6


async def test_reads_of_the_mounted_tree_take_no_worker_thread(ice, monkeypatch):
    calls = []
    real = ice._call
    monkeypatch.setattr(ice, "_call", lambda fn, *a: calls.append(fn.__name__) or real(fn, *a))
    assert await ice.get("v/c/1/1") == b"b" * 16
    assert await ice.get_version("v/c/0/0", ByteRange(0, 4), None) == b"aaaa"
    with pytest.raises(KeyNotFound):
        await ice.get("v/c/0/1")
    assert calls == []


async def test_zarr_v2_metadata_and_bad_metadata_are_refused(ice):
    for key, data in ((".zgroup", b'{"zarr_format": 2}'), ("v/.zarray", b"{}"), ("w/zarr.json", b"not json"),
                      ("w/zarr.json", b'{"zarr_format": 3}'),
                      ("w/zarr.json", array_meta((0,), (0,)))):  # zarr-python writes it; Icechunk cannot hold it
        with pytest.raises(InvalidArgument) as info:
            await ice.set(key, data)
        assert key in str(info.value)
    assert await ice.list_prefix("w") == [] and await ice.entry(".zgroup") is None


async def test_chunks_written_before_their_array_wait_for_it(ice, repo_path):
    """cp -r may copy an array's chunks before its zarr.json; they are stored when it arrives."""
    await ice.set("n/c/1", b"later")
    assert await ice.get("n/c/1") == b"later"
    assert [(e.name, e.is_dir) for e in await ice.list_dir("n")] == [("c", True)]
    assert ice.counters()["icechunk.waiting-files"] == 1
    await ice.set("n/zarr.json", array_meta((4,), (2,)))
    assert ice.counters()["icechunk.waiting-files"] == 0
    await ice.sync()
    assert read_branch(repo_path, "n/c/1") == b"later"


async def test_removing_an_arrays_zarr_json_removes_the_array_and_a_rename_moves_it_whole(ice, repo_path):
    await ice.rename_dir("v", "w")
    assert await ice.list_prefix("w") == ["w/c/0/0", "w/c/1/1", "w/zarr.json"] and await ice.list_prefix("v") == []
    assert ice.counters()["icechunk.waiting-files"] == 0
    await ice.delete("w/zarr.json")  # Icechunk keeps no chunk without its array
    assert await ice.list_prefix("w") == [] and await ice.entry("w") is None
    await ice.sync()
    assert read_branch(repo_path, "v/c/0/0") is None and read_branch(repo_path, "w/zarr.json") is None


async def test_files_icechunk_cannot_hold_keep_the_commit_back_and_lose_nothing(ice, repo_path):
    await ice.set("v/c/0/0", b"c" * 16)
    await ice.set("notes.txt", b"not zarr")
    with pytest.raises(BackendError) as info:
        await ice.sync()
    assert "notes.txt" in str(info.value) and "not committed" in str(info.value)
    assert read_branch(repo_path, "v/c/0/0") == b"a" * 16  # nothing committed
    assert await ice.get("v/c/0/0") == b"c" * 16 and await ice.get("notes.txt") == b"not zarr"
    await ice.rename("notes.txt", "v/c/0/1")  # now a chunk key: it can be held
    await ice.sync()
    assert read_branch(repo_path, "v/c/0/0") == b"c" * 16 and read_branch(repo_path, "v/c/0/1") == b"not zarr"


@pytest.mark.parametrize("message", ["from the mount", None])
async def test_one_commit_per_sync_with_the_message_given_or_one_naming_host_and_time(repo_path, message):
    import socket

    store = IcechunkStore(reopen(repo_path), commit_message=message)
    try:
        store.set("v/c/0/0", b"x" * 16)
        store.set("v/c/0/1", b"y" * 16)
        store.sync()
        store.sync()  # nothing new: no commit
        history = [h.message for h in reopen(repo_path).ancestry(branch="main")]
        assert history[1:] == ["v1", "Repository initialized"] and store.counters()["icechunk.commits"] == 1
        if message is None:
            assert history[0].startswith(f"nczfs: writes on {socket.gethostname()} at ") and history[0].endswith("Z")
        else:
            assert history[0] == message
    finally:
        store.close()


async def test_commits_made_elsewhere_meanwhile_are_rebased_onto(repo_path):
    store = IcechunkStore(reopen(repo_path))
    try:
        store.set("v/c/0/0", b"mine" * 4)
        commit_elsewhere(repo_path, {"v/c/1/1": b"theirs" + b"!" * 10}, "theirs")
        store.sync()
        assert read_branch(repo_path, "v/c/0/0") == b"mine" * 4
        assert read_branch(repo_path, "v/c/1/1") == b"theirs" + b"!" * 10
        assert store.get("v/c/1/1") == b"theirs" + b"!" * 10  # the session follows the new tip
        assert [h.message for h in reopen(repo_path).ancestry(branch="main")][1] == "theirs"
    finally:
        store.close()


async def test_a_conflict_fails_the_sync_clearly_and_keeps_the_session(repo_path):
    store = IcechunkStore(reopen(repo_path))
    try:
        store.set("v/c/0/0", b"mine" * 4)
        commit_elsewhere(repo_path, {"v/c/0/0": b"theirs!!" * 2}, "theirs")
        for _ in range(2):  # retried: the same clear error, nothing lost
            with pytest.raises(BackendError) as info:
                store.sync()
            text = str(info.value)
            assert "not committed" in text and "conflict" in text and "/v" in text and "nczfs sync" in text
            assert store.get("v/c/0/0") == b"mine" * 4
        assert read_branch(repo_path, "v/c/0/0") == b"theirs!!" * 2
    finally:
        store.close()
    # at the end (the unmount) the writes are kept on a branch of their own
    assert store.unmerged_branch is not None and store.unmerged_branch.startswith("nczfs-unmerged-main-")
    assert read_branch(repo_path, "v/c/0/0", branch=store.unmerged_branch) == b"mine" * 4
    assert read_branch(repo_path, "v/c/0/0") == b"theirs!!" * 2


async def test_history_directories_show_branches_tags_and_the_ancestry(repo_path):
    repo = reopen(repo_path)
    v1 = repo.lookup_branch("main")
    repo.create_tag("v1", v1)
    repo.create_branch("dev", v1)
    commit_elsewhere(repo_path, {"v/c/0/0": b"z" * 16}, "v2")
    s = ThreadedStore(IcechunkStore(reopen(repo_path)))
    try:
        assert ".icechunk" not in [e.name for e in await s.list_dir("")]
        assert s.hides(".icechunk") and (await s.entry(".icechunk")).is_dir
        assert [e.name for e in await s.list_dir(".icechunk")] == ["branches", "snapshots", "tags"]
        assert [e.name for e in await s.list_dir(".icechunk/branches")] == ["dev", "main"]
        assert [e.name for e in await s.list_dir(".icechunk/tags")] == ["v1"]
        ancestry = [h.id for h in reopen(repo_path).ancestry(branch="main")]
        assert [e.name for e in await s.list_dir(".icechunk/snapshots")] == sorted(ancestry)
        assert await s.get(".icechunk/tags/v1/v/c/0/0") == b"a" * 16
        assert await s.get(f".icechunk/snapshots/{ancestry[0]}/v/c/0/0") == b"z" * 16
        assert await s.get(".icechunk/branches/dev/v/c/0/0") == b"a" * 16
        assert (await s.stat(".icechunk/tags/v1/v/c/0/0")).etag == v1  # cached by snapshot
        assert [(e.name, e.info.key) for e in await s.list_dir(".icechunk/tags/v1/v/c/0")] == [("0", ".icechunk/tags/v1/v/c/0/0")]
        assert await s.entry(".icechunk/tags/nope") is None and await s.entry(".icechunk/nope") is None
        assert (await s.entry(".icechunk/tags/v1/v/c")).is_dir and await s.entry(".icechunk/tags/v1/v/c/9") is None
        assert (await s.entry("v/c/1")).is_dir and await s.entry("v/c/9") is None
        with pytest.raises(KeyNotFound):
            await s.get(".icechunk/tags/nope/zarr.json")
        with pytest.raises(ReadOnly):
            await s.set(".icechunk/branches/dev/v/c/0/0", b"x")
    finally:
        await s.close()


async def test_a_tag_or_snapshot_mounts_read_only(repo_path):
    repo = reopen(repo_path)
    snap = repo.lookup_branch("main")
    repo.create_tag("v1", snap)
    for kw in ({"tag": "v1"}, {"snapshot": snap}):
        store = IcechunkStore(reopen(repo_path), **kw)
        try:
            assert store.capabilities.read_only and store.get("v/c/0/0") == b"a" * 16
            with pytest.raises(ReadOnly):
                store.set("v/c/0/0", b"x")
        finally:
            store.close()
    with pytest.raises(Exception) as info:
        IcechunkStore(reopen(repo_path), tag="nope")
    assert "tag 'nope'" in str(info.value)


async def test_the_cache_finds_the_hidden_history_after_listing_the_root(repo_path):
    """Before: the cache answered the lookup of .icechunk from the root's listing (missing)."""
    from nczfs.cache import CachingStore

    s = CachingStore(ThreadedStore(IcechunkStore(reopen(repo_path))), ttl=60.0)
    try:
        assert ".icechunk" not in [e.name for e in await s.list_dir("")]
        assert (await s.entry(".icechunk")).is_dir
        assert await s.entry("nope") is None  # the listing still answers for names it does not hide
    finally:
        await s.close()


# ---------------------------------------------------------------------- S3 storage (SeaweedFS)


def s3_options(server, url: str, **kw):
    from nczfs.config.source import parse_source
    from nczfs.store.icechunk.options import IcechunkOptions

    return IcechunkOptions(url, parse_source(url).location, endpoint_url=server.endpoint, **kw)


def s3_repo(server, prefix: str):
    """A new repository on SeaweedFS, made with the mount's own S3 options and credentials."""
    from nczfs.store.icechunk.repository import storage_for

    options = s3_options(server, f"icechunk+s3://{server.shared_bucket}/{prefix}")
    icechunk.Repository.create(storage_for(options))
    return options


class TestIcechunkS3Store(TestIcechunkStore):
    @pytest.fixture
    def sync_store(self, s3_server) -> IcechunkStore:
        from nczfs.store.icechunk.repository import open_icechunk

        self.options = s3_repo(s3_server, s3_server.new_prefix("ice"))
        store = open_icechunk(self.options)
        yield store
        store.close()

    def _repo(self):
        from nczfs.store.icechunk.repository import open_repository

        return open_repository(self.options)

    def read_only_store(self) -> IcechunkStore:
        return IcechunkStore(self._repo(), read_only=True)

    def put_raw(self, key: str, data: bytes) -> None:
        session = self._repo().writable_session("main")
        zarr.core.sync.sync(session.store.set(key, zarr.core.buffer.default_buffer_prototype().buffer.from_bytes(data)))
        session.commit("backdoor")

    def get_raw(self, key: str) -> bytes | None:
        store = self._repo().readonly_session(branch="main").store
        try:
            buf = zarr.core.sync.sync(store.get(key, zarr.core.buffer.default_buffer_prototype()))
        except Exception:  # noqa: BLE001 - not a key Icechunk can hold
            return None
        return None if buf is None else buf.to_bytes()

    async def test_medium_writes_reach_the_store(self, store):
        self.put_raw("zarr.json", GROUP)
        self.put_raw("bd/zarr.json", array_meta())
        self.put_raw("bd/c/0", b"backdoor")
        await store.sync()
        assert await store.get("bd/c/0") == b"backdoor"
        assert [(e.name, e.is_dir) for e in await store.list_dir("bd")] == [("c", True), ("zarr.json", False)]


def test_seaweedfs_honours_the_conditional_writes_icechunk_commits_with(s3_server):
    """Icechunk moves a branch with a conditional PUT (If-Match / If-None-Match): SeaweedFS refuses
    a stale one with 412, so that of two racing commits one is rebased, not lost."""
    import botocore.exceptions

    client, bucket, key = s3_server.client(), s3_server.shared_bucket, s3_server.new_prefix("cond") + "/ref"
    first = client.put_object(Bucket=bucket, Key=key, Body=b"1")["ETag"]
    for kw in ({"IfNoneMatch": "*"}, {"IfMatch": '"0123456789abcdef0123456789abcdef"'}):
        with pytest.raises(botocore.exceptions.ClientError) as info:
            client.put_object(Bucket=bucket, Key=key, Body=b"2", **kw)
        assert info.value.response["Error"]["Code"] == "PreconditionFailed"
    client.put_object(Bucket=bucket, Key=key, Body=b"3", IfMatch=first)


def test_racing_commits_on_seaweedfs_are_both_kept(s3_server):
    import threading

    from nczfs.store.icechunk.repository import open_icechunk, open_repository

    options = s3_repo(s3_server, s3_server.new_prefix("race"))
    setup = open_icechunk(options)
    setup.set("zarr.json", GROUP)
    setup.set("v/zarr.json", array_meta((8,), (1,)))
    setup.sync()
    setup.close()
    stores = [open_icechunk(options) for _ in range(4)]
    for i, store in enumerate(stores):
        store.set(f"v/c/{i}", bytes([i]) * 4)
    barrier = threading.Barrier(len(stores))
    errors = []

    def commit(store):
        barrier.wait()
        try:
            store.sync()
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=commit, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    assert errors == []
    repo = open_repository(options)
    assert len(list(repo.ancestry(branch="main"))) == 2 + 4  # the initial commit, the setup, four
    tip = IcechunkStore(repo, read_only=True)
    try:
        assert [tip.get(f"v/c/{i}") for i in range(4)] == [bytes([i]) * 4 for i in range(4)]
    finally:
        tip.close()


# ---------------------------------------------------------------------- virtual chunks


def netcdf_with_contiguous_data(path, values) -> tuple[int, int]:
    """A netCDF-4 (HDF5) file holding ``values`` contiguous and uncompressed: its data's offset and length."""
    import h5py
    import netCDF4

    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", len(values))
        v = nc.createVariable("t", "<f4", ("x",), contiguous=True)
        v[:] = values
    with h5py.File(path, "r") as f:
        return f["t"].id.get_offset(), f["t"].id.get_storage_size()


def virtual_repo(path, url: str, offset: int, length: int, n: int) -> None:
    repo = local_repo(path)
    session = repo.writable_session("main")
    store = session.store
    proto = zarr.core.buffer.default_buffer_prototype().buffer
    zarr.core.sync.sync(store.set("zarr.json", proto.from_bytes(GROUP)))
    zarr.core.sync.sync(store.set("t/zarr.json", proto.from_bytes(array_meta((n,), (n,), "float32"))))
    store.set_virtual_ref("t/c/0", url, offset=offset, length=length, validate_container=False)
    session.commit("virtual")


def virtual_options(repo_path, *containers: str, **kw):
    from nczfs.store.icechunk.options import IcechunkOptions

    return IcechunkOptions(f"icechunk://{repo_path}", str(repo_path), virtual_chunk_containers=containers, **kw)


def test_a_virtual_chunk_in_a_local_netcdf_file_is_read_once_its_container_is_configured(tmp_path):
    from nczfs.store.icechunk.repository import open_icechunk

    values = np.arange(10, dtype="<f4") * 1.5
    nc = tmp_path / "archive" / "data.nc"
    nc.parent.mkdir()
    offset, length = netcdf_with_contiguous_data(nc, values)
    virtual_repo(tmp_path / "repo", f"file://{nc}", offset, length, len(values))
    bare = open_icechunk(virtual_options(tmp_path / "repo"))
    try:
        with pytest.raises(BackendError) as info:
            bare.get("t/c/0")
        assert "t/c/0" in str(info.value) and "-o virtual_chunk_container=" in str(info.value)
    finally:
        bare.close()
    store = open_icechunk(virtual_options(tmp_path / "repo", f"file://{nc.parent}/"))
    try:
        assert store.get("t/c/0") == values.tobytes()
        assert store.stat("t/c/0").size == length
    finally:
        store.close()


def test_a_virtual_chunk_in_an_object_on_seaweedfs_is_read_with_the_mounts_credentials(s3_server, tmp_path):
    from nczfs.store.icechunk.repository import open_icechunk

    values = np.arange(7, dtype="<f4") - 3
    nc = tmp_path / "data.nc"
    offset, length = netcdf_with_contiguous_data(nc, values)
    bucket, key = s3_server.shared_bucket, s3_server.new_prefix("vc") + "/data.nc"
    s3_server.client().put_object(Bucket=bucket, Key=key, Body=nc.read_bytes())
    virtual_repo(tmp_path / "repo", f"s3://{bucket}/{key}", offset, length, len(values))
    store = open_icechunk(virtual_options(tmp_path / "repo", f"s3://{bucket}/={s3_server.endpoint}", region="us-east-1"))
    try:
        assert store.get("t/c/0") == values.tobytes()
    finally:
        store.close()


# ---------------------------------------------------------------------- SOURCE and -o options


@pytest.mark.parametrize("text,location", [
    ("icechunk:///data/repo", "/data/repo"),
    ("icechunk:///data/repo/", "/data/repo"),
    ("icechunk://rel/repo", "/cwd/rel/repo"),
    ("icechunk+s3://bucket/some/prefix", "s3://bucket/some/prefix"),
    ("icechunk+s3://bucket", "s3://bucket"),
])
def test_icechunk_sources(text, location):
    from nczfs.config.source import parse_source

    src = parse_source(text, cwd="/cwd")
    assert (src.backend, src.location) == ("icechunk", location)


@pytest.mark.parametrize("text,message", [
    ("icechunk+gs://bucket/p", "unsupported URL scheme 'icechunk+gs'"),
    ("icechunk+s3:///p", "no bucket"),
])
def test_bad_icechunk_sources(text, message):
    from nczfs.toolbox.errors import SourceError
    from nczfs.config.source import parse_source

    with pytest.raises(SourceError) as info:
        parse_source(text)
    assert message in str(info.value)


def mount_config(*argv: str, mountpoint: str = "/"):
    from nczfs.cli.mountargs import build_config
    from nczfs.cli.parser import build_parser

    return build_config(build_parser().parse_args(["mount", argv[0], mountpoint, *argv[1:]]))


def test_icechunk_options(tmp_path):
    from nczfs.cli.usage import UsageError

    c = mount_config("icechunk:///r", "-o", "branch=dev,commit_message=hello",
                     "-o", "virtual_chunk_container=s3://b/=http://127.0.0.1:1,virtual_chunk_container=file:///d/",
                     mountpoint=str(tmp_path))
    options = c.backend_options
    assert (options["branch"], options["commit_message"], c.read_only) == ("dev", "hello", False)
    assert options["virtual_chunk_containers"] == ("s3://b/=http://127.0.0.1:1", "file:///d/")
    assert c.effective_metadata_ttl(IcechunkStore.capabilities) == 1.0  # a writable branch: others commit to it
    for opt in ("tag=v1", "snapshot=ABC"):  # a tag or a snapshot never changes: read-only
        c = mount_config("icechunk:///r", "-o", opt, mountpoint=str(tmp_path))
        assert c.read_only and c.effective_metadata_ttl(IcechunkStore.capabilities) == 60.0
    with pytest.raises(UsageError) as info:
        mount_config("icechunk:///r", "-o", "branch=a,tag=b", mountpoint=str(tmp_path))
    assert "choose one of branch=, tag= and snapshot=" in str(info.value)
    for opt in ("branch=main", "virtual_chunk_container=file:///d/"):
        with pytest.raises(UsageError) as info:
            mount_config("s3://bucket/p", "-o", opt, mountpoint=str(tmp_path))
        assert "an option of Icechunk sources" in str(info.value)


def test_a_missing_repository_or_branch_is_a_clear_error(tmp_path):
    from nczfs.toolbox.errors import SourceError
    from nczfs.store.registry import open_store

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with pytest.raises(SourceError) as info:
        open_store(mount_config(f"icechunk://{tmp_path}/nothing", mountpoint=str(mnt)))
    assert "cannot open the Icechunk repository" in str(info.value)
    local_repo(tmp_path / "repo")
    with pytest.raises(SourceError) as info:
        open_store(mount_config(f"icechunk://{tmp_path}/repo", "-o", "branch=nope", mountpoint=str(mnt)))
    assert "cannot open branch 'nope'" in str(info.value)


def test_the_mounts_profile_gives_the_credentials_on_s3(s3_server):
    """-o profile= (here SeaweedFS's read-only identity) is used for the repository's storage."""
    from nczfs.store.icechunk.repository import open_icechunk

    options = s3_repo(s3_server, s3_server.new_prefix("prof"))
    writer = open_icechunk(options)
    writer.set("zarr.json", GROUP)
    writer.sync()
    writer.close()
    reader = open_icechunk(s3_options(s3_server, options.source, profile="reader"))
    try:
        assert reader.get("zarr.json") == GROUP
        reader.set("v/zarr.json", array_meta())
        with pytest.raises(BackendError) as info:
            reader.sync()
        assert "not committed" in str(info.value)
    finally:
        reader.close()


def test_a_read_only_mount_on_s3_reads_through_the_lighter_client(s3_server):
    """A read-only mount (and a tag's) reads through the object_store crate's S3 client (half the
    AWS SDK client's CPU a GET), with the mount's credentials; a branch mount, which commits,
    keeps Icechunk's default client. Before: every mount used the AWS SDK client."""
    from nczfs.store.icechunk.repository import open_icechunk, storage_for

    options = s3_repo(s3_server, s3_server.new_prefix("light"))
    writer = open_icechunk(options)
    writer.set("zarr.json", GROUP)
    writer.set("v/zarr.json", array_meta())
    writer.set("v/c/1", b"chunk")
    writer.sync()
    writer.repo.create_tag("t1", writer.tree.etag)
    writer.close()
    assert repr(storage_for(options)).startswith("S3Storage(")
    for kw in ({"read_only": True}, {"tag": "t1"}, {"read_only": True, "profile": "reader"}):
        ro = s3_options(s3_server, options.source, **kw)
        assert repr(storage_for(ro)).startswith("ObjectStorage(")
        reader = open_icechunk(ro)
        try:
            assert reader.get("v/c/1") == b"chunk" and reader.get("zarr.json") == GROUP
            assert [(e.name, e.info.size) for e in reader.list_dir("v/c")] == [("1", 5)]
        finally:
            reader.close()
