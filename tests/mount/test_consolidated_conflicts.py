"""Consolidated metadata under concurrent writers of one store: two real mounts (each writing
arrays with zarr-python from several threads) and a third client (keeping ``.zmetadata`` with its
own conditional read-modify-write, as a cooperating tool would) add arrays to one consolidated
Zarr v2 group at the same time; at the end the stored ``.zmetadata`` lists every array there is
(docs/SEMANTICS.md, "Concurrent writers"). One body, each backend's third writer: boto3 on S3
(``If-Match``), the emulators' own clients on GCS (generation) and Azure (``If-Match``), nczfs's
own DirectoryStore on a directory (the backing file's version compared before its rename), a
program rewriting a zip archive only while it is the one it read (a zip takes one read/write
mount: a second is refused, so there the mount is one; its ``.zmetadata`` is staged until its
commit, and found rewritten by the other program then, the two are merged: ``zip.merged``, which
the last test shows step by step, as the concurrent run need not commit while both changed it)."""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Callable

import pytest

from tests.helpers import DirectoryBackend, S3Backend, ZipBackend, counts, is_mounted, mounted, run_nczfs

pytestmark = pytest.mark.fuse

zarr = pytest.importorskip("zarr")

#: (threads per mount, arrays per thread), by backend; (2, 3) elsewhere (the emulators are slower)
SIZES = {"s3": (3, 4), "directory": (3, 4), "zip": (3, 4)}

GROUP = "g.zarr"
ZMETADATA = f"{GROUP}/.zmetadata"


@pytest.fixture(params=["s3", "gcs", "azure", "directory", "zip"])
def shared(request, tmp_path):
    """A store two mounts share, by backend (a zip: one mount, the only read/write one it takes)."""
    return backend_named(request, tmp_path)


def backend_named(request, tmp_path):
    """An empty store of the backend ``request.param`` names, for mounts to share."""
    if request.param == "zip":
        return ZipBackend(tmp_path / "backing.zip")
    if request.param == "s3":
        server = request.getfixturevalue("s3_server")
        return S3Backend(server, server.shared_bucket, server.new_prefix("cz"))
    if request.param == "directory":
        (tmp_path / "backing").mkdir()
        return DirectoryBackend(tmp_path / "backing")
    return request.getfixturevalue(request.param)


def _zarray(n: int) -> dict:
    return {"zarr_format": 2, "shape": [n], "chunks": [n], "dtype": "<i2", "compressor": None,
            "fill_value": 0, "order": "C", "filters": None, "dimension_separator": "."}


def put_array(backend, name: str, n: int) -> dict:
    """Another client's array ``name`` of ``n`` elements in the group (its .zarray and .zattrs,
    stored); the entries its writer merges into ``.zmetadata``."""
    entries = {f"{name}/.zarray": _zarray(n), f"{name}/.zattrs": {"_ARRAY_DIMENSIONS": ["x"]}}
    for rel, value in entries.items():
        backend.put(f"{GROUP}/{rel}", json.dumps(value).encode())
    return entries


# -- each backend's third writer: (bytes, version) read, and a write only while still that version

def _s3_client(backend: S3Backend) -> tuple[Callable, Callable]:
    import botocore.exceptions

    client, key = backend.server.client(), f"{backend.prefix}/{ZMETADATA}"

    def read() -> tuple[bytes, str]:
        got = client.get_object(Bucket=backend.bucket, Key=key)
        return got["Body"].read(), got["ETag"]

    def write_if(data: bytes, version: str) -> bool:
        try:
            client.put_object(Bucket=backend.bucket, Key=key, Body=data, IfMatch=version)
        except botocore.exceptions.ClientError as exc:
            if exc.response["Error"]["Code"] not in ("PreconditionFailed", "ConditionalRequestConflict", "412"):
                raise
            return False
        return True

    return read, write_if


def _cloud_client(backend) -> tuple[Callable, Callable]:
    """The emulator's own API: GCS's generation (from the same answer), Azure's ETag."""
    from urllib.parse import quote

    full = f"{backend.prefix}/{ZMETADATA}"

    def read() -> tuple[bytes, str]:
        if backend.scheme == "gs":
            status, headers, body = backend.server.upstream(
                "GET", f"/storage/v1/b/{backend.bucket}/o/{quote(full, safe='')}?alt=media")
            assert status == 200, status
            return body, headers["x-goog-generation"]
        got = backend.server.service().get_blob_client(backend.bucket, full).download_blob()
        return got.readall(), got.properties.etag

    def write_if(data: bytes, version: str) -> bool:
        if backend.scheme == "gs":
            status, answer = backend.server.put_if(backend.bucket, full, data, version)
            assert status in (200, 412), (status, answer)
            return status == 200
        from azure.core import MatchConditions
        from azure.core.exceptions import ResourceModifiedError

        try:
            backend.server.service().get_blob_client(backend.bucket, full).upload_blob(
                data, overwrite=True, etag=version, match_condition=MatchConditions.IfNotModified)
        except ResourceModifiedError:
            return False
        return True

    return read, write_if


