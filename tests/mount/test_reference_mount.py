"""Real mounts of kerchunk reference sets: built by kerchunk from a netCDF-4 file, v1 templates
and gen, http targets on a local server, and the hostile cases."""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import random
import subprocess
import threading
import time
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr

from tests.helpers import is_mounted, mounted, run_nczfs
from tests.http_range_server import RangeServer

pytestmark = [pytest.mark.fuse, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


class RefsBackend:
    """The bytes live in files a reference JSON points into; the mount is read-only."""

    name = "reference"

    def __init__(self, json_path: Path):
        self.json_path = json_path

    @property
    def source(self) -> str:
        return str(self.json_path)


def write_netcdf4(path: Path) -> None:
    """Several variables: chunked and contiguous, compressed and not, a group, fill values."""
    rng = np.random.default_rng(8)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as d:
        d.title = "kerchunk through nczfs"
        d.createDimension("t", 7)
        d.createDimension("y", 6)
        d.createDimension("x", 9)
        x = d.createVariable("x", "i4", ("x",), contiguous=True)
        x[:] = np.arange(9) * 10
        y = d.createVariable("y", "f8", ("y",))
        y.units = "m"
        y[:] = np.linspace(-5, 5, 6)
        temp = d.createVariable("temp", "f4", ("t", "y", "x"), chunksizes=(3, 4, 4), zlib=True, shuffle=True)
        temp.units = "degC"
        temp[:] = rng.normal(15, 5, (7, 6, 9)).astype("f4")
        raw = d.createVariable("raw", "i2", ("y", "x"), contiguous=True)
        raw[:] = np.arange(54, dtype="i2").reshape(6, 9) - 20
        counts = d.createVariable("counts", "u8", ("t", "x"), chunksizes=(2, 9))  # chunked, not compressed
        counts[:] = rng.integers(0, 2**40, (7, 9), dtype="u8")
        dense = d.createVariable("dense", "f8", ("t", "y"), chunksizes=(7, 6), zlib=True, complevel=1, fill_value=-999.0)
        values = rng.random((7, 6))
        values[2, 3] = -999.0  # a fill value inside the data
        dense[:] = values
        g = d.createGroup("sub")
        pres = g.createVariable("pres", "f4", ("t", "x"), chunksizes=(4, 5), zlib=True)
        pres[:] = rng.random((7, 9)).astype("f4") * 1000


@pytest.fixture
def nc_refs(tmp_path) -> tuple[Path, Path, dict]:
    from kerchunk.hdf import SingleHdf5ToZarr

    d = tmp_path / "archive"
    d.mkdir()
    nc = d / "data.nc"
    write_netcdf4(nc)
    # a small inline threshold: some chunks are inlined (base64), most are byte ranges; given an
    # open file, kerchunk writes the URL it is told (here relative to the JSON's directory)
    with open(nc, "rb") as f:
        refs = SingleHdf5ToZarr(f, "data.nc", inline_threshold=64).translate()
    assert {v[0] for v in refs["refs"].values() if isinstance(v, list)} == {"data.nc"}
    (d / "data.json").write_text(json.dumps(refs))
    return nc, d / "data.json", refs


def test_kerchunk_refs_of_a_netcdf4_file_read_by_zarr_and_xarray(nc_refs, tmp_path):
    nc, json_path, refs = nc_refs
    kinds = {type(v).__name__ for v in refs["refs"].values()}
    assert kinds == {"str", "list"}  # inline and referenced values both present
    with mounted(RefsBackend(json_path), tmp_path / "mnt") as m:
        # the key set, with exact sizes
        seen = sorted(str(p.relative_to(m.path)) for p in m.path.rglob("*") if p.is_file())
        assert seen == sorted(refs["refs"])
        for key, value in refs["refs"].items():
            size = os.stat(m.path / key).st_size
            if isinstance(value, list):
                assert size == value[2], key
            else:
                raw = value.encode()
                assert size == len(base64.b64decode(raw[7:]) if raw.startswith(b"base64:") else raw), key

        # zarr-python: every array equals netCDF4's raw (unmasked) data
        with netCDF4.Dataset(nc) as orig:
            orig.set_auto_mask(False)
            group = zarr.open_group(str(m.path), mode="r", zarr_format=2)
            names = {"x", "y", "temp", "raw", "counts", "dense"}
            assert set(group.array_keys()) == names
            for name in names:
                np.testing.assert_array_equal(group[name][...], orig[name][:], err_msg=name)
            np.testing.assert_array_equal(group["sub/pres"][...], orig["sub"]["pres"][:])

        # xarray: the mounted view equals the original file opened by netCDF-C
        with xr.open_dataset(nc, engine="netcdf4") as want, xr.open_zarr(m.path, consolidated=False, zarr_format=2) as got:
            assert sorted(got.data_vars) == sorted(want.data_vars)
            for name in want.variables:
                np.testing.assert_array_equal(got[name].values, want[name].values, err_msg=name)
            assert got.attrs["title"] == want.attrs["title"]
            assert np.isnan(got["dense"].values[2, 3])  # the fill value was masked in both
        with xr.open_dataset(nc, group="sub", engine="netcdf4") as want, xr.open_zarr(m.path, group="sub", consolidated=False, zarr_format=2) as got:
            np.testing.assert_array_equal(got["pres"].values, want["pres"].values)

        # netCDF-C (the netCDF4 wheel's) in file mode reads the Zarr view of the HDF5 file
        with netCDF4.Dataset(f"file://{m.path}#mode=zarr,file") as view, netCDF4.Dataset(nc) as orig:
            for ds in (view, orig):
                ds.set_auto_mask(False)
            assert set(view.variables) == {"x", "y", "temp", "raw", "counts", "dense"}
            for name in view.variables:
                np.testing.assert_array_equal(view[name][:], orig[name][:], err_msg=name)
            np.testing.assert_array_equal(view["sub"]["pres"][:], orig["sub"]["pres"][:])

        # Debian's ncdump 4.9.0 (scripts/install.sh --test): the header, an uncompressed variable's
        # values (4.9.0 returns wrong numbers for kerchunk's shuffle+zlib filter chains, from a plain
        # directory copy too, so the compressed variables are left to the netCDF4 wheel above)
        url = f"file://{m.path}#mode=zarr,file"
        header = subprocess.run(["ncdump", "-h", url], capture_output=True, text=True, timeout=60, check=True).stdout
        assert "short raw(y, x)" in header and "float temp(t, y, x)" in header and "group: sub" in header
        dump = subprocess.run(["ncdump", "-v", "raw", url], capture_output=True, text=True, timeout=60, check=True).stdout
        values = dump.split(" raw =", 1)[1].split(";", 1)[0].replace(",", " ").split()
        assert [int(v) for v in values] == list(range(-20, 34))

        # read-only: writes are refused, nothing changes
        with pytest.raises(OSError) as info:
            (m.path / "new").write_bytes(b"x")
        assert info.value.errno == errno.EROFS
        with pytest.raises(OSError) as info:
            os.unlink(m.path / ".zgroup")
        assert info.value.errno == errno.EROFS
    assert "Traceback" not in m.log_text()


@pytest.mark.filterwarnings("ignore:.*fastparquet.*", "ignore:.*infer_string.*")  # kerchunk's writer, pandas 3
def test_parquet_references_read_by_xarray(nc_refs, tmp_path):
    from kerchunk.df import refs_to_dataframe

    nc, json_path, refs = nc_refs
    parq = json_path.parent / "data.parq"
    refs_to_dataframe(refs, str(parq), record_size=3)
    with mounted(RefsBackend(parq), tmp_path / "mnt") as m:
        seen = sorted(str(p.relative_to(m.path)) for p in m.path.rglob("*") if p.is_file())
        assert seen == sorted(refs["refs"])
        with xr.open_dataset(nc, engine="netcdf4") as want, xr.open_zarr(m.path, consolidated=False, zarr_format=2) as got:
            for name in want.variables:
                np.testing.assert_array_equal(got[name].values, want[name].values, err_msg=name)


def test_nczarr_views_apply_to_reference_sets(nc_refs, tmp_path):
    """``--present=netcdf-4.9`` over a reference set: Debian's ncdump 4.9.0 reads what it shows."""
    nc, json_path, _ = nc_refs
    with mounted(RefsBackend(json_path), tmp_path / "mnt", "--present=netcdf-4.9") as m:
        url = f"file://{m.path}#mode=nczarr,file"
        header = subprocess.run(["ncdump", "-h", url], capture_output=True, text=True, timeout=60, check=True).stdout
        shown = [name for name in ("x", "y", "raw", "counts") if f" {name}(" in header]
        assert "raw" in shown and "group: sub" in header
        with netCDF4.Dataset(nc) as orig:
            for name in shown:
                dump = subprocess.run(["ncdump", "-v", name, url], capture_output=True, text=True, timeout=60, check=True).stdout
                values = dump.split(f" {name} =", 1)[1].split(";", 1)[0].replace(",", " ").split()
                assert [int(float(v)) for v in values] == orig[name][:].ravel().astype(int).tolist(), name


def test_v1_templates_gen_inline_and_http_targets(tmp_path):
    d = tmp_path / "refs"
    d.mkdir()
    parts = {i: random.Random(i).randbytes(6000) for i in range(5)}
    for i, data in parts.items():
        (d / f"part_{i}").write_bytes(data)
    remote = random.Random(99).randbytes(300_000)
    server = RangeServer({"/remote.bin": remote})
    try:
        doc = {
            "version": 1,
            "templates": {"u": "part", "host": server.url, "f": "{{c}}.bin"},
            "gen": [
                {"key": "gen/gen_key{{i}}", "url": "{{u}}_{{i}}", "offset": "{{(i + 1) * 1000}}", "length": "1000",
                 "dimensions": {"i": {"stop": 5}}},
                {"key": "http/{{j}}", "url": "{{host}}/remote.bin", "offset": "{{j * 50000}}", "length": "50000",
                 "dimensions": {"j": {"stop": 6}}},
            ],
            "refs": {
                "inline": "plain text",
                "b64": "base64:" + base64.b64encode(b"\x00\x01\xfe\xff").decode(),
                "macro": ["{{host}}/{{f(c='remote')}}", 7, 5],
                "whole": [server.url + "/remote.bin"],
            },
        }
        (d / "v1.json").write_text(json.dumps(doc))
        source = f"reference://{d / 'v1.json'}"
        with mounted(RefsBackend(d / "v1.json"), tmp_path / "mnt", source=source) as m:
            assert sorted(os.listdir(m.path)) == ["b64", "gen", "http", "inline", "macro", "whole"]
            assert sorted(os.listdir(m.path / "gen")) == [f"gen_key{i}" for i in range(5)]
            for i in range(5):
                assert (m.path / "gen" / f"gen_key{i}").read_bytes() == parts[i][(i + 1) * 1000 : (i + 2) * 1000]
            assert (m.path / "inline").read_bytes() == b"plain text"
            assert (m.path / "b64").read_bytes() == b"\x00\x01\xfe\xff"
            assert (m.path / "macro").read_bytes() == remote[7:12]
            assert os.stat(m.path / "whole").st_size == len(remote)
            assert (m.path / "whole").read_bytes() == remote
            for j in range(6):
                assert (m.path / "http" / str(j)).read_bytes() == remote[j * 50000 : (j + 1) * 50000]
            with open(m.path / "http" / "2", "rb") as f:
                assert os.pread(f.fileno(), 100, 49_950) == remote[149_950:150_000]
            gets = [r for meth, _, r in server.requests if meth == "GET"]
            assert all(r is not None and r.startswith("bytes=") for r in gets)  # only ranged GETs
            assert server.connections <= 8  # pooled: at most one connection per worker thread
    finally:
        server.close()


def test_requests_are_answered_while_another_waits_on_the_medium(tmp_path):
    """One read waits on its http target; the daemon answers other files meanwhile (pyfuse3's
    request loop hands the FUSE device on to another task while a handler waits)."""
    slow = random.Random(1).randbytes(20_000)
    fast = {i: random.Random(10 + i).randbytes(3000) for i in range(4)}
    server = RangeServer({"/slow.bin": slow, **{f"/fast{i}.bin": data for i, data in fast.items()}})
    server.gates["/slow.bin"] = gate = threading.Event()
    d = tmp_path / "refs"
    d.mkdir()
    refs = {"slow": [server.url + "/slow.bin", 0, len(slow)],
            **{f"fast{i}": [server.url + f"/fast{i}.bin", 0, len(data)] for i, data in fast.items()}}
    (d / "refs.json").write_text(json.dumps({"version": 1, "refs": refs}))
    got: list[bytes] = []
    with contextlib.ExitStack() as stack:  # on the way out: open the gate, unmount, stop the server
        stack.callback(server.close)
        m = stack.enter_context(mounted(RefsBackend(d / "refs.json"), tmp_path / "mnt",
                                        source=f"reference://{d / 'refs.json'}"))
        stack.callback(gate.set)  # the unmount would wait for the read
        reader = threading.Thread(target=lambda: got.append((m.path / "slow").read_bytes()), daemon=True)
        reader.start()
        deadline = time.monotonic() + 30
        while not any(p == "/slow.bin" for _, p, _ in server.requests):  # its lookup or read waits
            assert time.monotonic() < deadline, "the slow read never reached the server"
            time.sleep(0.01)
        for i, data in fast.items():  # each a first lookup, open and read: all go to the daemon
            assert (m.path / f"fast{i}").read_bytes() == data
        assert reader.is_alive() and not got  # the slow one is still waiting
        gate.set()
        reader.join(timeout=30)
        assert got == [slow]


def test_hostile_references_are_refused_and_the_mount_lives_on(tmp_path):
    d = tmp_path / "refs"
    d.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.bin").write_bytes(b"secret bytes")
    (d / "data.bin").write_bytes(b"0123456789")
    os.symlink(outside / "secret.bin", d / "link.bin")
    doc = {
        "shadow": ["/etc/shadow", 0, 10],
        "shadow_whole": ["file:///etc/shadow"],
        "dotdot": ["../outside/secret.bin", 0, 6],
        "symlink": ["link.bin", 0, 6],
        "past_end": ["data.bin", 5, 10],
        "fine": ["data.bin", 2, 3],
    }
    (d / "hostile.json").write_text(json.dumps(doc))
    source = f"file://{d / 'hostile.json'}#mode=zarr,refs"
    with mounted(RefsBackend(d / "hostile.json"), tmp_path / "mnt", "-o", "allow_other", source=source) as m:
        assert sorted(os.listdir(m.path)) == sorted(doc)
        for key in ("shadow", "dotdot", "symlink"):
            with pytest.raises(OSError) as info:
                (m.path / key).read_bytes()
            assert info.value.errno == errno.EACCES, key
        with pytest.raises(OSError) as info:  # a whole target is sized by stat: refused too
            (m.path / "shadow_whole").read_bytes()
        assert info.value.errno == errno.EACCES
        with pytest.raises(OSError) as info:
            (m.path / "past_end").read_bytes()
        assert info.value.errno == errno.EIO
        assert (m.path / "fine").read_bytes() == b"234"  # the daemon is alive and well
        log = m.log_text()
    assert log.count("refused reference target") >= 4
    assert "/etc/shadow" in log and "outside the allowed roots" in log
    assert "key 'past_end'" in log and "past the end of the target" in log
    assert "Traceback" not in log

    # --allow-root widens what may be read (and replaces the default)
    with mounted(RefsBackend(d / "hostile.json"), tmp_path / "mnt2", "--allow-root", str(outside),
                 "-o", f"allow_root={d}") as m:
        assert (m.path / "dotdot").read_bytes() == b"secret"
        assert (m.path / "symlink").read_bytes() == b"secret"
        with pytest.raises(OSError) as info:
            (m.path / "shadow").read_bytes()
        assert info.value.errno == errno.EACCES


def test_targets_inside_the_mount_itself_are_refused_not_a_hang(tmp_path):
    """The JSON's directory holds the mount point, so the default root covers the mount: a
    reference into it would have the daemon wait on its own reply."""
    d = tmp_path / "refs"
    d.mkdir()
    (d / "sub").mkdir()
    os.symlink(d / "mnt", d / "lnk")
    doc = {
        "loop": ["mnt/loop"],  # a whole target: sized (opened) when listed
        "direct": ["mnt/fine", 0, 1],
        "via_link": ["lnk/fine", 0, 1],
        "via_dotdot": ["sub/../mnt/fine", 0, 1],
        "fine": "x",
    }
    (d / "self.json").write_text(json.dumps(doc))
    with mounted(RefsBackend(d / "self.json"), d / "mnt") as m:
        assert sorted(os.listdir(m.path)) == sorted(doc)
        for key in ("loop", "direct", "via_link", "via_dotdot"):
            with pytest.raises(OSError) as info:
                (m.path / key).read_bytes()
            assert info.value.errno == errno.EACCES, key
        assert (m.path / "fine").read_bytes() == b"x"
        log = m.log_text()
    assert log.count("inside this mount") >= 4 and "Traceback" not in log


@pytest.mark.parametrize(
    "text, reason",
    [
        ('{"a": ["x.bin", 0,', "not valid JSON"),
        ('{"version": 2, "refs": {}}', "unknown reference version 2"),
        ('{"version": 1, "refs": {"k": ["{{ nope }}/x", 0, 1]}}', "'nope' is undefined"),
        ('{"version": 1, "templates": {"f": "{{ c"}, "refs": {}}', "bad template"),
    ],
    ids=["bad-json", "unknown-version", "undefined-template-name", "template-syntax"],
)
def test_bad_reference_sets_refuse_the_mount_with_one_line(tmp_path, text, reason):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    res = run_nczfs("mount", str(bad), str(mnt))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and reason in lines[0], res.stderr
    assert not is_mounted(mnt)
