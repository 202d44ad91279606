"""Consolidated metadata under concurrent writers of one S3 prefix: two real mounts (each writing
arrays with zarr-python from several threads) and a third S3 client (boto3, keeping
``.zmetadata`` with its own conditional read-modify-write, as a cooperating tool would) add arrays
to one consolidated Zarr v2 group at the same time; at the end the stored ``.zmetadata`` lists
every array there is (docs/SEMANTICS.md, "Concurrent writers")."""

from __future__ import annotations

import json
import threading

import botocore.exceptions
import pytest

from tests.helpers import S3Backend, counts, mounted

pytestmark = pytest.mark.fuse

zarr = pytest.importorskip("zarr")

THREADS = 3  # per mount
ARRAYS = 4  # per thread
GROUP = "g.zarr"


@pytest.fixture
def s3(s3_server) -> S3Backend:
    return S3Backend(s3_server, s3_server.shared_bucket, s3_server.new_prefix("cz"))


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


def _boto3_writer(s3: S3Backend, names: list[str], errors: list[BaseException]) -> None:
    """Each array's objects, then its entries merged into ``.zmetadata`` with If-Match on the
    ETag read (again on 412): the protocol every writer of the copy must follow."""
    client = s3.server.client()
    zkey = f"{s3.prefix}/{GROUP}/.zmetadata"
    try:
        for i, name in enumerate(names):
            entries = put_array(s3, name, i + 1)
            while True:
                got = client.get_object(Bucket=s3.bucket, Key=zkey)
                meta = json.loads(got["Body"].read())
                meta["metadata"].update(entries)
                try:
                    client.put_object(Bucket=s3.bucket, Key=zkey, Body=json.dumps(meta).encode(), IfMatch=got["ETag"])
                    break
                except botocore.exceptions.ClientError as exc:
                    if exc.response["Error"]["Code"] not in ("PreconditionFailed", "ConditionalRequestConflict", "412"):
                        raise
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


def _consolidated_arrays(s3: S3Backend) -> tuple[set[str], set[str]]:
    """The arrays zarr finds in the stored group's consolidated metadata, and those stored."""
    objects = {k[len(GROUP) + 1:]: s3.read(k) for k in s3.keys() if k.startswith(GROUP + "/")}
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


def test_two_mounts_and_another_client_adding_arrays_to_one_group_lose_no_entry(s3, tmp_path):
    s3.put(f"{GROUP}/.zgroup", b'{"zarr_format": 2}')
    s3.put(f"{GROUP}/.zmetadata", json.dumps({"metadata": {".zgroup": {"zarr_format": 2}},
                                              "zarr_consolidated_format": 1}).encode())
    errors: list[BaseException] = []
    # a long TTL: each mount's cached copy of .zmetadata is the one it wrote last
    with mounted(s3, tmp_path / "a", "-o", "metadata_ttl=60") as a, mounted(s3, tmp_path / "b", "-o", "metadata_ttl=60") as b:
        writers = [threading.Thread(target=_boto3_writer, args=(s3, [f"c{i}" for i in range(THREADS * ARRAYS)], errors))]
        for m in (a, b):
            for t in range(THREADS):
                names = [f"{m.path.name}{t}_{i}" for i in range(ARRAYS)]
                writers.append(threading.Thread(target=_zarr_writer, args=(m.path, names, errors)))
        merged, lost = _at_once(writers, (a, b))
    assert not errors, errors
    for m in (a, b):
        assert "Traceback" not in m.log_text() and "is missing" not in m.log_text(), m.log_text()
    listed, stored = _consolidated_arrays(s3)
    assert len(stored) == 3 * THREADS * ARRAYS
    assert listed == stored, f"missing from .zmetadata: {sorted(stored - listed)}"
    meta = json.loads(s3.read(f"{GROUP}/.zmetadata"))["metadata"]
    for name in stored:
        for obj in (".zarray", ".zattrs"):
            assert meta[f"{name}/{obj}"] == json.loads(s3.read(f"{GROUP}/{name}/{obj}")), (name, obj)
    assert lost == [0, 0]
    print(f"rewrites of .zmetadata merged again after another writer's: {merged}")
