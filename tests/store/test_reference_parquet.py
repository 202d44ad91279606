"""kerchunk's parquet form of a reference set: the same keys and bytes as its JSON form."""

from __future__ import annotations

import base64
import errno
import json

import netCDF4
import numpy as np
import pytest

from nczfs.toolbox.errors import SourceError, to_errno
from nczfs.store.reference.store import ReferenceStore

pytestmark = pytest.mark.filterwarnings("ignore:.*fastparquet.*", "ignore:.*infer_string.*")  # kerchunk's writer, pandas 3


def kerchunk_refs(d) -> dict:
    from kerchunk.hdf import SingleHdf5ToZarr

    with netCDF4.Dataset(d / "data.nc", "w") as ds:
        ds.createDimension("t", 10)
        ds.createDimension("x", 6)
        v = ds.createVariable("v", "f4", ("t", "x"), chunksizes=(3, 4), zlib=True)
        v[:] = np.arange(60, dtype="f4").reshape(10, 6)
        w = ds.createVariable("w", "i2", ("x",), contiguous=True)
        w[:] = np.arange(6)
    with open(d / "data.nc", "rb") as f:
        refs = SingleHdf5ToZarr(f, "data.nc", inline_threshold=0).translate()
    # an array with an inline chunk, a whole-file chunk and a missing one
    refs["refs"]["m/.zarray"] = json.dumps({"shape": [3], "chunks": [1], "dtype": "|u1", "fill_value": 7, "order": "C",
                                            "filters": None, "compressor": None, "zarr_format": 2})
    (d / "one.bin").write_bytes(b"\x09")
    refs["refs"]["m/0"] = "base64:" + base64.b64encode(b"\x05").decode()
    refs["refs"]["m/2"] = ["one.bin"]
    return refs


def to_parquet(refs: dict, path, record_size: int) -> None:
    from kerchunk.df import refs_to_dataframe

    refs_to_dataframe(refs, str(path), record_size=record_size)


@pytest.mark.parametrize("record_size", [1, 4, 1000])
def test_parquet_form_has_the_json_forms_keys_and_bytes(tmp_path, record_size):
    refs = kerchunk_refs(tmp_path)
    (tmp_path / "refs.json").write_text(json.dumps(refs))
    to_parquet(refs, tmp_path / "refs.parq", record_size)
    from_json = ReferenceStore(str(tmp_path / "refs.json"))
    from_parquet = ReferenceStore(str(tmp_path / "refs.parq"))
    try:
        assert from_parquet.list_prefix("") == from_json.list_prefix("")
        assert "m/1" not in from_parquet.refs  # a missing chunk stays missing
        for key in from_json.list_prefix(""):
            got, want = from_parquet.get(key), from_json.get(key)
            if key.endswith((".zarray", ".zattrs", ".zgroup")):
                assert json.loads(got) == json.loads(want), key
            else:
                assert got == want, key
        assert from_parquet.get("m/2") == b"\x09" and from_parquet.stat("m/2").size == 1
    finally:
        from_json.close()
        from_parquet.close()


def test_parquet_targets_obey_allow_root(tmp_path):
    inner = tmp_path / "inner"
    inner.mkdir()
    refs = kerchunk_refs(tmp_path)
    to_parquet(refs, inner / "refs.parq", 100)  # targets resolve to inner/, where data.nc is not
    (inner / "data.nc").symlink_to(tmp_path / "data.nc")  # ... and a symlink out is refused
    s = ReferenceStore(str(inner / "refs.parq"))
    with pytest.raises(Exception) as info:
        s.get("w/0")
    assert to_errno(info.value) == errno.EACCES
    s.close()


@pytest.mark.parametrize(
    "meta, reason",
    [
        ("{not json", ".zmetadata is not valid JSON"),
        ('{"refs": {}}', "no 'metadata' object"),
        ('{"metadata": {}, "record_size": 0}', "record_size must be a whole number >= 1"),
        ('{"metadata": {"v/.zarray": {"shape": [4]}}, "record_size": 10}', "v/.zarray: not Zarr v2 array metadata"),
    ],
)
def test_bad_parquet_reference_sets_are_refused(tmp_path, meta, reason):
    d = tmp_path / "bad.parq"
    d.mkdir()
    (d / ".zmetadata").write_text(meta)
    with pytest.raises(SourceError) as info:
        ReferenceStore(str(d))
    assert str(d) in str(info.value) and reason in str(info.value)


def test_a_damaged_parquet_file_is_refused(tmp_path):
    refs = kerchunk_refs(tmp_path)
    to_parquet(refs, tmp_path / "refs.parq", 100)
    (tmp_path / "refs.parq" / "v" / "refs.0.parq").write_bytes(b"PAR1 garbage")
    with pytest.raises(SourceError, match="refs.0.parq: cannot read parquet"):
        ReferenceStore(str(tmp_path / "refs.parq"))
