"""xarray ``to_zarr``/``open_zarr`` (Zarr v2 and v3, consolidated metadata) through the mount."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

from tests.mount.clientutil import assert_no_temporaries, backend_json, backend_snapshot_store

pytestmark = [
    pytest.mark.fuse,
    pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning"),
    pytest.mark.filterwarnings("ignore:.*vlen-utf8.*:UserWarning"),
    pytest.mark.filterwarnings("ignore:.*Consolidated metadata.*:UserWarning"),
]

NAME = "x.zarr"


def _dataset(t0: int, nt: int) -> xr.Dataset:
    time = pd.date_range("2020-01-01", periods=t0 + nt, freq="D")[t0:]
    y = np.array([10.0, 20.0, 30.0])
    x = np.arange(5, dtype="int32")
    temp = (np.arange(t0 * 15, (t0 + nt) * 15, dtype="float32").reshape(nt, 3, 5) / 4).astype("float32")
    temp[0, 0, 0] = np.nan
    count = (np.arange(nt * 3, dtype="int16").reshape(nt, 3) + 100 * t0).astype("int16")
    ds = xr.Dataset(
        {
            "temp": (("time", "y", "x"), temp, {"units": "degC", "long_name": "temperature"}),
            "count": (("time", "y"), count, {"note": "int16"}),
            "mask": (("y", "x"), (np.arange(15).reshape(3, 5) % 3 == 0)),
        },
        coords={
            "time": time,
            "y": ("y", y, {"units": "m"}),
            "x": x,
            "label": ("y", np.array(["low", "mid", "high"], dtype="<U4")),
        },
        attrs={"title": "xarray through nczfs", "version": 3, "scales": [1.5, 2.5]},
    )
    return ds


def _encoding() -> dict:
    return {"temp": {"chunks": (2, 2, 4)}, "count": {"chunks": (1, 3)}}


def _open_everywhere(mount, fmt: int):
    """(label, Dataset) from the mount and from the backend's own bytes."""
    out = [("mount", xr.open_zarr(mount.path / NAME, consolidated=True, zarr_format=fmt))]
    out.append(("snapshot", xr.open_zarr(backend_snapshot_store(mount.backend, NAME), consolidated=True, zarr_format=fmt)))
    if mount.backend.name == "directory":
        out.append(("backend", xr.open_zarr(mount.backend.root / NAME, consolidated=True, zarr_format=fmt)))
    return out


def _consolidated(backend, fmt: int) -> dict:
    """The consolidated metadata document (per key) stored in the backend."""
    if fmt == 2:
        doc = backend_json(backend, f"{NAME}/.zmetadata")
        assert doc["zarr_consolidated_format"] == 1
        return doc["metadata"]
    doc = backend_json(backend, f"{NAME}/zarr.json")
    cm = doc["consolidated_metadata"]
    assert cm["kind"] == "inline"
    return cm["metadata"]


