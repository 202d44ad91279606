"""Consolidated metadata stays consistent with metadata objects written through the mount,
so xarray's ``consolidated=True`` never reads stale metadata (Zarr v2 ``.zmetadata`` and Zarr v3
``consolidated_metadata`` in ``zarr.json``)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from tests.helpers import mounted

pytestmark = pytest.mark.fuse

zarr = pytest.importorskip("zarr")
xr = pytest.importorskip("xarray")


def dataset():
    return xr.Dataset({"t2m": (("time", "lat"), np.arange(12, dtype="f4").reshape(4, 3), {"units": "K"})},
                      coords={"lat": [10.0, 20.0, 30.0]}, attrs={"title": "x"})


def test_zarr_v2_writes_without_consolidating_keep_zmetadata_current(backend, tmp_path):
    with mounted(backend, tmp_path / "mnt") as m:
        store = m.path / "c.zarr"
        dataset().to_zarr(store, mode="w", zarr_format=2, consolidated=True)
        g = zarr.open_group(str(store), mode="r+", zarr_format=2, use_consolidated=False)
        g["t2m"].attrs["units"] = "degC"  # zarr-python does not touch .zmetadata here
        extra = g.create_array("extra", shape=(4,), chunks=(4,), dtype="i2")
        extra.attrs["_ARRAY_DIMENSIONS"] = ["time"]
        extra[:] = [1, 2, 3, 4]
        back = xr.open_zarr(store, consolidated=True)
        assert back["t2m"].attrs["units"] == "degC"
        assert back["extra"].values.tolist() == [1, 2, 3, 4]
        shutil.rmtree(store / "extra")
        assert "extra" not in xr.open_zarr(store, consolidated=True)
    meta = json.loads(backend.read("c.zarr/.zmetadata"))["metadata"]
    for key in ("t2m/.zarray", "t2m/.zattrs", "lat/.zarray", ".zgroup", ".zattrs"):
        assert meta[key] == json.loads(backend.read(f"c.zarr/{key}")), key
    assert not any(k.startswith("extra/") for k in meta)


def test_posix_writes_and_renames_of_metadata_update_zmetadata(backend, tmp_path):
    with mounted(backend, tmp_path / "mnt") as m:
        store = m.path / "c.zarr"
        dataset().to_zarr(store, mode="w", zarr_format=2, consolidated=True)
        zattrs = json.loads((store / "t2m" / ".zattrs").read_bytes())
        zattrs["long_name"] = "air temperature"
        (store / "t2m" / "tmp.partial").write_text(json.dumps(zattrs))
        os.rename(store / "t2m" / "tmp.partial", store / "t2m" / ".zattrs")
        (store / ".zattrs").write_text(json.dumps({"title": "retitled"}))
        meta = json.loads((store / ".zmetadata").read_bytes())["metadata"]
        assert meta["t2m/.zattrs"]["long_name"] == "air temperature"
        assert meta[".zattrs"] == {"title": "retitled"}
        assert xr.open_zarr(store, consolidated=True).attrs["title"] == "retitled"
        # a store without .zmetadata does not get one
        plain = m.path / "plain.zarr"
        dataset().to_zarr(plain, mode="w", zarr_format=2, consolidated=False)
        (plain / ".zattrs").write_text("{}")
        assert not (plain / ".zmetadata").exists()


def test_zarr_v3_consolidated_metadata_in_zarr_json_stays_current(backend, tmp_path):
    with mounted(backend, tmp_path / "mnt") as m:
        store = m.path / "c3.zarr"
        dataset().to_zarr(store, mode="w", zarr_format=3, consolidated=True)
        assert json.loads((store / "zarr.json").read_bytes())["consolidated_metadata"]["metadata"]["t2m"]
        g = zarr.open_group(str(store), mode="r+", zarr_format=3, use_consolidated=False)
        g["t2m"].attrs["units"] = "degC"
        root = json.loads((store / "zarr.json").read_bytes())
        assert root["consolidated_metadata"]["metadata"]["t2m"]["attributes"]["units"] == "degC"
        assert xr.open_zarr(store, consolidated=True)["t2m"].attrs["units"] == "degC"
