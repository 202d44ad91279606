"""A reference set whose targets are s3:// objects on the test SeaweedFS server, mounted for real."""

from __future__ import annotations

import errno
import json

import netCDF4
import numpy as np
import pytest
import zarr

from tests.helpers import mounted
from tests.mount.test_reference_mount import RefsBackend, write_netcdf4

pytestmark = pytest.mark.fuse


def test_s3_targets_read_through_the_s3_backends_client(tmp_path, s3_server, s3_bucket):
    from kerchunk.hdf import SingleHdf5ToZarr

    nc = tmp_path / "data.nc"
    write_netcdf4(nc)
    s3_server.client().upload_file(str(nc), s3_bucket, "archive/data.nc")
    url = f"s3://{s3_bucket}/archive/data.nc"
    with open(nc, "rb") as f:
        refs = SingleHdf5ToZarr(f, url, inline_threshold=0).translate()
    refs["refs"]["missing"] = [f"s3://{s3_bucket}/archive/nothere.nc", 0, 8]
    refs["refs"]["whole"] = [url]
    d = tmp_path / "refs"
    d.mkdir()
    (d / "s3.json").write_text(json.dumps(refs))
    with mounted(RefsBackend(d / "s3.json"), tmp_path / "mnt", "--endpoint-url", s3_server.endpoint) as m:
        with netCDF4.Dataset(nc) as orig:
            orig.set_auto_mask(False)
            group = zarr.open_group(str(m.path), mode="r", zarr_format=2)
            for name in ("x", "y", "temp", "raw", "counts", "dense"):
                np.testing.assert_array_equal(group[name][...], orig[name][:], err_msg=name)
            np.testing.assert_array_equal(group["sub/pres"][...], orig["sub"]["pres"][:])
        assert (m.path / "whole").stat().st_size == nc.stat().st_size  # sized by HeadObject
        assert (m.path / "whole").read_bytes() == nc.read_bytes()
        with pytest.raises(OSError) as info:
            (m.path / "missing").read_bytes()
        assert info.value.errno == errno.EIO
        log = m.log_text()
    assert "nothere.nc: no such S3 object" in log and "Traceback" not in log