def _directory_client(backend: DirectoryBackend) -> tuple[Callable, Callable]:
    """Another program using nczfs's DirectoryStore: the file's version (inode, mtime, size)
    compared right before its temp file is renamed over it."""
    from nczfs.toolbox.errors import Conflict, Stale
    from nczfs.store.directory.store import DirectoryStore

    store = DirectoryStore(str(backend.root))

    def read() -> tuple[bytes, str]:
        while True:
            version = store.stat(ZMETADATA).etag
            try:
                return store.get_version(ZMETADATA, None, version), version
            except Stale:
                continue

    def write_if(data: bytes, version: str) -> bool:
        try:
            store.set(ZMETADATA, data, if_version=version)
        except Conflict:
            return False
        return True

    return read, write_if


def _zip_client(backend: ZipBackend) -> tuple[Callable, Callable]:
    """Another program rewriting the archive (a new one renamed over it) only while it is still
    the archive it read: the new one is made from the archive as read, and its inode, size and
    mtime are compared right before the rename."""
    import os
    import zipfile

    from tests.ziputil import dataset_prefix

    name = dataset_prefix(backend.archive, backend.layout) + ZMETADATA

    def ident(st: os.stat_result) -> tuple[int, int, int]:
        return st.st_ino, st.st_size, st.st_mtime_ns

    def read() -> tuple[bytes, tuple]:
        with open(backend.archive, "rb") as f, zipfile.ZipFile(f) as zf:
            return zf.read(name), ident(os.fstat(f.fileno()))

    def write_if(data: bytes, version: tuple) -> bool:
        tmp = backend.archive.with_name(backend.archive.name + ".other")
        with open(backend.archive, "rb") as f, zipfile.ZipFile(f) as zf, zipfile.ZipFile(tmp, "w") as out:
            if ident(os.fstat(f.fileno())) != version:
                return False
            for info in zf.infolist():
                out.writestr(info, data if info.filename == name else zf.read(info))
        if ident(os.stat(backend.archive)) != version:
            return False
        os.replace(tmp, backend.archive)
        return True

    return read, write_if


def _client_writer(backend, names: list[str], errors: list[BaseException]) -> None:
    """The third client: each array's objects, then its entries merged into ``.zmetadata`` with a
    conditional write on the version read (again when refused), the protocol every writer of
    the copy must follow."""
    try:
        read, write_if = {"s3": _s3_client, "directory": _directory_client, "zip": _zip_client}.get(backend.name, _cloud_client)(backend)
        for i, name in enumerate(names):
            entries = put_array(backend, name, i + 1)
            while True:
                data, version = read()
                meta = json.loads(data)
                meta["metadata"].update(entries)
                if write_if(json.dumps(meta).encode(), version):
                    break
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)


def _zarr_writer(root, names: list[str], errors: list[BaseException]) -> None:
    """zarr-python through a mount: each array created in the group (its .zarray and .zattrs)."""
    try:
        g = zarr.open_group(str(root / GROUP), mode="r+", zarr_format=2, use_consolidated=False)
        for i, name in enumerate(names):
            g.create_array(name, shape=(i + 1,), chunks=(i + 1,), dtype="i2", attributes={"_ARRAY_DIMENSIONS": ["x"]})
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)


def _consolidated_arrays(backend) -> tuple[set[str], set[str]]:
    """The arrays zarr finds in the stored group's consolidated metadata, and those stored."""
    objects = {k[len(GROUP) + 1:]: backend.read(k) for k in backend.keys() if k.startswith(GROUP + "/")}
    store = zarr.storage.MemoryStore({k: zarr.core.buffer.cpu.Buffer.from_bytes(v) for k, v in objects.items()})
    g = zarr.open_consolidated(store, zarr_format=2)
    stored = {k.rpartition("/")[0] for k in objects if k.endswith("/.zarray")}
    return set(g.array_keys()), stored


def _at_once(writers: list[threading.Thread], mounts) -> tuple[list[int], list[int]]:
    """Run the writers at once; each mount's ``consolidated.merged-again`` and ``.lost`` counts."""
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    return ([counts(m.path)["consolidated.merged-again"] for m in mounts],
            [counts(m.path)["consolidated.lost"] for m in mounts])


