"""netCDF-C clients on the mount: the netCDF4 wheel (libnetcdf 4.10.1) writing and rewriting
NCZarr through ``file://MOUNT/...#mode=nczarr,file``, and Debian's ``ncdump``/``ncgen``
(4.9.0) and the wheel reading the hand-made corpus datasets copied into the backend.

netCDF-C's file map writes each object with its own open/write/close and, on rewrite,
opens the existing file O_RDWR *without* O_TRUNC, so shrinking metadata must not leave a
stale tail behind.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from nczfs.nczarr.metadata import jsontext

from tests.helpers import mounted
from tests.mount.clientutil import assert_no_temporaries, backend_json

netCDF4 = pytest.importorskip("netCDF4")

pytestmark = pytest.mark.fuse

DS = "ds.file"


def nczarr_url(root: Path, name: str) -> str:
    return f"file://{root}/{name}#mode=nczarr,file"


def _direct_roots(mount) -> list[tuple[str, Path]]:
    """Where netCDF-C can open the dataset: the mount, and the backing directory itself
    when the backend is one (netCDF-C's file map needs a directory tree)."""
    roots = [("mount", mount.path)]
    if mount.backend.name == "directory":
        roots.append(("backend", mount.backend.root))
    return roots


# ----------------------------------------------------------------------------- writing


def _write_dataset(url: str) -> None:
    ds = netCDF4.Dataset(url, "w")
    try:
        ds.createDimension("x", 3)
        ds.createDimension("t", None)
        ds.createDimension("n", 4)
        ds.title = "written through nczfs"
        ds.setncattr("count", np.int32(3))
        ds.setncattr("ids", np.array([1, 2, 3], dtype="i2"))
        ds.setncattr("ratio", np.float32(0.25))
        # netCDF-C 4.10.1 writes double attributes to JSON with 6 significant digits
        # (3.140625 comes back as 3.14062 even on a plain directory): use an exact one
        ds.setncattr("pi", np.float64(1024.25))
        ds.setncattr("big", np.int64(2**40 + 1))

        b = ds.createVariable("b", "i1", ("t", "x"))
        b[0:2, :] = np.array([[-1, 0, 1], [2, 3, 127]], dtype="i1")
        b.units = "m"
        b.setncattr("scale", np.float32(1.5))
        b.setncattr("valid", np.array([-5, 5], dtype="i2"))

        ds.createVariable("s16", "i2", ("x",))[:] = np.array([-300, 0, 300], dtype="i2")
        i32 = ds.createVariable("i32", "i4", ("t", "x"))
        i32[0:2, :] = np.arange(6, dtype="i4").reshape(2, 3) * 1000
        ds.createVariable("i64", "i8", ("x",))[:] = np.array([-(2**40), 0, 2**62], dtype="i8")
        f32 = ds.createVariable("f32", "f4", ("x",))
        f32[:] = np.array([0.5, -1.25, 3.0], dtype="f4")
        f32.setncattr("offset", np.float64(-0.5))
        ds.createVariable("f64", "f8", ("t", "x"))[0:2, :] = np.array([[1e-300, 2.5, -3.75], [1e300, 0.0, 42.0]])
        c = ds.createVariable("c", "S1", ("n",))
        c[:] = np.array([b"a", b"b", b"c", b"d"], dtype="S1")
        st = ds.createVariable("st", str, ("x",))
        for i, w in enumerate(["one", "", "three ü"]):
            st[i] = w
        sc = ds.createVariable("sc", "f8")
        sc.assignValue(2.5)
        sc.long_name = "a scalar"

        g = ds.createGroup("g")
        g.createDimension("z", 2)
        g.setncattr("gattr", np.int16(-7))
        w = g.createVariable("w", "f4", ("x", "z"))
        w[:] = np.arange(6, dtype="f4").reshape(3, 2) + 0.5
    finally:
        ds.close()


def _expected():
    return {
        "b": np.array([[-1, 0, 1], [2, 3, 127]], dtype="i1"),
        "s16": np.array([-300, 0, 300], dtype="i2"),
        "i32": np.arange(6, dtype="i4").reshape(2, 3) * 1000,
        "i64": np.array([-(2**40), 0, 2**62], dtype="i8"),
        "f32": np.array([0.5, -1.25, 3.0], dtype="f4"),
        "f64": np.array([[1e-300, 2.5, -3.75], [1e300, 0.0, 42.0]]),
        "g/w": np.arange(6, dtype="f4").reshape(3, 2) + 0.5,
    }


def _check_attr(obj, name, value, dtype) -> None:
    got = obj.getncattr(name)
    if dtype is str:
        assert isinstance(got, str) and got == value, (name, got)
        return
    got = np.asarray(got)
    assert got.dtype == np.dtype(dtype), (name, got.dtype)
    np.testing.assert_array_equal(got, value, err_msg=name)


def _check_dataset(url: str, label: str, expected: dict, t_len: int = 2, extra_global: dict | None = None) -> None:
    ds = netCDF4.Dataset(url, "r")
    try:
        assert {k: (len(d), d.isunlimited()) for k, d in ds.dimensions.items()} == {
            "x": (3, False),
            "t": (t_len, True),
            "n": (4, False),
        }, label
        assert set(ds.groups) == {"g"}, label
        assert {k: (len(d), d.isunlimited()) for k, d in ds["g"].dimensions.items()} == {"z": (2, False)}, label
        want_globals = {"title", "count", "ids", "ratio", "pi", "big"} | set(extra_global or {})
        assert set(ds.ncattrs()) == want_globals, (label, ds.ncattrs())
        _check_attr(ds, "title", "written through nczfs", str)
        _check_attr(ds, "count", 3, "i4")
        _check_attr(ds, "ids", [1, 2, 3], "i2")
        _check_attr(ds, "ratio", 0.25, "f4")
        _check_attr(ds, "pi", 1024.25, "f8")
        _check_attr(ds, "big", 2**40 + 1, "i8")
        for name, (value, dtype) in (extra_global or {}).items():
            _check_attr(ds, name, value, dtype)

        assert set(ds.variables) == {"b", "s16", "i32", "i64", "f32", "f64", "c", "st", "sc"}, label
        dtypes = {"b": "i1", "s16": "i2", "i32": "i4", "i64": "i8", "f32": "f4", "f64": "f8", "c": "S1", "sc": "f8"}
        for name, dt in dtypes.items():
            assert ds[name].dtype == np.dtype(dt), (label, name, ds[name].dtype)
        assert ds["st"].dtype is str, label
        assert ds["b"].dimensions == ("t", "x") and ds["c"].dimensions == ("n",) and ds["sc"].dimensions == ()
        assert ds["g/w"].dimensions == ("x", "z"), label

        for name, want in expected.items():
            v = ds[name]
            v.set_auto_mask(False)
            got = v[:]
            assert got.dtype == want.dtype, (label, name)
            np.testing.assert_array_equal(got, want, err_msg=f"{label}: {name}")
        assert ds["c"][:].tobytes() == b"abcd", label
        assert list(ds["st"][:]) == ["one", "", "three ü"], label
        assert float(ds["sc"].getValue()) == 2.5, label

        b = ds["b"]
        assert b.ncattrs() == ["units", "scale", "valid"], label
        _check_attr(b, "units", "m", str)
        _check_attr(b, "scale", 1.5, "f4")
        _check_attr(b, "valid", [-5, 5], "i2")
        _check_attr(ds["f32"], "offset", -0.5, "f8")
        _check_attr(ds["sc"], "long_name", "a scalar", str)
        _check_attr(ds["g"], "gattr", -7, "i2")
    finally:
        ds.close()


def test_netcdf4_wheel_writes_nczarr_through_mount(mount):
    backend = mount.backend
    _write_dataset(nczarr_url(mount.path, DS))

    expected = _expected()
    for label, root in _direct_roots(mount):
        _check_dataset(nczarr_url(root, DS), label, expected)

    # the V2-ZA (4.9.3+) layout reached the backend
    root_attrs = backend_json(backend, f"{DS}/.zattrs")
    assert root_attrs["_nczarr_superblock"] == {"version": "2.0.0"}
    assert root_attrs["_nczarr_group"]["dimensions"] == {"x": 3, "t": {"size": 2, "unlimited": 1}, "n": 4}
    assert sorted(root_attrs["_nczarr_group"]["arrays"]) == sorted(["b", "s16", "i32", "i64", "f32", "f64", "c", "st", "sc"])
    assert root_attrs["_nczarr_group"]["groups"] == ["g"]
    assert root_attrs["title"] == "written through nczfs" and root_attrs["big"] == 2**40 + 1
    assert root_attrs["_nczarr_attr"]["types"]["ids"] == "<i2"
    assert backend_json(backend, f"{DS}/.zgroup") == {"zarr_format": 2}
    assert backend_json(backend, f"{DS}/g/.zattrs")["_nczarr_group"]["dimensions"] == {"z": 2}
    zarray = {n: backend_json(backend, f"{DS}/{n}/.zarray") for n in ("b", "s16", "i32", "i64", "f32", "f64", "sc")}
    assert {n: z["dtype"] for n, z in zarray.items()} == {
        "b": "<i1", "s16": "<i2", "i32": "<i4", "i64": "<i8", "f32": "<f4", "f64": "<f8", "sc": "<f8"
    }
    assert zarray["b"]["shape"] == [2, 3]
    assert backend_json(backend, f"{DS}/sc/.zattrs")["_nczarr_array"]["scalar"] == 1
    assert backend_json(backend, f"{DS}/b/.zattrs")["_ARRAY_DIMENSIONS"] == ["t", "x"]
    keys = set(backend.keys(DS))
    for k in ("b/0.0", "i32/0.0", "s16/0", "c/0", "st/0", "sc/0", "g/w/0.0", "g/.zgroup", "g/w/.zarray"):
        assert f"{DS}/{k}" in keys, k
    # uncompressed raw chunk: what was written is in the object
    assert np.frombuffer(backend.read(f"{DS}/s16/0"), "<i2")[:3].tolist() == [-300, 0, 300]
    assert_no_temporaries(backend)


def open_for_update(url: str, monkeypatch) -> "netCDF4.Dataset":
    """``Dataset(url, "a")`` that really opens (nc_open NC_WRITE) instead of re-creating.

    netCDF4-python >= 1.5.8 (PR Unidata/netcdf4-python#1146) opens in "a"/"r+" mode only if
    ``os.path.exists(filename)``, else it *creates* the dataset with NC_CLOBBER. A URL never
    exists as a path, so "a" on ``file://...#mode=nczarr`` silently wipes the dataset (checked
    on a plain directory too). The check is a runtime ``os.path.exists`` lookup, so make it
    true for this one URL.
    """
    real_exists = os.path.exists
    with monkeypatch.context() as m:
        m.setattr(os.path, "exists", lambda p: p == url or real_exists(p))
        return netCDF4.Dataset(url, "a")


def _load_all_attributes(ds) -> None:
    """Work around a netCDF-C 4.10.1 bug: attributes are read lazily, and on close every
    group's/variable's ``.zattrs`` is rewritten from memory, so attributes never looked at
    in "a" mode are dropped (seen on a plain directory too; see the differential test)."""
    groups = [ds]
    while groups:
        g = groups.pop()
        g.ncattrs()
        for v in g.variables.values():
            v.ncattrs()
        groups.extend(g.groups.values())


def _modify(ds) -> None:
    ds["b"][0, :] = np.array([9, 8, 7], dtype="i1")
    ds["b"][2, :] = np.array([-9, -8, -7], dtype="i1")
    ds["g/w"][2, 1] = np.float32(-1)
    ds.added = "yes"
    ds.setncattr("ids", np.array([4, 5], dtype="i2"))


def test_netcdf4_update_through_mount_matches_plain_directory(mount, monkeypatch, tmp_path):
    """Differential: the same "a"-mode session on a plain directory and through the mount
    leaves byte-identical objects, except netCDF-C 4.10.1's own damage: it drops the unread
    attribute of group g and rewrites ``g/.zattrs`` shorter, opened O_RDWR without O_TRUNC, so
    on a plain directory the old tail stays behind (invalid JSON to every reader but netCDF-C);
    through the mount the object is the JSON netCDF-C meant, the plain file up to its tail."""
    plain = tmp_path / "plain"
    plain.mkdir()
    for root in (plain, mount.path):
        url = nczarr_url(root, DS)
        _write_dataset(url)
        ds = open_for_update(url, monkeypatch)
        try:
            _modify(ds)
        finally:
            ds.close()
    want = {str(p.relative_to(plain)): p.read_bytes() for p in sorted(plain.rglob("*")) if p.is_file()}
    got = {k: mount.backend.read(k) for k in mount.backend.keys(DS)}
    assert sorted(got) == sorted(want)
    tails = []
    for key in want:
        meant = want[key]
        if key.endswith("/.zattrs"):
            try:
                json.loads(meant)
            except ValueError:
                meant = meant[:jsontext.loads_prefix(meant)[1]]
                tails.append(key)
        assert got[key] == meant, f"{key}: mount {got[key]!r} != plain {want[key]!r}"
    assert tails == ["ds.file/g/.zattrs"]  # the plain directory kept a stale tail there


def test_netcdf4_wheel_append_and_modify_through_mount(mount, monkeypatch):
    """Reopen in "a" mode: netCDF-C rewrites existing objects (O_RDWR, no O_TRUNC)."""
    backend = mount.backend
    url = nczarr_url(mount.path, DS)
    _write_dataset(url)
    before = backend.read(f"{DS}/.zattrs")

    ds = open_for_update(url, monkeypatch)
    assert "b" in ds.variables and len(ds.dimensions["t"]) == 2, "opened as a new dataset"
    try:
        _load_all_attributes(ds)
        ds["b"][0, :] = np.array([9, 8, 7], dtype="i1")
        ds["b"][2, :] = np.array([-9, -8, -7], dtype="i1")  # new record along t
        ds["i32"][2, :] = np.array([7, 8, 9], dtype="i4")
        ds["f64"][2, :] = np.array([0.5, 0.25, 0.125])
        ds["f32"][1] = np.float32(99.5)
        ds["st"][1] = "now set"
        ds["g/w"][2, 1] = np.float32(-1)
        ds.added = "yes"
        ds.setncattr("ids", np.array([4, 5], dtype="i2"))  # shorter than before
        ds["b"].units = "km"
    finally:
        ds.close()

    exp = _expected()
    exp["b"] = np.array([[9, 8, 7], [2, 3, 127], [-9, -8, -7]], dtype="i1")
    exp["i32"] = np.concatenate([exp["i32"], np.array([[7, 8, 9]], dtype="i4")])
    exp["f64"] = np.concatenate([exp["f64"], [[0.5, 0.25, 0.125]]])
    exp["f32"][1] = 99.5
    exp["g/w"][2, 1] = -1
    for label, root in _direct_roots(mount):
        ds = netCDF4.Dataset(nczarr_url(root, DS), "r")
        try:
            assert len(ds.dimensions["t"]) == 3, label
            for name, want in exp.items():
                v = ds[name]
                v.set_auto_mask(False)
                np.testing.assert_array_equal(v[:], want, err_msg=f"{label}: {name}")
            assert list(ds["st"][:]) == ["one", "now set", "three ü"], label
            assert ds.added == "yes" and ds["b"].units == "km", label
            _check_attr(ds, "ids", [4, 5], "i2")
            _check_attr(ds, "big", 2**40 + 1, "i8")
        finally:
            ds.close()

    root_attrs = backend_json(backend, f"{DS}/.zattrs")  # must still be valid JSON (no stale tail)
    assert root_attrs["added"] == "yes" and root_attrs["ids"] == [4, 5]
    assert root_attrs["_nczarr_group"]["dimensions"]["t"] == {"size": 3, "unlimited": 1}
    assert backend.read(f"{DS}/.zattrs") != before
    assert backend_json(backend, f"{DS}/b/.zattrs")["units"] == "km"
    assert backend_json(backend, f"{DS}/b/.zarray")["shape"] == [3, 3]
    assert f"{DS}/b/2.0" in backend.keys(DS)
    for key in backend.keys(DS):
        if key.rsplit("/", 1)[-1] in (".zattrs", ".zarray", ".zgroup"):
            json.loads(backend.read(key))  # every metadata object parses
    assert_no_temporaries(backend)


def test_netcdf4_wheel_clobbers_existing_dataset_through_mount(mount):
    """mode "w" on an existing dataset: netCDF-C deletes the whole tree (unlink + rmdir)
    and writes the new one in the same directories."""
    backend = mount.backend
    url = nczarr_url(mount.path, DS)
    _write_dataset(url)
    assert backend.exists(f"{DS}/g/w/0.0")
    ds = netCDF4.Dataset(url, "w")
    try:
        ds.createDimension("x", 2)
        ds.createVariable("b", "i4", ("x",))[:] = [5, 6]  # same name, new type and shape
        ds.createGroup("h").createVariable("k", "f8")
        ds.fresh = "yes"
    finally:
        ds.close()
    assert sorted(k[len(DS) + 1 :] for k in backend.keys(DS)) == [
        ".zattrs", ".zgroup", "b/.zarray", "b/.zattrs", "b/0", "h/.zattrs", "h/.zgroup", "h/k/.zarray", "h/k/.zattrs",
    ]
    assert sorted(os.listdir(mount.path / DS)) == [".zattrs", ".zgroup", "b", "h"]
    for label, root in _direct_roots(mount):
        ds = netCDF4.Dataset(nczarr_url(root, DS), "r")
        try:
            assert list(ds.variables) == ["b"] and list(ds.groups) == ["h"] and ds.ncattrs() == ["fresh"], label
            assert ds["b"].dtype == np.dtype("i4") and ds["b"][:].tolist() == [5, 6], label
        finally:
            ds.close()
    assert_no_temporaries(backend)


# ----------------------------------------------------------------------------- reading the corpus


def _put_tree(backend, src: Path, name: str) -> None:
    for p in sorted(src.rglob("*")):
        if p.is_file():
            backend.put(f"{name}/{p.relative_to(src)}", p.read_bytes())


@pytest.mark.parametrize("flavor", ["v2za.file", "v2za_min.file", "v2lc_allzattrs.file"])
def test_wheel_reads_corpus_through_mount_full(mount, corpus, flavor):
    """README: 4.10.1 reads these as full NCZarr (named dims, typed attributes)."""
    _put_tree(mount.backend, corpus / "handmade" / flavor, flavor)
    ds = netCDF4.Dataset(nczarr_url(mount.path, flavor), "r")
    try:
        assert {k: len(d) for k, d in ds.dimensions.items()} == {"x": 2, "y": 3}
        assert {k: len(d) for k, d in ds["g"].dimensions.items()} == {"z": 2}
        v = ds["v"]
        assert v.dimensions == ("x", "y") and v.dtype == np.dtype("i4")
        np.testing.assert_array_equal(v[:], np.arange(1, 7).reshape(2, 3))
        _check_attr(v, "units", "m", str)
        _check_attr(v, "scale", 1.5, "f4")
        _check_attr(v, "ids", [1, 2], "i2")
        w = ds["g/w"]
        assert w.dimensions == ("x", "z") and w.dtype == np.dtype("f4")
        np.testing.assert_array_equal(w[:], [[1, 2], [3, 4]])
        _check_attr(ds, "n", 7, "i8")
        assert not [a for a in ds.ncattrs() + v.ncattrs() if a.lower().startswith("_nczarr")]
    finally:
        ds.close()


def test_wheel_reads_pure_zarr_corpus_through_mount(mount, corpus):
    """README: 4.10.1 gives zarr.file per-group dims from _ARRAY_DIMENSIONS."""
    _put_tree(mount.backend, corpus / "handmade" / "zarr.file", "zarr.file")
    ds = netCDF4.Dataset(f"file://{mount.path}/zarr.file#mode=zarr,file", "r")
    try:
        assert {k: len(d) for k, d in ds.dimensions.items()} == {"x": 2, "y": 3}
        assert {k: len(d) for k, d in ds["g"].dimensions.items()} == {"x": 2, "z": 2}
        np.testing.assert_array_equal(ds["v"][:], np.arange(1, 7).reshape(2, 3))
        np.testing.assert_array_equal(ds["g/w"][:], [[1, 2], [3, 4]])
    finally:
        ds.close()


def _put_zip(backend, archive: Path) -> str:
    """Copy a netcdf-c test zip (one top-level dataset directory) into the backend."""
    with zipfile.ZipFile(archive) as z:
        names = [n for n in z.namelist() if not n.endswith("/")]
        for n in names:
            backend.put(n, z.read(n))
    return names[0].split("/", 1)[0]


def test_wheel_reads_netcdf_c_reference_datasets_through_mount(mount, corpus):
    """netcdf-c's own test vectors (INDEX.md): ref_oldkeys (V2-LC by 4.9.2) and
    ref_oldformat (V2-ZA by 4.9.3-dev) as pinned by ref_oldkeys.cdl / ref_oldformat.cdl."""
    ref = corpus / "netcdf-c"
    name = _put_zip(mount.backend, ref / "ref_oldkeys.file.zip")
    ds = netCDF4.Dataset(nczarr_url(mount.path, name), "r")
    try:
        assert {k: len(d) for k, d in ds.dimensions.items()} == {"d0": 2, "d1": 4, "d2": 6}
        v = ds["v"]
        assert v.dimensions == ("d0", "d1", "d2") and v.dtype == np.dtype("i4")
        _check_attr(v, "_FillValue", -1, "i4")
        np.testing.assert_array_equal(v[:], np.arange(48).reshape(2, 4, 6))
    finally:
        ds.close()

    name = _put_zip(mount.backend, ref / "ref_oldformat.zip")
    ds = netCDF4.Dataset(nczarr_url(mount.path, name), "r")
    try:
        assert {k: len(d) for k, d in ds.dimensions.items()} == {"_Anonymous_Dim_8": 8, "_Anonymous_Dim_10": 10}
        assert ds["lat"][:].tolist() == list(range(1, 9))
        _check_attr(ds["lat"], "lat_attr", "latitude", str)
        pos = ds["g1/pos"]
        assert pos.dimensions == ("_Anonymous_Dim_8", "_Anonymous_Dim_10")
        _check_attr(pos, "pos_attr", "latXlon", str)
        assert pos[:].mask.all()  # `_` everywhere in the CDL: all fill
        _check_attr(ds["g1"], "g1_attr", 17, "i4")
    finally:
        ds.close()


NCDUMP = shutil.which("ncdump")
NCGEN = shutil.which("ncgen")
needs_ncdump = pytest.mark.skipif(NCDUMP is None, reason="Debian ncdump not installed")


def _ncdump(*args: str) -> str:
    res = subprocess.run([NCDUMP, *args], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, f"ncdump {args} failed ({res.returncode}): {res.stderr}"
    return res.stdout


FULL_HEADER = [
    "dimensions:\n\tx = 2 ;\n\ty = 3 ;\n",
    "\tint v(x, y) ;\n",
    '\t\tv:units = "m" ;\n',
    "\t\tv:scale = 1.5f ;\n",
    "\t\tv:ids = 1s, 2s ;\n",
    "\t\t:n = 7LL ;\n",
    "group: g {\n  dimensions:\n  \tz = 2 ;\n",
    "  \tfloat w(x, z) ;\n",
]


@needs_ncdump
@pytest.mark.parametrize("flavor", ["v2uc.file", "v1dev.file"])
def test_debian_ncdump_reads_corpus_through_mount(mount, corpus, flavor):
    """README: Debian 4.9.0 reads v2uc/v1dev as full NCZarr."""
    _put_tree(mount.backend, corpus / "handmade" / flavor, flavor)
    url = nczarr_url(mount.path, flavor)
    header = _ncdump("-h", url)
    for piece in FULL_HEADER:
        assert piece in header, f"{piece!r} missing from:\n{header}"
    assert "_nczarr" not in header.lower() and "_Anonymous" not in header
    data = _ncdump(url)
    assert " v =\n  1, 2, 3,\n  4, 5, 6 ;\n" in data, data
    assert "   w =\n  1, 2,\n  3, 4 ;\n" in data, data


@needs_ncdump
@pytest.mark.skipif(NCGEN is None, reason="Debian ncgen not installed")
def test_debian_ncgen_writes_ncdump_reads_through_mount(mount, tmp_path):
    """Debian 4.9.0 writes V2-UC (upper-case keys in .zgroup/.zarray) through the mount."""
    cdl = tmp_path / "in.cdl"
    cdl.write_text(
        "netcdf gen {\n"
        "dimensions:\n  x = 2 ;\n  t = 3 ;\n"  # 4.9.0 NCZarr has no UNLIMITED

        "variables:\n  short s(t, x) ;\n    s:units = \"K\" ;\n  double d(x) ;\n"
        "  :title = \"from ncgen\" ;\n  :big = 5000000000LL ;\n"
        "data:\n  s = 1, 2, 3, 4, 5, 6 ;\n  d = 0.5, -0.5 ;\n"
        "group: sub {\n  dimensions:\n    z = 3 ;\n  variables:\n    int k(z) ;\n  data:\n    k = 7, 8, 9 ;\n  }\n"
        "}\n"
    )
    url = nczarr_url(mount.path, "gen.file")
    res = subprocess.run([NCGEN, "-k", "nc4", "-o", url, str(cdl)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    backend = mount.backend
    zgroup = backend_json(backend, "gen.file/.zgroup")
    assert zgroup["_NCZARR_SUPERBLOCK"] == {"version": "2.0.0"}
    assert zgroup["_NCZARR_GROUP"] == {"dims": {"x": 2, "t": 3}, "vars": ["s", "d"], "groups": ["sub"]}
    assert np.frombuffer(backend.read("gen.file/s/0.0"), "<i2").tolist() == [1, 2, 3, 4, 5, 6]
    assert np.frombuffer(backend.read("gen.file/sub/k/0"), "<i4").tolist() == [7, 8, 9]
    out = _ncdump(url)
    for piece in (
        "\tx = 2 ;\n",
        "\tt = 3 ;\n",
        "\tshort s(t, x) ;\n",
        '\t\ts:units = "K" ;\n',
        '\t\t:title = "from ncgen" ;\n',
        "\t\t:big = 5000000000LL ;\n",
        " s =\n  1, 2,\n  3, 4,\n  5, 6 ;\n",
        " d = 0.5, -0.5 ;\n",
        "group: sub {\n",
        "   k = 7, 8, 9 ;\n",
    ):
        assert piece in out, f"{piece!r} missing from:\n{out}"
    assert_no_temporaries(backend)


def test_clients_read_on_read_only_mount(backend, corpus, tmp_path):
    """Readers need no write access: the wheel, ncdump, zarr and xarray on ``--read-only``;
    a writer gets a clean error (EROFS) and the backend is untouched."""
    import xarray as xr
    import zarr

    _put_tree(backend, corpus / "handmade" / "v2za.file", "v2za.file")
    _put_tree(backend, corpus / "handmade" / "zarr.file", "zarr.file")
    before = {k: backend.read(k) for k in backend.keys()}
    with mounted(backend, tmp_path / "ro", "--read-only") as m:
        ds = netCDF4.Dataset(nczarr_url(m.path, "v2za.file"), "r")
        try:
            np.testing.assert_array_equal(ds["v"][:], np.arange(1, 7).reshape(2, 3))
            _check_attr(ds, "n", 7, "i8")
        finally:
            ds.close()
        if NCDUMP is not None:
            out = _ncdump(f"file://{m.path}/zarr.file#mode=zarr,file")
            assert " v =\n  1, 2, 3,\n  4, 5, 6 ;\n" in out, out
        g = zarr.open_group(zarr.storage.LocalStore(m.path / "zarr.file", read_only=True), mode="r", zarr_format=2)
        np.testing.assert_array_equal(g["v"][...], np.arange(1, 7).reshape(2, 3))
        with xr.open_zarr(m.path / "zarr.file", consolidated=False) as x:
            assert x["v"].dims == ("x", "y") and x["v"].values.tolist() == [[1, 2, 3], [4, 5, 6]]
        with pytest.raises(OSError):
            netCDF4.Dataset(nczarr_url(m.path, "new.file"), "w")
        with pytest.raises(OSError) as exc:
            (m.path / "v2za.file" / "junk").write_bytes(b"x")
        assert exc.value.errno == errno.EROFS
    assert {k: backend.read(k) for k in backend.keys()} == before
    text = m.log_text()
    assert "Traceback" not in text and " ERROR " not in text, text
