"""``nczfs validate`` / ``inspect`` as a user reads them: each problem once."""

from __future__ import annotations

import json
import warnings
import zipfile

import pytest

from tests.helpers import is_mounted, run_nczfs, unmount

ZARRAY = {"zarr_format": 2, "shape": [3], "chunks": [1], "dtype": "<i2", "compressor": None,
          "fill_value": 0, "filters": None, "order": "C"}


@pytest.fixture
def duplicates_zip(tmp_path):
    """A zarr-python-layout archive whose 3 chunks were each written 4 times."""
    path = tmp_path / "d.zip"
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as z:
        warnings.simplefilter("ignore")
        z.writestr(".zgroup", json.dumps({"zarr_format": 2}))
        z.writestr("t/.zarray", json.dumps(ZARRAY))
        z.writestr("t/.zattrs", json.dumps({"_ARRAY_DIMENSIONS": ["x"]}))
        for n in range(4):
            for i in range(3):
                z.writestr(f"t/{i}", bytes([n, 0]))
    return path


def test_validate_reports_each_duplicate_zip_member_once(duplicates_zip):
    res = run_nczfs("validate", str(duplicates_zip))
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    for i in range(3):
        line = f"{duplicates_zip}: member 't/{i}' appears more than once; the last one is used"
        assert out.count(line) == 1, out
    assert "3 problem(s)" in res.stderr
    res = run_nczfs("inspect", str(duplicates_zip))
    assert res.returncode == 0
    assert (res.stdout + res.stderr).count("member 't/0' appears more than once") == 1


@pytest.mark.fuse
def test_mount_warns_once_about_duplicate_zip_members(duplicates_zip, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        res = run_nczfs("mount", "-r", str(duplicates_zip), str(mnt), "--log-file", str(tmp_path / "log"))
        assert res.returncode == 0 and is_mounted(mnt), res.stderr
        assert res.stderr.count("nczfs: warning: ") == 3 and res.stderr.count("'t/1' appears more than once") == 1
        assert (mnt / "t" / "1").read_bytes() == bytes([3, 0])  # the last one
    finally:
        unmount(mnt)