@pytest.mark.parametrize("fmt", [2, 3])
def test_xarray_to_zarr_open_zarr_and_append(mount, fmt):
    backend = mount.backend
    ds = _dataset(0, 4)
    ds.to_zarr(mount.path / NAME, mode="w", zarr_format=fmt, consolidated=True, encoding=_encoding())

    for label, opened in _open_everywhere(mount, fmt):
        with opened:
            xr.testing.assert_identical(opened.load(), ds)
            assert opened["temp"].encoding["chunks"] == (2, 2, 4), label
            assert opened["count"].encoding["chunks"] == (1, 3), label

    keys = set(backend.keys(NAME))
    meta = _consolidated(backend, fmt)
    if fmt == 2:
        assert {f"{NAME}/.zgroup", f"{NAME}/.zattrs", f"{NAME}/.zmetadata", f"{NAME}/temp/.zarray"} <= keys
        assert meta["temp/.zarray"]["chunks"] == [2, 2, 4] and meta["temp/.zarray"]["shape"] == [4, 3, 5]
        assert meta["temp/.zattrs"]["_ARRAY_DIMENSIONS"] == ["time", "y", "x"]
        assert meta[".zattrs"]["title"] == "xarray through nczfs"
        temp_chunks = {k.rsplit("/", 1)[1] for k in keys if k.startswith(f"{NAME}/temp/") and not k.endswith((".zarray", ".zattrs"))}
        assert temp_chunks == {f"{t}.{y}.{x}" for t in range(2) for y in range(2) for x in range(2)}
    else:
        assert {f"{NAME}/zarr.json", f"{NAME}/temp/zarr.json"} <= keys
        assert not any(k.endswith((".zmetadata", ".zarray", ".zgroup")) for k in keys)
        temp = meta["temp"]
        assert temp["shape"] == [4, 3, 5] and temp["chunk_grid"]["configuration"]["chunk_shape"] == [2, 2, 4]
        assert temp["dimension_names"] == ["time", "y", "x"]
        assert backend_json(backend, f"{NAME}/zarr.json")["attributes"]["title"] == "xarray through nczfs"
        temp_chunks = {k[len(f"{NAME}/temp/") :] for k in keys if k.startswith(f"{NAME}/temp/c/")}
        assert temp_chunks == {f"c/{t}/{y}/{x}" for t in range(2) for y in range(2) for x in range(2)}
    assert_no_temporaries(backend)

    # append three more days along time: shapes grow, consolidated metadata is rewritten
    more = _dataset(4, 3).drop_vars(["mask", "label", "x", "y"])
    more.to_zarr(mount.path / NAME, mode="a", append_dim="time", zarr_format=fmt, consolidated=True)
    full = xr.concat([ds, _dataset(4, 3)], dim="time", data_vars="minimal", coords="minimal")
    assert full.sizes["time"] == 7
    for label, opened in _open_everywhere(mount, fmt):
        with opened:
            assert opened.sizes["time"] == 7, label
            xr.testing.assert_identical(opened.load(), full)

    meta = _consolidated(backend, fmt)
    shape = meta["temp/.zarray"]["shape"] if fmt == 2 else meta["temp"]["shape"]
    assert shape == [7, 3, 5]
    # also what zarr itself (no xarray) reads from the backend bytes
    g = zarr.open_group(backend_snapshot_store(backend, NAME), mode="r", zarr_format=fmt)
    np.testing.assert_array_equal(g["count"][...], full["count"].values)
    assert_no_temporaries(backend)


@pytest.mark.parametrize("fmt", [2, 3])
def test_xarray_region_write_and_new_variable(mount, fmt):
    """``mode="r+"`` with ``region=`` rewrites existing chunks in place; ``mode="a"`` adds a variable."""
    backend = mount.backend
    ds = _dataset(0, 4)
    ds.to_zarr(mount.path / NAME, mode="w", zarr_format=fmt, consolidated=True, encoding=_encoding())

    patch = ds[["temp"]].isel(time=slice(1, 3)).drop_vars(["label", "y", "x", "time"]) * 0 - 1
    patch.to_zarr(mount.path / NAME, mode="r+", region={"time": slice(1, 3)}, zarr_format=fmt)
    # mode="a" replaces the group attributes with the new dataset's (xarray behaviour on disk too)
    added = xr.Dataset({"extra": (("y",), np.array([7, 8, 9], dtype="int64"), {"added": "later"})}, attrs=ds.attrs)
    added.to_zarr(mount.path / NAME, mode="a", zarr_format=fmt, consolidated=True)

    want = ds.copy(deep=True)
    want["temp"][1:3] = -1
    want["extra"] = added["extra"]
    for label, opened in _open_everywhere(mount, fmt):
        with opened:
            xr.testing.assert_identical(opened.load(), want)
    meta = _consolidated(backend, fmt)
    assert ("extra/.zattrs" in meta) if fmt == 2 else ("extra" in meta)
    assert_no_temporaries(backend)