def _mount_names(backend, tmp_path) -> list[str]:
    """Two mounts; of a zip one, as a second read/write mount of one archive is refused."""
    if backend.name != "zip":
        return ["a", "b"]
    with mounted(backend, tmp_path / "a"):
        refused = run_nczfs("mount", backend.source, str(tmp_path / "second"))
        assert refused.returncode != 0 and not is_mounted(tmp_path / "second"), refused
    return ["a"]


def test_two_mounts_and_another_client_adding_arrays_to_one_consolidated_group_lose_no_entry(shared, tmp_path):
    """Two mounts (zarr-python in several threads each) and a third client (its own conditional
    read-modify-write) add arrays to one consolidated Zarr v2 group at once: the stored
    ``.zmetadata`` lists every array at the end, each entry as stored (each mount's rewrite of
    it is conditional, re-read and merged when refused)."""
    shared.put(f"{GROUP}/.zgroup", b'{"zarr_format": 2}')
    shared.put(ZMETADATA, json.dumps({"metadata": {".zgroup": {"zarr_format": 2}},
                                      "zarr_consolidated_format": 1}).encode())
    threads, arrays = SIZES.get(shared.name, (2, 3))
    errors: list[BaseException] = []
    # a long TTL: each mount's cached copy of .zmetadata is the one it wrote last
    with contextlib.ExitStack() as stack:
        mounts = [stack.enter_context(mounted(shared, tmp_path / n, "-o", "metadata_ttl=60")) for n in _mount_names(shared, tmp_path)]
        writers = [threading.Thread(target=_client_writer, args=(shared, [f"c{i}" for i in range(threads * arrays)], errors))]
        writers += [threading.Thread(target=_zarr_writer, args=(m.path, [f"{m.path.name}{t}_{i}" for i in range(arrays)], errors))
                    for m in mounts for t in range(threads)]
        merged, lost = _at_once(writers, mounts)
    assert not errors, errors
    for m in mounts:
        assert "Traceback" not in m.log_text() and "is missing" not in m.log_text(), m.log_text()
    stored = {k[len(GROUP) + 1:].rpartition("/")[0] for k in shared.keys(GROUP) if k.endswith("/.zarray")}
    assert len(stored) == (1 + len(mounts)) * threads * arrays
    meta = json.loads(shared.read(ZMETADATA))["metadata"]
    missing = sorted(f"{n}/{o}" for n in stored for o in (".zarray", ".zattrs") if f"{n}/{o}" not in meta)
    assert not missing, f"missing from .zmetadata: {missing}"
    for name in stored:
        for obj in (".zarray", ".zattrs"):
            assert meta[f"{name}/{obj}"] == json.loads(shared.read(f"{GROUP}/{name}/{obj}")), (name, obj)
    assert _consolidated_arrays(shared) == (stored, stored)  # as zarr reads it
    assert lost == [0] * len(mounts)
    print(f"{shared.name}: rewrites of .zmetadata merged again after another writer's: {merged}")


def test_a_zip_mounts_staged_zmetadata_is_merged_with_another_programs_rewrite_at_sync(tmp_path):
    """One step at a time on a zip: the mount writes an array (its ``.zmetadata`` staged), another
    program rewrites the archive's ``.zmetadata`` with its own array's entries (only while the
    archive is the one it read), then ``nczfs sync`` commits: the copy both changed is merged
    (``zip.merged``), and the stored copy lists both arrays."""
    backend = ZipBackend(tmp_path / "backing.zip")
    backend.put(f"{GROUP}/.zgroup", b'{"zarr_format": 2}')
    backend.put(ZMETADATA, json.dumps({"metadata": {".zgroup": {"zarr_format": 2}},
                                       "zarr_consolidated_format": 1}).encode())
    errors: list[BaseException] = []
    with mounted(backend, tmp_path / "m", "-o", "metadata_ttl=60") as m:
        _zarr_writer(m.path, ["mine"], errors)
        _client_writer(backend, ["theirs"], errors)
        assert not errors, errors
        assert run_nczfs("sync", str(m.path)).returncode == 0
        assert counts(m.path).get("zip.merged", 0) >= 1, counts(m.path)
    assert "Traceback" not in m.log_text(), m.log_text()
    meta = json.loads(backend.read(ZMETADATA))["metadata"]
    for name in ("mine", "theirs"):
        for obj in (".zarray", ".zattrs"):
            assert meta[f"{name}/{obj}"] == json.loads(backend.read(f"{GROUP}/{name}/{obj}")), (name, obj)
    assert _consolidated_arrays(backend) == ({"mine", "theirs"},) * 2
