"""The dataset model: groups, dimensions, variables and typed attributes, as netCDF sees them.

Built by :mod:`nczfs.nczarr.metadata.read` from any flavor; rendered by :mod:`nczfs.nczarr.metadata.cdl`.
Types are netCDF type names (``int``, ``float``, ``char``, ``string`` ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: netCDF type name -> (numpy kind, item size); char and string are special
NC_TYPES: dict[str, tuple[str, int]] = {
    "byte": ("i", 1), "ubyte": ("u", 1), "short": ("i", 2), "ushort": ("u", 2),
    "int": ("i", 4), "uint": ("u", 4), "int64": ("i", 8), "uint64": ("u", 8),
    "float": ("f", 4), "double": ("f", 8),
}

#: nc_type codes used by NCZarr V1 (``.nczattr`` types as numbers in strings)
NC_TYPE_CODES = {
    1: "byte", 2: "char", 3: "short", 4: "int", 5: "float", 6: "double", 7: "ubyte",
    8: "ushort", 9: "uint", 10: "int64", 11: "uint64", 12: "string",
}

@dataclass
class Attribute:
    name: str
    #: netCDF type name
    nctype: str
    #: a str for char, else a list of values (str for string, numbers otherwise)
    value: Any
    #: the JSON value as stored, where its type was inferred from it (no NCZarr type): pure Zarr
    #: readers are shown it as it is, netCDF readers as the reader would have typed it
    raw: Any = None


@dataclass
class Dimension:
    name: str
    size: int
    unlimited: bool = False


@dataclass
class Variable:
    name: str
    #: netCDF type name, or None if no netCDF type fits the dtype (kept in ``dtype``)
    nctype: str | None
    #: the stored dtype / data_type string as written (``<i4``, ``>S1``, ``int32`` ...)
    dtype: str
    shape: list[int]
    chunks: list[int]
    #: fully qualified dimension names (``/x``, ``/g/z``), one per axis; empty for scalars
    dimrefs: list[str]
    fill_value: Any = None
    order: str = "C"
    big_endian: bool = False
    dimension_separator: str = "."
    compressor: dict | None = None
    filters: list[dict] = field(default_factory=list)
    #: Zarr v3 codec list (empty for v2)
    codecs: list[dict] = field(default_factory=list)
    #: Zarr v3: the data type's configuration (a datetime's unit, a fixed string's length)
    dtype_config: dict = field(default_factory=dict)
    #: a netCDF scalar (stored with shape [1] by NCZarr, [] by Zarr)
    scalar: bool = False
    #: pure Zarr: the store names one dimension per axis (``_ARRAY_DIMENSIONS``, ``dimension_names``;
    #: ``[]`` for a scalar), so xarray reads the array
    named_dims: bool = False
    attributes: list[Attribute] = field(default_factory=list)

    @property
    def is_bool(self) -> bool:
        """A boolean array (Zarr v3 ``bool``, numpy's ``|b1``), shown to netCDF readers as byte."""
        return self.dtype in ("bool", "|b1", "<b1", ">b1")


@dataclass
class Group:
    name: str
    #: fully qualified name: ``/`` for the root, ``/g``, ``/g/h``
    path: str
    dims: list[Dimension] = field(default_factory=list)
    variables: list[Variable] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    attributes: list[Attribute] = field(default_factory=list)

    def dim(self, name: str) -> Dimension | None:
        return next((d for d in self.dims if d.name == name), None)

    def walk(self):
        """This group and every group below it, depth first."""
        yield self
        for g in self.groups:
            yield from g.walk()


@dataclass
class Dataset:
    root: Group
    #: ``V1``, ``V1-dev``, ``V2-UC``, ``V2-LC``, ``V2-ZA``, ``zarr-v2``, ``zarr-v3``
    flavor: str
    consolidated: bool = False
    #: problems found while reading (key: reason), for ``nczfs validate``
    problems: list[str] = field(default_factory=list)
    #: valid Zarr that netCDF-C cannot show (``key: reason``): reported, not a problem
    notes: list[str] = field(default_factory=list)

    def group(self, path: str) -> Group | None:
        for g in self.root.walk():
            if g.path == path:
                return g
        return None

    def find_dim(self, fqn: str) -> Dimension | None:
        gpath, _, name = fqn.rpartition("/")
        g = self.group(gpath or "/")
        return g.dim(name) if g else None
