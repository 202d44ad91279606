"""Helpers shared by the real-client tests (zarr-python, xarray, netCDF4, ncdump) on a mount.

The point of those tests is that what a client writes *through the mount* is what lands
in the backend, so every test also reads the backend without going through nczfs.
"""

from __future__ import annotations

import json
from typing import Any

import zarr
from zarr.core.buffer import default_buffer_prototype

#: names of temporaries that must never survive in the backend
TEMP_MARKS = (".partial", ".nczfs-tmp-")


def backend_json(backend, key: str) -> Any:
    return json.loads(backend.read(key))


def assert_no_temporaries(backend) -> None:
    left = [k for k in backend.keys() if any(m in k for m in TEMP_MARKS)]
    assert left == [], f"temporary files left in the backend: {left}"


def backend_snapshot_store(backend, prefix: str) -> zarr.storage.MemoryStore:
    """A read-only zarr store holding a copy of every backend key under ``prefix``.

    Works for any backend (it only uses ``keys``/``read``), so zarr can check the
    bytes without nczfs in the way.
    """
    proto = default_buffer_prototype()
    start = prefix.rstrip("/") + "/"
    data = {k[len(start) :]: proto.buffer.from_bytes(backend.read(k)) for k in backend.keys(prefix) if k.startswith(start)}
    assert data, f"nothing under {prefix!r} in the backend"
    return zarr.storage.MemoryStore(store_dict=data, read_only=True)


def backend_zarr_stores(backend, prefix: str) -> list[tuple[str, Any]]:
    """Stores that read ``prefix`` straight from the backend: a key snapshot always, and
    on a directory backend also zarr's own LocalStore on the backing directory."""
    stores: list[tuple[str, Any]] = [("snapshot", backend_snapshot_store(backend, prefix))]
    if backend.name == "directory":
        stores.append(("localstore", zarr.storage.LocalStore(backend.root / prefix, read_only=True)))
    return stores
