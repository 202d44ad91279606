"""NAME.nc4 of the decoded-fidelity corpus (tests/decoded/strategies.py: every numeric type,
bool, fixed and variable-length strings, times, cftime calendars, packing, masks, zstd, gzip,
blosc and none, Zarr v2 and v3, subgroups), made without a mount: what xarray's ``netcdf4`` and
``h5netcdf`` engines decode from it equals what xarray decodes from the store (the judge of
tests/decoded/judge.py), but bool's CF flags (as in the classic files)."""

from __future__ import annotations

import re
import warnings

import pytest

from tests.decoded.judge import compare, expected
from tests.decoded.run import Site, write_examples
from tests.helpers import DirectoryBackend
from tests.nczarr.nc4util import write_nc4

pytestmark = pytest.mark.filterwarnings("ignore")

xr = pytest.importorskip("xarray")
pytest.importorskip("h5netcdf")
pytest.importorskip("hypothesis")

#: examples (fixed seed); bench-sized runs: 150 decoded equal (docs/SEMANTICS.md)
EXAMPLES = 16
#: what the file adds by design: bool as byte with CF flag_values and flag_meanings
DOCUMENTED = re.compile(r": attr flag_(values|meanings) extra$")


def test_generated_corpus_decodes_equal_through_both_engines(tmp_path):
    (tmp_path / "s").mkdir()
    site = Site(DirectoryBackend(tmp_path / "s"), {}, tmp_path / "s")
    written = write_examples(site, EXAMPLES)
    assert len(written) >= EXAMPLES // 2
    for name, description in written:
        want = expected(tmp_path / "s" / name)
        f, path = write_nc4(tmp_path / "s", name, tmp_path / f"{name}.nc4")
        assert f.left_out == [], (f.left_out, description)
        for engine in ("netcdf4", "h5netcdf"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = {g: ds.load() for g, ds in xr.open_groups(path, engine=engine).items()}
            differences = [d for d in compare(want, got) if not DOCUMENTED.search(d)]
            assert differences == [], (engine, differences, description)
