"""The views' fidelity, as a user meets it: datasets of netCDF-C's own CDL corpus (one or more per
CDL feature: groups, unlimited dimensions, every atomic type, strings, fills, scalars, non-ASCII
names) written by Debian netCDF-C 4.9.0, the netCDF4 wheel and xarray (Zarr v2, v3), and the Zarr
features zarr-python 3 and xarray write (every codec, sharding form and data type), each read by
Debian ncdump, the wheel and xarray through its own view, on a directory and an S3 mount.

Every read opens (no read fails but those no reader's data model can express, each named in
docs/SEMANTICS.md), and none comes out worse than the same reader's read of the store without
nczfs. The whole corpus and every view x reader pair: ``bench/bench_fidelity.py``.
"""

from __future__ import annotations

import pytest

from tests.fidelity.matrix import Matrix
from tests.fidelity.readers import OWN_VIEW
from tests.fidelity.run import EXCEPTIONS, own_views, read_direct, write_corpus
from tests.helpers import DirectoryBackend, S3Backend

pytestmark = [pytest.mark.fuse, pytest.mark.filterwarnings("ignore")]

pytest.importorskip("netCDF4")
pytest.importorskip("xarray")

#: one or more CDL files of netCDF-C's tests per feature
CDL_FEATURES = {
    "groups": ["ncdump_ref_tst_solar_1", "ncdump_ref_tst_group_data"],
    "unlimited": ["ncdump_ref_tst_small"],
    "atomic types": ["ncdump_ref_inttags4", "ncdump_cdl_ref_const_test"],
    "strings": ["ncdump_ref_tst_string_data"],
    "fills": ["ncdump_cdl_fills"],
    "scalars": ["ncdump_cdl_ref_tst_h_scalar"],
    "non-ASCII names": ["ncdump_ref_tst_unicode", "ncdump_ref_tst_utf8"],
}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory, s3_server):
    work = tmp_path_factory.mktemp("fidelity")
    datasets = write_corpus(work, [c for cdls in CDL_FEATURES.values() for c in cdls])
    stores = work / "stores"
    m = Matrix()
    read_direct(m, stores, datasets, parallel=True)
    own_views(m, DirectoryBackend(stores), "dir", work, datasets, parallel=True)
    s3 = S3Backend(s3_server, s3_server.shared_bucket, s3_server.new_prefix())
    s3.put_many({str(p.relative_to(stores)): p.read_bytes() for p in stores.rglob("*") if p.is_file()})
    own_views(m, s3, "s3", work, datasets, parallel=True)
    return m


def test_every_cdl_feature_was_written_by_every_writer(matrix):
    written = {(w, n) for (c, w, n, _) in matrix.results if c == "direct"}
    for feature, cdls in CDL_FEATURES.items():  # tst_group_data: only 4.9.0 writes it (the others refuse)
        for cdl in cdls:
            assert sum((w, cdl) in written for w in ("w49", "w410", "xz2", "xz3")) >= 1, (feature, cdl)
    assert sum(1 for w, n in written if w != "zarr") >= 3 * sum(map(len, CDL_FEATURES.values()))
    assert len({n for w, n in written if w == "zarr"}) >= 15


@pytest.mark.parametrize("backend", ["dir", "s3"])
def test_every_reader_opens_every_dataset_through_its_own_view(matrix, backend):
    failed = [f"{w}/{n} {r}: {res.get('err')}" for (c, w, n, r), res in matrix.results.items()
              if c == f"{backend} {OWN_VIEW[r]}" and res["status"] == "fails" and (n, r) not in EXCEPTIONS]
    assert failed == []


@pytest.mark.parametrize("backend", ["dir", "s3"])
def test_no_read_through_a_view_is_worse_than_without_nczfs(matrix, backend):
    worse = [w for w in matrix.worse_than_direct({r: f"{backend} {v}" for r, v in OWN_VIEW.items()})
             if not any(f"/{n} {r}:" in w for n, r in EXCEPTIONS)]
    assert worse == []


def test_every_zarr_feature_reads_fully_through_every_view(matrix):
    """Values as zarr-python reads them: every codec (decoded where the reader lacks it), sharding
    form and data type zarr-python writes."""
    partial = [f"{c} {n} {r}: {res['status']} {res.get('err', '')} {res['diffs'][:3]}"
               for (c, w, n, r), res in matrix.results.items()
               if w == "zarr" and c != "direct" and res["status"] != "full"]
    assert partial == []


def test_the_exceptions_are_named_in_the_semantics_document():
    from pathlib import Path

    doc = " ".join((Path(__file__).resolve().parents[2] / "docs" / "SEMANTICS.md").read_text().split())
    for (name, reader), why in EXCEPTIONS.items():
        assert name in doc and why in doc, (name, reader)
