"""CF-decoded equality on every path (issue 43): what xarray decodes through a view of a mount,
a ``NAME.nc`` file, ``nczfs.open_view`` and ``nczfs inspect`` equals what it decodes from the
store itself (tests/decoded/judge.py). Named regressions, one per failure the issue names, each
written by xarray at its defaults; then a fixed-seed Hypothesis run of the generated corpus
(tests/decoded/strategies.py) over one directory mount and one S3 mount, one test per path.

Paths that fail today are ``xfail(strict=True)`` with the reason: when a fix lands the test
passes, strict xfail fails, and the mark is removed. Many more examples, and netCDF-C's CDL
corpus: ``bench/bench_decoded.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.decoded.judge import compare, expected, judge, stop_worker
from tests.decoded.run import Site, Tally, judge_examples, mounted_views, run_examples, write_examples
from tests.helpers import DirectoryBackend, S3Backend

pytestmark = [pytest.mark.fuse, pytest.mark.filterwarnings("ignore")]

xr = pytest.importorskip("xarray")
pytest.importorskip("netCDF4")
pytest.importorskip("cftime")

#: examples per backend (fixed seed): the file stays under a minute on the 2-core CI machine
EXAMPLES = 12
DIR_VIEWS = ("xarray", "netcdf-4.10", "netcdf-4.9")
S3_VIEWS = ("xarray", "netcdf-4.10")

_V3_FILL = "issue 43: a Zarr v3 array's fill_value (0 by default) is written as _FillValue"
_V3_FILL_ATTR = "issue 43: a Zarr v3 _FillValue attribute (xarray's) is not the view's fill"


def xfail(reason: str):
    return pytest.mark.xfail(strict=True, reason=reason)


@pytest.fixture(scope="module", autouse=True)
def _reader_worker():
    """The judge's worker process (netCDF-C reads) ends with the module."""
    yield
    stop_worker()


@pytest.fixture(scope="module")
def dir_site(tmp_path_factory):
    base = tmp_path_factory.mktemp("decoded-dir")
    backend = DirectoryBackend(base / "backing")
    backend.root.mkdir()
    with mounted_views(backend, base, DIR_VIEWS) as roots:
        yield Site(backend, roots, backend.root)


def judged(site: Site, ds, path: str, **to_zarr) -> list[str]:
    """``ds`` written by xarray at its defaults (with ``to_zarr``'s keywords), its differences
    through ``path``."""
    name = site.put(lambda p: ds.to_zarr(p, mode="w", **to_zarr))
    return judge(site.where(name), [path])[path]


# --- the judge itself ------------------------------------------------------------------------

def test_the_judge_names_each_difference(tmp_path):
    ds = xr.Dataset({"v": ("x", np.array([1.0, np.nan, 3.0]), {"units": "K"}),
                     "s": ("x", np.array(["a", "b", "c"], dtype=object))},
                    coords={"x": pd.date_range("2020-01-01", periods=3)})
    ds.to_zarr(tmp_path / "a.zarr", zarr_format=3)
    want = expected(tmp_path / "a.zarr")
    assert compare(want, expected(tmp_path / "a.zarr")) == []
    got = {"/": want["/"].copy(deep=True)}
    got["/"]["v"].values[1] = 2.0
    got["/"]["v"].attrs["units"] = "degC"
    got["/"]["x"].encoding["units"] = "hours since 2020-01-01"
    got["/"] = got["/"].drop_vars("s")
    diffs = compare(want, got)
    assert any(d.startswith("/v: values at [1]") for d in diffs), diffs
    assert "/v: attr units changed: 'K' -> 'degC'" in diffs
    assert "/s: missing (StringDType())" in diffs or any(d.startswith("/s: missing") for d in diffs)
    assert any(d.startswith("/x: units") for d in diffs), diffs


# --- the failures issue 43 names, each written by xarray at its defaults ----------------------

@xfail(_V3_FILL + ": the first time (0 days since the epoch) reads NaT in NAME.nc")
def test_v3_time_coordinate_decodes_in_the_nc_file(dir_site):
    ds = xr.Dataset({"v": ("time", [1.5, np.nan, 3.0])}, coords={"time": pd.date_range("2020-01-01", periods=3)})
    assert judged(dir_site, ds, "nc/netcdf4", zarr_format=3) == []


@xfail(_V3_FILL + ": the first time is masked, a noleap NAME.nc cannot be decoded")
def test_noleap_calendar_nc_file_opens_and_decodes(dir_site):
    time = xr.date_range("2000-01-01", periods=3, calendar="noleap", use_cftime=True)
    ds = xr.Dataset({"v": ("time", [1.0, 2.0, 3.0])}, coords={"time": time})
    assert judged(dir_site, ds, "nc/netcdf4", zarr_format=3) == []


@xfail(_V3_FILL_ATTR + ": packed int16's -32768 reads as -3275.8 through netcdf-4.10")
def test_packed_int16_v3_missing_value_through_netcdf_4_10(dir_site):
    ds = xr.Dataset({"p": ("x", np.array([1.0, np.nan, 2.5]))})
    enc = {"p": {"scale_factor": 0.1, "add_offset": 1.0, "dtype": "int16", "_FillValue": -32768}}
    assert judged(dir_site, ds, "netcdf-4.10/netcdf4", zarr_format=3, encoding=enc) == []


