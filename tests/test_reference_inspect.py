"""The NCZarr model (``nczfs inspect`` / ``nczfs validate``) reads a reference set like any store."""

from __future__ import annotations

import json

from tests.helpers import run_nczfs
from tests.mount.test_reference_mount import write_netcdf4


def test_inspect_and_validate_read_a_kerchunk_reference_set(tmp_path):
    from kerchunk.hdf import SingleHdf5ToZarr

    write_netcdf4(tmp_path / "data.nc")
    with open(tmp_path / "data.nc", "rb") as f:
        refs = SingleHdf5ToZarr(f, "data.nc", inline_threshold=64).translate()
    (tmp_path / "data.json").write_text(json.dumps(refs))
    res = run_nczfs("inspect", str(tmp_path / "data.json"))
    assert res.returncode == 0, res.stderr
    for line in ("float temp(t, y, x) ;", "short raw(y, x) ;", "uint64 counts(t, x) ;", "group: sub {",
                 "float pres(t, x) ;", ':title = "kerchunk through nczfs" ;'):
        assert line in res.stdout, (line, res.stdout)
    res = run_nczfs("validate", str(tmp_path / "data.json"))
    assert res.returncode == 0 and "0 problem(s)" in res.stdout + res.stderr, res.stdout + res.stderr
