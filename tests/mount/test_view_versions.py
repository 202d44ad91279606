"""The versions a view shows, after the view is replaced (docs/SEMANTICS.md, "Concurrent writers").

A view (``--present``) shows a metadata object it rewrites under the MD5 of the shown bytes; a
write, rename or delete that names such a version is conditioned on the stored version the view
that showed it was built from. The view is replaced when it is older than ``metadata_ttl``; the
shown ``.zmetadata`` of a consolidated group follows the arrays stored (it is made from them), so
another writer's new array changes it while the stored ``.zmetadata`` stays as it was.
"""

from __future__ import annotations

import errno
import json
import os
import time

import pytest

from tests.helpers import counts, mounted

pytestmark = pytest.mark.fuse

TTL = 0.3
ZARRAY = {"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "<f4", "compressor": None,
          "fill_value": 0.0, "order": "C", "filters": None}


def _array(backend, name: str) -> None:
    backend.put(f"g/{name}/.zarray", json.dumps(ZARRAY).encode())
    backend.put(f"g/{name}/.zattrs", json.dumps({"_ARRAY_DIMENSIONS": ["x"]}).encode())


def _group(backend) -> None:
    """A consolidated Zarr v2 group whose ``.zmetadata`` lacks its array ``v`` (so the view shows
    it otherwise than stored, on S3 too, where a stored object's version is its bytes' MD5)."""
    backend.put("g/.zgroup", b'{"zarr_format": 2}')
    _array(backend, "v")
    backend.put("g/.zmetadata", json.dumps({"metadata": {".zgroup": {"zarr_format": 2}},
                                            "zarr_consolidated_format": 1}).encode())


def _rename_over(path, data: bytes) -> None:
    """As zarr-python writes: a temp file beside, renamed over the target."""
    tmp = path.with_name(path.name + ".tmp1")
    tmp.write_bytes(data)
    os.rename(tmp, path)


def test_a_rename_after_the_view_was_rebuilt_names_the_version_the_replaced_view_showed(dir_or_s3, tmp_path):
    """The defect: the view the client read ``.zmetadata`` from was replaced at its TTL by one
    that shows it otherwise (another writer added an array), and the rename over it, naming the
    version read, was refused with ESTALE though no one had changed the stored ``.zmetadata``."""
    backend = dir_or_s3
    _group(backend)
    with mounted(backend, tmp_path / "mnt", "--present", "xarray", "-o", f"metadata_ttl={TTL}") as m:
        target = m.path / "g" / ".zmetadata"
        shown = json.loads(target.read_bytes())
        assert "v/.zarray" in shown["metadata"]  # made from the arrays stored
        _array(backend, "w")  # another writer; the stored .zmetadata stays
        time.sleep(2 * TTL)  # the view is rebuilt at the rename's lookup: it shows w too
        mine = json.dumps({**shown, "mine": True}).encode()
        _rename_over(target, mine)  # names the version read before the rebuild
        assert json.loads(backend.read("g/.zmetadata"))["mine"] is True
        assert "w/.zarray" in json.loads(target.read_bytes())["metadata"]
        assert counts(m.path)["write.conflicts"] == 0

        # a true conflict is still one: another writer replaces the object read, then the rebuild
        attrs = m.path / "g" / "v" / ".zattrs"
        shown = json.loads(attrs.read_bytes())
        backend.put("g/v/.zattrs", json.dumps({**shown, "theirs": True}).encode())
        time.sleep(2 * TTL)
        with pytest.raises(OSError) as refused:
            _rename_over(attrs, json.dumps({**shown, "late": True}).encode())
        assert refused.value.errno == errno.ESTALE
        assert json.loads(backend.read("g/v/.zattrs")).get("theirs") is True
        assert counts(m.path)["write.conflicts"] == 1
