"""What the decoded judge (tests/decoded/judge.py) counts apart: the kinds of difference that
touch data, and the differences docs/SEMANTICS.md documents, each an adaptation of a path or what
the path's reader itself cannot hold (tests/mount/test_decoded_limits.py shows each reader)."""

from __future__ import annotations

import re

#: the kinds of difference that change what a reader computes with (the rest: metadata)
DATA_KINDS = ("open", "values", "dtype", "missing", "extra", "sizes", "dims", "group", "shape")


def kind_of(difference: str) -> str:
    """The kind of one difference line: open, values, dtype, missing, attr, _FillValue, ..."""
    rest = difference.split(": ", 1)[1] if ": " in difference else difference
    if difference.startswith("open: "):
        return "open"
    return rest.split(" ", 1)[0].strip("()")


#: differences docs/SEMANTICS.md documents as a view's adaptation (not what issue 43 calls a
#: bug): (the paths they apply to, by prefix; the line's pattern; why)
DOCUMENTED = [
    (("netcdf-4.9/", "netcdf-4.9.1/"), r"(sizes .*'_scalar_': 1|dims \(\) -> \('_scalar_',\)|values shape \(\) -> \(1,\))",
     "NCZarr scalars as one element along _scalar_ (4.9.0 crashes on scalars)"),
    (("netcdf-4.10/zarr",),
     r"(sizes .*'_scalar_': 1|dims \(\) -> \('_scalar_',\)|values shape \(\) -> \(1,\))",
     "zarr-python through a netCDF view: a scalar is NCZarr's, one element along _scalar_ (netCDF-C 4.10.1"
     " writes its own so and reads no zero-rank array)"),
    (("netcdf-4.", "nc/", "inspect/"), r": attr flag_(values|meanings) extra", "bool as byte with CF flag_values, flag_meanings"),
    (("xarray/", "open_view-xarray/"), r": _FillValue added", "xarray view: a v3 array's non-zero fill_value is its fill"),
    (("netcdf-4.10/zarr", "netcdf-4.9.1/zarr"), r": _FillValue added \((np\.float\d+\()?nan\)?\)",
     "zarr-python through a netCDF view: a v3 NaN fill_value (a missing chunk's) is xarray's Zarr v2 mask by itself"),
    (("netcdf-4.", "xarray/", "open_view-xarray/"), r": _FillValue lost \((np\.float\d+\()?nan\)?\)",
     "views of pure Zarr: a NaN mask is missing by itself (as _FillValue it unmasks netCDF-C's default fill)"),
    (("netcdf-4.",), r": _FillValue as missing_value",
     "netCDF views: a v3 mask where a missing chunk holds 0 is shown as missing_value"),
    (("netcdf-4.10/", "netcdf-4.9.1/"), r": values at \[[^]]*\]: want \[b'[^]]*\\x00",
     "fixed-width bytes holding a NUL, shown as NC_STRING (a C string), end at the NUL"),
    (("nc/", "netcdf-4.9/"), r": attr .+ changed: \[.*\] -> '\[",
     "classic files, netcdf-4.9: a list of strings as JSON text (no string attributes: classic formats,"
     " 4.9.0's NCZarr)"),
    (("nc/",), r"(: values .*, the masked strings read as their mask|: _FillValue lost \((np\.str_\()?')",
     "classic files: xarray masks no unicode string (pydata/xarray#1647; strings are UTF-8 chars there)"),
    (("nc/", "netcdf-4.9/"), r"(: values .*want \[.*b'.*, the masked strings read as their mask '[^']{2,}'$"
                             r"|: _FillValue lost \((np\.bytes_\()?b'[^']{2,}')",
     "classic files, netcdf-4.9 (chars): a mask of more than one char is beyond a char variable's one-char"
     " _FillValue (netCDF-C, xarray)"),
    (("nc/scipy",), r"^[^:]*: names: scipy decodes names as Latin-1", "scipy reads UTF-8 names as Latin-1"),
    (("netcdf-4.9/",), r"(: only the dimensions of length 0 \(and those only arrays along one use\) left out"
     r"|: only those along a dimension of length 0 left out|: missing \([^)]*\), along a dimension of length 0)",
     "netcdf-4.9: arrays along a dimension of length 0 hidden (4.9.0 refuses a dimension of size 0)"),
    (("netcdf-4.9/ncdump",), r"ncgen crashed \(SIG\w+\) on ncdump's print of chars holding a newline",
     "Debian ncgen 4.9.0 crashes on ncdump's print of chars holding a newline"),
]


def undocumented(path: str, differences: list[str]) -> list[str]:
    """``differences`` of ``path`` less those :data:`DOCUMENTED`."""
    rules = [pattern for prefixes, pattern, _ in DOCUMENTED if path.startswith(prefixes)]
    return [d for d in differences if not any(re.search(r, d) for r in rules)]


def documented_as(path: str, difference: str) -> list[str]:
    """Why each rule of :data:`DOCUMENTED` that covers ``difference`` on ``path`` covers it."""
    return [why for prefixes, pattern, why in DOCUMENTED if path.startswith(prefixes) and re.search(pattern, difference)]


def touches_data(differences: list[str]) -> bool:
    """Do any of ``differences`` change decoded values, dtypes or the variables a reader sees?"""
    return any(kind_of(d) in DATA_KINDS for d in differences)