@pytest.mark.parametrize(("fmt", "path"), [
    pytest.param(2, "nc/netcdf4", marks=xfail("issue 43: a vlen string variable vanishes from NAME.nc")),
    pytest.param(3, "nc/netcdf4", marks=xfail("issue 43: a vlen string variable vanishes from NAME.nc")),
    pytest.param(2, "netcdf-4.10/netcdf4", marks=xfail("issue 43: a Zarr v2 vlen string vanishes from netcdf-4.10")),
    (3, "netcdf-4.10/netcdf4"),  # decodes equal today
])
def test_vlen_strings_decode(dir_site, fmt, path):
    ds = xr.Dataset({"s": ("x", np.array(["a", "bb", "γάμμα"], dtype=object))})
    assert judged(dir_site, ds, path, zarr_format=fmt) == []


@pytest.mark.parametrize("path", ["nc/netcdf4", "netcdf-4.10/netcdf4"])
@xfail("issue 43: bool comes back int8 (no dtype='bool' attribute for xarray)")
def test_bool_decodes_as_bool(dir_site, path):
    ds = xr.Dataset({"b": ("x", np.array([True, False, True]))})
    assert judged(dir_site, ds, path, zarr_format=3) == []


@xfail("issue 43: nczfs inspect shows a v3 _FillValue as base64 text (\"AAAAAAAA+H8=\"), ncgen reads 0")
def test_inspect_shows_a_v3_float_fill_value_as_a_number(dir_site):
    ds = xr.Dataset({"v": ("x", np.array([1.0, np.nan]))})
    assert judged(dir_site, ds, "inspect/netcdf4", zarr_format=3) == []


# --- the generated corpus, one test per path --------------------------------------------------

_XARRAY_VIEW = ("issue 43 (found by the judge): a v3 chunk all equal to fill_value 0, which zarr-python does not "
                "write, reads as the _FillValue attribute through the xarray view: its 0s decode as NaN")
_NETCDF_VIEW = _V3_FILL_ATTR + ": values equal to it read as numbers, integers undecoded"
_NC = _V3_FILL + ": integers without a fill decode their 0s as NaN"
_INSPECT = "issue 43: nczfs inspect shows a v3 float _FillValue as base64 text, ncgen reads 0"

#: path -> why it fails today on the fixed-seed examples (None: decodes equal); the examples
#: change with the strategy's code: re-check these after changing tests/decoded/
DIR_PATHS = {
    "xarray/zarr": _XARRAY_VIEW,
    "netcdf-4.10/netcdf4": _NETCDF_VIEW,
    "netcdf-4.9/ncdump": _NETCDF_VIEW,
    "nc/netcdf4": _NC,
    "nc/scipy": _NC,
    "open_view-xarray/zarr": _XARRAY_VIEW,
    "inspect/netcdf4": _INSPECT,
    "open_view-as-stored/zarr": None,
}
S3_PATHS = {
    "xarray/zarr": _XARRAY_VIEW,
    "netcdf-4.10/netcdf4": _NETCDF_VIEW,
    "nc/netcdf4": _NC,
    "open_view-xarray/zarr": _XARRAY_VIEW,
}


def _params(paths: dict[str, str | None]) -> list:
    return [pytest.param(p, marks=xfail(r)) if r else p for p, r in paths.items()]


@pytest.fixture(scope="module")
def dir_tally(dir_site) -> Tally:
    tally = Tally()
    assert run_examples(dir_site, tally, EXAMPLES, list(DIR_PATHS)) >= EXAMPLES // 2
    return tally


@pytest.fixture(scope="module")
def s3_tally(tmp_path_factory, s3_server) -> Tally:
    """The same examples on S3, written before the mount (its cached root listing)."""
    base = tmp_path_factory.mktemp("decoded-s3")
    backend = S3Backend(s3_server, s3_server.shared_bucket, s3_server.new_prefix())
    (base / "staging").mkdir()
    site = Site(backend, {}, base / "staging", s3_server.endpoint)
    written = write_examples(site, EXAMPLES)
    assert len(written) >= EXAMPLES // 2
    tally = Tally()
    with mounted_views(backend, base, S3_VIEWS) as site.roots:
        judge_examples(site, written, list(S3_PATHS), tally)
    return tally


def _check(tally: Tally, path: str) -> None:
    c = tally.counts[path]
    assert c["n/a"] < sum(c.values()), f"{path} applied to no example: {c}"
    assert tally.failed(path) == 0, f"{path}: {c}\n{tally.failures(path)}"


@pytest.mark.parametrize("path", _params(DIR_PATHS))
def test_directory_mount_every_generated_dataset_decodes_equal(dir_tally, path):
    _check(dir_tally, path)


@pytest.mark.parametrize("path", _params(S3_PATHS))
def test_s3_mount_every_generated_dataset_decodes_equal(s3_tally, path):
    _check(s3_tally, path)
