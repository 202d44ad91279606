"""Validation of metadata writes through a real mount (``--validate``, default strict).

Each rule: an invalid write fails with EINVAL at the write() that completes the JSON (and again at
close, fsync or rename), the log names
the key and the reason, and the object in the backend is exactly what it was. Valid writes
by zarr-python (v2, v3), xarray (v2, v3, consolidated), the netCDF4 wheel and Debian ncgen
are never refused.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from tests.helpers import mounted

pytestmark = pytest.mark.fuse

ZARRAY = {"zarr_format": 2, "shape": [2, 3], "chunks": [2, 3], "dtype": "<i4", "fill_value": None,
          "order": "C", "compressor": None, "filters": None}
V3 = {"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "int32",
      "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
      "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "codecs": [{"name": "bytes"}]}
NCZ_ROOT = {"_nczarr_superblock": {"version": "2.0.0"},
            "_nczarr_group": {"dimensions": {"x": 2, "y": 3}, "arrays": ["v"], "groups": []}}


def dumps(value) -> bytes:
    return value if isinstance(value, bytes) else json.dumps(value).encode()


#: rule -> (objects already in the store, key written, invalid content, reason in the log)
RULES = {
    "json_syntax": ({}, ".zattrs", b'{"a": 1,', "not valid JSON"),
    "not_an_object": ({}, ".zgroup", [2], "not a JSON object"),
    "zgroup_format": ({}, ".zgroup", {"zarr_format": 3}, "zarr_format must be 2"),
    "required_key": ({}, "v/.zarray", {k: v for k, v in ZARRAY.items() if k != "dtype"}, "required key 'dtype' is missing"),
    "unknown_dtype": ({}, "v/.zarray", {**ZARRAY, "dtype": "<q9"}, "dtype '<q9' is not a known Zarr v2 dtype"),
    "chunks_positive": ({}, "v/.zarray", {**ZARRAY, "chunks": [0, 3]}, "chunks [0, 3] is not a list of positive integers"),
    "shape_integers": ({}, "v/.zarray", {**ZARRAY, "shape": [2, -1]}, "is not a list of non-negative integers"),
    "same_rank": ({}, "v/.zarray", {**ZARRAY, "chunks": [2]}, "shape has rank 2 but chunks rank 1"),
    "fill_representable": ({}, "v/.zarray", {**ZARRAY, "dtype": "|i1", "fill_value": 300}, "fill_value 300 is not representable"),
    "order": ({}, "v/.zarray", {**ZARRAY, "order": "X"}, "order must be 'C' or 'F'"),
    "compressor_known": ({}, "v/.zarray", {**ZARRAY, "compressor": {"id": "nosuch"}}, "compressor id 'nosuch' is not a known numcodecs codec"),
    "filter_known": ({}, "v/.zarray", {**ZARRAY, "filters": [{"id": "zlib"}, {"id": "bogus"}]}, "filter id 'bogus'"),
    "v3_data_type": ({}, "a/zarr.json", {**V3, "data_type": "int33"}, "data_type 'int33' is not a known Zarr v3 data type"),
    "v3_codec": ({}, "a/zarr.json", {**V3, "codecs": [{"name": "bytes"}, {"name": "magic"}]}, "codec 'magic' is not a known Zarr v3 codec"),
    "v3_required": ({}, "a/zarr.json", {k: v for k, v in V3.items() if k != "chunk_grid"}, "required key 'chunk_grid' is missing"),
    "zmetadata_entry": ({}, ".zmetadata", {"zarr_consolidated_format": 1, "metadata": {"v/.zarray": {**ZARRAY, "order": "Q"}}},
                        "metadata entry 'v/.zarray': order must be"),
    "attr_type_valid": ({}, ".zattrs", {"a": 1, "_nczarr_attr": {"types": {"a": "<x7"}}}, "attribute 'a' has type '<x7', which is no netCDF type"),
    "no_json_user_attr": ({}, ".zattrs", {"a": {"k": 1}, "_nczarr_attr": {"types": {"a": "|J0"}}}, "user attribute 'a' typed |J0"),
    "dims_sizes": ({}, ".zattrs", {**NCZ_ROOT, "_nczarr_group": {"dimensions": {"x": "two"}, "arrays": [], "groups": []}}, "dimension 'x' has no valid size"),
    "member_twice": ({}, ".zattrs", {**NCZ_ROOT, "_nczarr_group": {"dimensions": {"x": 2}, "arrays": ["v", "v"], "groups": []}},
                     "arrays lists 'v' twice"),
    "member_clash": ({}, ".zattrs", {**NCZ_ROOT, "_nczarr_group": {"dimensions": {}, "arrays": ["g"], "groups": ["g"]}},
                     "lists 'g' as both an array and a group"),
    "member_name": ({}, ".zattrs", {**NCZ_ROOT, "_nczarr_group": {"dimensions": {}, "arrays": ["a/b"], "groups": []}},
                    "holds 'a/b', which is no member name"),
    "dimref_declared": ({".zattrs": NCZ_ROOT, "v/.zarray": ZARRAY}, "v/.zattrs",
                        {"_nczarr_array": {"dimension_references": ["/x", "/nope"]}}, "dimension reference /nope names no dimension declared in group /"),
    "dimref_size": ({".zattrs": NCZ_ROOT, "v/.zarray": ZARRAY}, "v/.zattrs",
                    {"_nczarr_array": {"dimension_references": ["/y", "/x"]}}, "dimension /y has size 3, the array 2"),
    "dimref_rank": ({".zattrs": NCZ_ROOT, "v/.zattrs": {"_nczarr_array": {"dimension_references": ["/x", "/y"]}}}, "v/.zarray",
                    {**ZARRAY, "shape": [2], "chunks": [2]}, "2 dimension references for an array of rank 1"),
    "v1_types": ({}, "v/.nczattr", {"types": {"units": "99"}}, "attribute 'units' has type '99'"),
    # Python's parser recursed once a level: EIO and a RecursionError traceback in the log
    "json_nesting": ({}, ".zattrs", b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested more than 256 levels deep"),
    # shapes no reader can index were accepted (numpy, zarr-python: 64-bit signed)
    "shape_2_70": ({}, "v/.zarray", {**ZARRAY, "shape": [2**70, 3]}, "holds more than 2**63-1 elements"),
    "shape_10_400": ({}, "v/.zarray", {**ZARRAY, "shape": [10**400, 3]}, "holds more than 2**63-1 elements"),
    "shape_product": ({}, "v/.zarray", {**ZARRAY, "shape": [2**40, 2**40]}, "holds more than 2**63-1 elements"),
    "v3_shape": ({}, "a/zarr.json", {**V3, "shape": [2**70]}, "holds more than 2**63-1 elements"),
    "dim_size": ({}, ".zattrs", {**NCZ_ROOT, "_nczarr_group": {"dimensions": {"x": 2**70}, "arrays": [], "groups": []}},
                 "dimension 'x' has size 1180591620717411303424, more than 2**63-1"),
}


def test_each_rule_refuses_at_write_with_einval_and_keeps_the_old_object(backend, tmp_path):
    """One mount, every rule (each in its own dataset folder, with its own prior objects). The
    write() that makes the object whole JSON fails (netCDF-C ignores what close() returns), and
    close() says it again: nothing is stored."""
    for rule, (existing, key, bad, reason) in RULES.items():
        for k, v in existing.items():
            backend.put(f"{rule}/{k}", dumps(v))
        if key.endswith(".zgroup"):
            backend.put(f"{rule}/{key}", b'{"zarr_format": 2}')
    failures = []
    with mounted(backend, tmp_path / "mnt") as m:
        for rule, (existing, key, bad, reason) in RULES.items():
            path = m.path / rule / key
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            steps = [("write", lambda: os.write(fd, dumps(bad))), ("close", lambda: os.close(fd))]
            if rule == "json_syntax":  # not whole JSON yet, as far as a write() can tell: judged at close
                os.write(fd, dumps(bad))
                steps = steps[1:]
            for what, step in steps:
                try:
                    step()
                    failures.append(f"{rule}: {what} succeeded")
                except OSError as exc:
                    if exc.errno != errno.EINVAL:
                        failures.append(f"{rule}: {exc}")
        log = m.log_text()
    for rule, (existing, key, bad, reason) in RULES.items():
        if f"'{rule}/{key}': invalid metadata:" not in log or reason not in log:
            failures.append(f"{rule}: log lacks the key or {reason!r}")
        if key.endswith(".zgroup"):
            if backend.read(f"{rule}/{key}") != b'{"zarr_format": 2}':
                failures.append(f"{rule}: the old object changed")
        elif backend.exists(f"{rule}/{key}"):
            failures.append(f"{rule}: the refused object was stored")
    if "Traceback" in log:
        failures.append("a traceback in the log")
    assert failures == [], "\n".join(failures) + "\nlog:\n" + log


def test_invalid_metadata_write_and_fsync_fail_and_a_valid_rewrite_then_succeeds(backend, tmp_path):
    backend.put("v/.zarray", dumps(ZARRAY))
    with mounted(backend, tmp_path / "mnt") as m:
        with open(m.path / "v" / ".zarray", "r+b", buffering=0) as f:
            f.truncate(0)
            for step in (lambda: f.write(dumps({**ZARRAY, "dtype": "nonsense"})), lambda: os.fsync(f.fileno())):
                with pytest.raises(OSError) as exc:
                    step()
                assert exc.value.errno == errno.EINVAL
            assert json.loads(backend.read("v/.zarray")) == ZARRAY
            f.seek(0)
            f.truncate(0)
            f.write(dumps({**ZARRAY, "dtype": "<f8"}))
            os.fsync(f.fileno())
        assert json.loads(backend.read("v/.zarray"))["dtype"] == "<f8"


def test_temporary_names_are_checked_only_when_renamed_onto_a_metadata_name(backend, tmp_path):
    backend.put(".zattrs", b'{"a": 1}')
    with mounted(backend, tmp_path / "mnt") as m:
        for tmp in (".zattrs.partial", ".zattrs.swp", "x.tmp"):
            (m.path / tmp).write_bytes(b"{not json")  # closed without error: not a metadata name
        assert backend.read("x.tmp") == b"{not json"
        with pytest.raises(OSError) as exc:
            os.rename(m.path / ".zattrs.partial", m.path / ".zattrs")
        assert exc.value.errno == errno.EINVAL
        assert backend.read(".zattrs") == b'{"a": 1}'
        assert (m.path / ".zattrs.partial").read_bytes() == b"{not json"
        assert (m.path / ".zattrs").read_bytes() == b'{"a": 1}'
        (m.path / "good.partial").write_bytes(b'{"a": 2}')
        os.rename(m.path / "good.partial", m.path / ".zattrs")
        assert backend.read(".zattrs") == b'{"a": 2}' and not backend.exists("good.partial")
        with pytest.raises(OSError) as exc:
            os.link(m.path / "x.tmp", m.path / ".zgroup")
        assert exc.value.errno == errno.EINVAL
        assert not backend.exists(".zgroup")


@pytest.mark.parametrize("mode", ["warn", "off"])
def test_warn_and_off_store_invalid_metadata(backend, tmp_path, mode):
    args = ("--validate", mode) if mode == "warn" else ("-o", f"validate={mode}")
    with mounted(backend, tmp_path / "mnt", *args) as m:
        (m.path / ".zattrs").write_bytes(b"{oops")
        log = m.log_text()
    assert backend.read(".zattrs") == b"{oops"
    assert ("stored anyway (validate=warn) '.zattrs': invalid metadata: not valid JSON" in log) == (mode == "warn")


def test_bad_validate_option_is_a_usage_error(backend, tmp_path):
    from tests.helpers import run_nczfs

    (tmp_path / "mnt").mkdir()
    res = run_nczfs("mount", backend.source, str(tmp_path / "mnt"), "-o", "validate=maybe")
    assert res.returncode == 2 and "validate=maybe: must be off, warn or strict" in res.stderr


# ------------------------------------------------------------------ no false positives


def assert_nothing_refused(m) -> None:
    log = m.log_text()
    assert "invalid metadata" not in log and "ERROR" not in log, log


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zarr_python_datasets_are_never_refused(backend, tmp_path, zarr_format):
    zarr = pytest.importorskip("zarr")
    with mounted(backend, tmp_path / "mnt") as m:
        root = zarr.open_group(str(m.path / "z.zarr"), mode="w", zarr_format=zarr_format)
        root.attrs.update({"title": "t", "n": 3, "nested": {"a": [1, 2]}, "nan": float("nan")})
        g = root.create_group("g")
        for dtype, fill in (("i1", -1), ("u8", 7), ("f4", float("nan")), ("f8", float("inf")), ("bool", True),
                            (">i4", 5), ("<U3", "ab")):
            a = g.create_array(f"a_{dtype.strip('<>')}", shape=(5, 4), chunks=(2, 3), dtype=dtype, fill_value=fill)
            a.attrs["units"] = "m"
        x = root.create_array("x", shape=(6,), chunks=(4,), dtype="f8")
        x[:] = np.arange(6)
        root.create_array("empty", shape=(0, 3), chunks=(0, 3), dtype="f4")  # zarr's chunks (0, 3): kept
        zarr.consolidate_metadata(str(m.path / "z.zarr"))
        assert_nothing_refused(m)
        assert zarr.open_group(str(m.path / "z.zarr"), mode="r")["x"][:].tolist() == list(range(6))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_xarray_datasets_are_never_refused(backend, tmp_path, zarr_format):
    xr = pytest.importorskip("xarray")
    ds = xr.Dataset(
        {"t2m": (("time", "lat"), np.random.default_rng(1).random((4, 3)).astype("f4"), {"units": "K"}),
         "flag": (("time",), np.array([True, False, True, True]))},
        coords={"time": np.array(["2020-01-01", "2020-01-02", "2020-01-03", "2020-01-04"], dtype="datetime64[ns]"),
                "lat": [10.0, 20.0, 30.0], "name": ("lat", ["a", "bb", "ccc"])},
        attrs={"title": "x", "version": 2},
    )
    with mounted(backend, tmp_path / "mnt") as m:
        store = str(m.path / "x.zarr")
        ds.to_zarr(store, mode="w", zarr_format=zarr_format, consolidated=True)
        ds.isel(time=slice(0, 2)).to_zarr(store, mode="a", append_dim="time", zarr_format=zarr_format)
        assert_nothing_refused(m)
        back = xr.open_zarr(store, consolidated=True)
        assert back.sizes["time"] == 6


def test_netcdf4_wheel_datasets_are_never_refused(backend, tmp_path, monkeypatch):
    netCDF4 = pytest.importorskip("netCDF4")
    from tests.mount.test_clients_netcdf import open_for_update
    with mounted(backend, tmp_path / "mnt") as m:
        url = f"file://{m.path}/n.file#mode=nczarr,file"
        with netCDF4.Dataset(url, "w") as nc:
            nc.createDimension("x", 3)
            nc.createDimension("t", None)
            nc.title = "t"
            nc.setncattr("ids", np.array([1, 2], dtype="i2"))
            nc.setncattr_string("strs", ["a", "bc"])
            v = nc.createVariable("v", "f4", ("t", "x"), fill_value=-1.0)
            v.units = "m"
            v[0:2, :] = np.ones((2, 3))
            s = nc.createVariable("s", "i8", ())
            s.assignValue(7)
            nc.createVariable("c", "S1", ("x",))
            nc.createVariable("str", str, ("x",))
            g = nc.createGroup("g")
            g.createDimension("z", 2)
            w = g.createVariable("w", "u2", ("x", "z"), zlib=True)
            w[:] = np.arange(6).reshape(3, 2)
        with open_for_update(url, monkeypatch) as nc:
            nc["v"][2, :] = 2.0
            nc.history = "appended"
        with netCDF4.Dataset(url) as nc:
            assert nc["v"].shape == (3, 3) and nc["g"]["w"][:].sum() == 15
        assert_nothing_refused(m)


@pytest.mark.skipif(shutil.which("ncgen") is None, reason="needs Debian netcdf-bin")
def test_debian_ncgen_datasets_are_never_refused(backend, tmp_path):
    cdl = tmp_path / "d.cdl"
    cdl.write_text("""netcdf d {
dimensions: x = 2 ; y = 3 ;
variables:
  int v(x, y) ; v:units = "m" ; v:scale = 1.5f ;
  double s ;
// global attributes:
  :n = 7LL ;
data:
  v = 1, 2, 3, 4, 5, 6 ;
group: g {
  dimensions: z = 2 ;
  variables: float w(x, z) ;
  data: w = 1, 2, 3, 4 ;
  }
}
""")
    with mounted(backend, tmp_path / "mnt") as m:
        res = subprocess.run(["ncgen", "-4", "-o", f"file://{m.path}/d.file#mode=nczarr,file", str(cdl)],
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        assert_nothing_refused(m)
    assert backend.exists("d.file/g/w/.zarray")


def test_shorter_rewrite_without_trunc_is_stored_as_its_json_but_other_junk_is_refused(backend, tmp_path):
    """netCDF-C rewrites objects O_RDWR without O_TRUNC; a shorter rewrite leaves the old tail
    (on local disk too), which netCDF-C's reader ignores and every other reader fails on: the
    object is stored as the JSON its writer meant."""
    old = b'{"units": "metres", "n": 12345}'
    backend.put("v/.zattrs", old)
    with mounted(backend, tmp_path / "mnt") as m:
        fd = os.open(m.path / "v" / ".zattrs", os.O_RDWR)
        os.write(fd, b'{"units": "m"}')
        os.close(fd)
        expected = b'{"units": "m"}'
        assert backend.read("v/.zattrs") == expected
        fd = os.open(m.path / "v" / ".zattrs", os.O_RDWR)
        os.pwrite(fd, b'{"a": 1} XYZ', 0)  # junk after the JSON that is not the old tail
        with pytest.raises(OSError) as exc:
            os.close(fd)
        assert exc.value.errno == errno.EINVAL
    assert backend.read("v/.zattrs") == expected
