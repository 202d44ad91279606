"""The NCZarr model (``nczfs inspect`` / ``nczfs validate``) reads a reference set like any store."""

from __future__ import annotations

import json

import pytest

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


@pytest.mark.fuse
def test_targets_outside_the_allowed_roots_warn_at_mount_and_in_validate(tmp_path):
    """kerchunk's usual output: absolute target paths, the JSON stored elsewhere."""
    from kerchunk.hdf import SingleHdf5ToZarr

    from tests.helpers import is_mounted, unmount

    data, refs_dir = tmp_path / "archive", tmp_path / "refs"
    data.mkdir()
    refs_dir.mkdir()
    write_netcdf4(data / "data.nc")
    with open(data / "data.nc", "rb") as f:
        refs = SingleHdf5ToZarr(f, str(data / "data.nc"), inline_threshold=64).translate()
    (refs_dir / "data.json").write_text(json.dumps(refs))
    expected = (f"reference target {data / 'data.nc'} lies outside the allowed roots ({refs_dir}): reads of its "
                f"keys fail with EACCES; --allow-root {data} admits it")
    res = run_nczfs("validate", str(refs_dir / "data.json"))
    assert res.returncode == 1 and res.stdout.splitlines()[0] == expected, res.stdout + res.stderr
    res = run_nczfs("inspect", str(refs_dir / "data.json"))
    assert res.returncode == 0 and f"// problem: {expected}" in res.stdout
    res = run_nczfs("validate", str(refs_dir / "data.json"), "--allow-root", str(data))
    assert res.returncode == 0, res.stdout
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        res = run_nczfs("mount", str(refs_dir / "data.json"), str(mnt), "--log-file", str(tmp_path / "log"))
        assert res.returncode == 0 and is_mounted(mnt), res.stderr
        assert res.stderr.strip() == f"nczfs: warning: {expected}"
    finally:
        unmount(mnt)
    try:
        res = run_nczfs("mount", str(refs_dir / "data.json"), str(mnt), "--log-file", str(tmp_path / "log"),
                        "--allow-root", str(data))
        assert res.returncode == 0 and res.stderr == ""
    finally:
        unmount(mnt)
