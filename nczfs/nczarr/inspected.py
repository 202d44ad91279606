"""The dataset as ``nczfs inspect`` prints it: as the paths show it to netCDF readers.

The store as netCDF-C reads it, but for what every path gives netCDF readers: each variable's
mask as ``_FillValue`` and the CF attributes in its type (:func:`nczfs.nczarr.metadata.masks.cf_attributes`,
as the ``.nc`` files; a pure Zarr v2 string array's fill as the views show it), numpy's
fixed-width unicode as strings, a list of strings as a string attribute of several values, bool
and times with the attributes that say what they are (as the netCDF-4 views and files show them).
"""

from __future__ import annotations

import copy

from nczfs.nczarr.metadata.masks import cf_attributes, string_mask, strings_as_written
from nczfs.nczarr.metadata.model import Dataset
from nczfs.nczarr.views.emit import type_attributes
from nczfs.nczarr.views.viewshape import unicode_strings


def as_shown(ds: Dataset) -> Dataset:
    """A copy of ``ds`` as the paths show it to netCDF readers (``ds`` is left as it is)."""
    shown = copy.deepcopy(ds)
    for g in shown.root.walk():
        g.attributes = [strings_as_written(a) for a in g.attributes]
        for v in g.variables:
            if unicode_strings(v, ds.flavor == "zarr-v3"):
                v.nctype = "string"
            attrs = cf_attributes(v, ds.flavor)
            if ds.flavor == "zarr-v2" and not any(a.name == "_FillValue" for a in attrs):
                attrs += [m] if (m := string_mask(v)) is not None else []
            listed = [strings_as_written(a) for a in attrs]
            have = {a.name for a in listed}
            v.attributes = listed + [a for a in type_attributes(v, "netcdf-4.10", None) if a.name not in have]
    return shown
