"""Zarr v3 groups and arrays read into the dataset model: the part of :class:`nczfs.nczarr.metadata.read.Reader`
that reads ``zarr.json`` objects (dimensions by ``dimension_names``, as pure Zarr v2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nczfs.nczarr.metadata.attrvalues import fill_value, int_list
from nczfs.nczarr.metadata.model import Attribute, Group, Variable
from nczfs.nczarr.metadata.validate_v3 import check_zarr_json
from nczfs.store.keys import join

V3_TYPES = {
    "int8": "byte", "uint8": "ubyte", "int16": "short", "uint16": "ushort", "int32": "int",
    "uint32": "uint", "int64": "int64", "uint64": "uint64", "float32": "float", "float64": "double",
    "string": "string", "null_terminated_bytes": "string",
    # shown by netCDF views with CF attributes: bool as byte (flag_values), times as int64 (units)
    "bool": "byte", "numpy.datetime64": "int64", "numpy.timedelta64": "int64",
}


class V3Reading:
    """Mixed into Reader, whose json/children/problem/attributes/pure_dims it uses."""

    if TYPE_CHECKING:  # what Reader (read.py) gives the part, declared for the type checker alone
        problems: list[str]
        notes: list[str]

        def json(self, key: str) -> Any: ...
        def children(self, prefix: str) -> list[str]: ...
        def problem(self, key: str, reason: str) -> None: ...
        def pure_dims(self, key: str, var: Variable, group: Group, names: Any) -> None: ...
        def attributes(self, key: str, zattrs: dict, types: dict, var_type: str | None = None) -> list[Attribute]: ...

    def read_root_v3(self, root: Group) -> None:
        node = self.json("zarr.json") or {}
        # a root with consolidated metadata: views write a .zmetadata of their own
        self.v3_consolidated = isinstance(node.get("consolidated_metadata"), dict)
        if node.get("node_type") == "array":
            self.problem("zarr.json", "the root is an array, not a group (netCDF shows an empty dataset)")
        else:
            self.read_group_v3("", root, node)

    def read_group_v3(self, prefix: str, group: Group, node: dict) -> None:
        attrs = node.get("attributes") or {}
        if not isinstance(attrs, dict):
            self.problem(join(prefix, "zarr.json"), "attributes must be an object")
            attrs = {}
        group.attributes = self.attributes(join(prefix, "zarr.json"), attrs, {})
        for name in self.children(prefix):
            child = join(prefix, name)
            sub = self.json(join(child, "zarr.json"))
            if sub is None:
                continue
            if sub.get("node_type") == "group":
                g = Group(name, "/" + child)
                group.groups.append(g)
                self.read_group_v3(child, g, sub)
            elif sub.get("node_type") == "array":
                var = self.read_array_v3(child, group, sub)
                if var is not None:
                    group.variables.append(var)
            else:
                self.problem(join(child, "zarr.json"), f"unknown node_type {sub.get('node_type')!r}")

    def read_array_v3(self, prefix: str, group: Group, node: dict) -> Variable | None:
        key = join(prefix, "zarr.json")
        errors = check_zarr_json(node)
        if errors:
            self.problems.extend(f"{key}: {e}" for e in errors)
            return None
        codecs = [c if isinstance(c, dict) else {"name": c} for c in node["codecs"]]
        shape = node.get("shape")
        chunks = ((node.get("chunk_grid") or {}).get("configuration") or {}).get("chunk_shape")
        if not int_list(shape) or not int_list(chunks) or len(shape) != len(chunks):
            self.problem(key, "shape and chunk_grid chunk_shape must be lists of integers of the same length")
            return None
        dtype, config, nctype = v3_type(node.get("data_type"))
        if nctype is None:
            self.notes.append(f"{key}: data_type {dtype!r} has no netCDF type")
        var = Variable(prefix.rpartition("/")[2], nctype, str(dtype), list(shape), list(chunks), [],
                       fill_value=fill_value(nctype, node.get("fill_value")), big_endian=_big_endian(codecs),
                       dimension_separator=_separator(node.get("chunk_key_encoding") or {}), codecs=codecs,
                       dtype_config=config)
        var.attributes = self.attributes(key, node.get("attributes") or {}, {}, nctype)
        self.pure_dims(key, var, group, _dimension_names(node))
        return var


def v3_type(data_type: Any) -> tuple[Any, dict, str | None]:
    """(the data type's name, its configuration, its netCDF type or None)."""
    name, config = data_type, {}
    if isinstance(data_type, dict):
        name, config = data_type.get("name"), dict(data_type.get("configuration") or {})
    nctype = V3_TYPES.get(name) if isinstance(name, str) else None
    if name == "null_terminated_bytes" and config.get("length_bytes") == 1:
        nctype = "char"  # as S1 in Zarr v2: what xarray writes for netCDF char variables
    return name, config, nctype


def _big_endian(codecs: list[dict]) -> bool:
    return any(c.get("name") == "bytes" and (c.get("configuration") or {}).get("endian") == "big" for c in codecs)


def _separator(enc: dict) -> str:
    return (enc.get("configuration") or {}).get("separator", "/" if enc.get("name", "default") == "default" else ".")


def _dimension_names(node: dict) -> Any:
    """The array's dimension names, None if any axis has none."""
    names = node.get("dimension_names")
    return None if isinstance(names, list) and any(n is None for n in names) else names
