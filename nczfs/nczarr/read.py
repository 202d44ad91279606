"""Build the dataset model from any NCZarr / Zarr flavor (NCZARR_FORMATS.md sections 2-4, 8).

Flavors, detected in this order: ``zarr-v3`` (``/zarr.json``), ``V1``/``V1-dev`` (``/.nczarr``),
``V2-ZA`` (``_nczarr_superblock`` in ``/.zattrs``), ``V2-LC``/``V2-UC`` (the superblock in
``/.zgroup``), else ``zarr-v2`` (pure Zarr, with or without ``_ARRAY_DIMENSIONS``). NCZarr keys
are matched case-insensitively wherever they are placed, with every alias netCDF-C has written
(``dims|dimensions``, ``vars|arrays``, ``dimrefs|dimension_references``, scalars as
``"scalar": 1`` or ``storage: "scalar"``). A consolidated ``/.zmetadata`` supplies objects the
store lacks. What does not fit is recorded in ``Dataset.problems`` (``key: reason``) and the rest
of the dataset is still read.
"""

from __future__ import annotations

import json
import math
from typing import Any, Protocol

from nczfs.errors import InvalidArgument, KeyNotFound
from nczfs.nczarr import jsontext
from nczfs.nczarr.model import Attribute, Dataset, Dimension, Group, Variable
from nczfs.nczarr.spelling import alias, attr_type, dim_items, dim_spec, nctype_of_dtype, nczarr_key
from nczfs.nczarr.validate import check_zarray
from nczfs.nczarr.validate_v3 import check_zarr_json
from nczfs.store.base import SyncStore

#: attribute names netCDF-C never shows (``_nczarr_*`` in any case is hidden too)
HIDDEN_ATTRS = {"_ARRAY_DIMENSIONS", "_NCProperties"}

V3_TYPES = {
    "int8": "byte", "uint8": "ubyte", "int16": "short", "uint16": "ushort", "int32": "int",
    "uint32": "uint", "int64": "int64", "uint64": "uint64", "float32": "float", "float64": "double",
    "string": "string", "null_terminated_bytes": "string",
    # shown by netCDF views with CF attributes: bool as byte (flag_values), times as int64 (units)
    "bool": "byte", "numpy.datetime64": "int64", "numpy.timedelta64": "int64",
}
_SPECIAL_FLOATS = {"nan": math.nan, "nanf": math.nan, "infinity": math.inf, "infinityf": math.inf,
                   "-infinity": -math.inf, "-infinityf": -math.inf}


class Objects(Protocol):
    """What the reader needs from a store: whole objects and the names under a prefix."""

    def get(self, key: str) -> bytes | None: ...

    def children(self, prefix: str) -> list[str]: ...


class StoreObjects:
    """:class:`Objects` over a :class:`SyncStore` (for the CLI and worker threads)."""

    def __init__(self, store: SyncStore):
        self.store = store

    def get(self, key: str) -> bytes | None:
        try:
            return self.store.get(key)
        except KeyNotFound:
            return None

    def children(self, prefix: str) -> list[str]:
        try:
            return [e.name for e in self.store.list_dir(prefix)]
        except KeyNotFound:
            return []


class DictObjects:
    """:class:`Objects` over ``{key: bytes}`` (tests, synthesised views)."""

    def __init__(self, objects: dict[str, bytes]):
        self.objects = objects

    def get(self, key: str) -> bytes | None:
        return self.objects.get(key)

    def children(self, prefix: str) -> list[str]:
        start = prefix + "/" if prefix else ""
        return sorted({k[len(start):].split("/")[0] for k in self.objects if k.startswith(start)})


def join(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


def fqn(prefix: str) -> str:
    """Store prefix (``g/h``) -> netCDF group name (``/g/h``)."""
    return "/" + prefix


def is_hidden_attr(name: str) -> bool:
    return name in HIDDEN_ATTRS or name.lower().startswith("_nczarr_")


def _fits(values: list[int], lo: int, hi: int) -> bool:
    return all(lo <= v <= hi for v in values)


def infer_type(value: Any) -> str:
    """The type netCDF-C 4.10 gives an attribute with no NCZarr type (zutil.c:604-695)."""
    first = value[0] if isinstance(value, list) and value else value
    if isinstance(value, list) and any(isinstance(v, (list, dict)) or v is None for v in value):
        return "char"
    if isinstance(first, bool):
        return "ubyte"
    if isinstance(first, int):
        ints = [int(v) for v in (value if isinstance(value, list) else [value]) if isinstance(v, (int, float))]
        for nctype, lo, hi in (("int", -(2**31), 2**31 - 1), ("uint", 0, 2**32 - 1),
                               ("int64", -(2**63), 2**63 - 1), ("uint64", 0, 2**64 - 1)):
            if _fits(ints, lo, hi):
                return nctype
        return "double"
    if isinstance(first, float):
        return "double"
    return "char"


def _number(v: Any) -> Any:
    if isinstance(v, str) and v.lower() in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[v.lower()]
    if isinstance(v, bool):
        return int(v)
    return v


def attr_value(nctype: str, raw: Any) -> Any:
    """The value of an attribute of ``nctype``: a str for char, else a list."""
    if nctype == "char":
        if isinstance(raw, str):
            return raw
        if isinstance(raw, list) and raw and all(isinstance(s, str) for s in raw) and len(raw) == 1:
            return raw[0]
        return json.dumps(raw)
    values = raw if isinstance(raw, list) else [raw]
    if nctype == "string":
        return [v if isinstance(v, str) else json.dumps(v) for v in values]
    out = []
    for v in values:
        v = _number(v)
        if not isinstance(v, (int, float)):
            raise ValueError(f"{v!r} is not a number")
        if nctype in ("float", "double"):
            out.append(float(v))
        else:
            if isinstance(v, float) and not v.is_integer():
                raise ValueError(f"{v!r} is not an integer")
            out.append(int(v))
    return out


def fill_value(nctype: str | None, raw: Any) -> Any:
    if isinstance(raw, list):  # NCZarr V1 wrote one-element lists
        raw = raw[0] if raw else None
    if raw is None or nctype in (None, "char", "string"):
        return raw
    return _number(raw)


class Reader:
    def __init__(self, objects: Objects):
        self.objects = objects
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.consolidated: dict[str, Any] = {}
        self.v3_consolidated = False
        #: an NCZarr flavor (NCZarr keys and V1 objects are read), set by read()
        self.nczarr = False
        self.v1_names: set[str] = set()
        #: (key, dimension FQN, array length) checked once every group is read
        self.pending_refs: list[tuple[str, str, int]] = []

    def problem(self, key: str, reason: str) -> None:
        self.problems.append(f"{key}: {reason}")

    # -- objects -----------------------------------------------------------------------------

    def raw(self, key: str) -> bytes | None:
        data = self.objects.get(key)
        if data is None and key in self.consolidated:
            return json.dumps(self.consolidated[key]).encode()
        return data

    def json(self, key: str) -> Any:
        """A JSON object, or None if absent or unreadable (recorded as a problem)."""
        data = self.raw(key)
        if data is None:
            return None
        try:
            value = jsontext.loads(data)
        except ValueError as exc:
            self.problem(key, f"not valid JSON ({exc})")
            return None
        if not isinstance(value, dict):
            self.problem(key, "not a JSON object")
            return None
        return value

    def exists(self, key: str) -> bool:
        return self.raw(key) is not None

    def children(self, prefix: str) -> list[str]:
        names = set(self.objects.children(prefix))
        start = prefix + "/" if prefix else ""
        for k in self.consolidated:
            if k.startswith(start):
                names.add(k[len(start):].split("/")[0])
        return sorted(n for n in names if not n.startswith("."))

    # -- detection ---------------------------------------------------------------------------

    def detect(self) -> str:
        zmeta = self.json(".zmetadata")
        if zmeta is not None:
            meta = zmeta.get("metadata")
            if isinstance(meta, dict):
                self.consolidated = meta
            else:
                self.problem(".zmetadata", "no 'metadata' object")
        if self.exists("zarr.json"):
            return "zarr-v3"
        if self.exists(".nczarr"):
            return "V1"
        if nczarr_key("_nczarr_superblock", self.json(".zattrs")) is not None:
            return "V2-ZA"
        zgroup = self.json(".zgroup") or {}
        for k in zgroup:
            if k == "_nczarr_superblock":
                return "V2-LC"
            if k.lower() == "_nczarr_superblock":
                return "V2-UC"
        if self.exists(".zgroup") or self.exists(".zarray") or self.consolidated:
            return "zarr-v2"
        # netCDF-C accepts a store with any .z* key in the tree (ncz_validate); look one level down
        for name in self.objects.children(""):
            if name.startswith((".z", ".ncz")) or any(
                    n.startswith(".z") for n in self.objects.children(name)):
                return "zarr-v2"
        raise InvalidArgument("not a Zarr or NCZarr store: no .zgroup, .zarray, .zmetadata, zarr.json or .nczarr at the root")

    # -- reading -----------------------------------------------------------------------------

    def read(self) -> Dataset:
        flavor = self.detect()
        self.nczarr = flavor.startswith("V")
        root = Group("", "/")
        self.root = root
        self.anon: dict[int, Dimension] = {}
        if flavor == "zarr-v3":
            node = self.json("zarr.json") or {}
            # a root with consolidated metadata: views write a .zmetadata of their own
            self.v3_consolidated = isinstance(node.get("consolidated_metadata"), dict)
            if node.get("node_type") == "array":
                self.problem("zarr.json", "the root is an array, not a group (netCDF shows an empty dataset)")
            else:
                self.read_group_v3("", root, node)
        else:
            if not self.exists(".zgroup") and self.exists(".zarray"):
                self.problem(".zarray", "the root is an array, not a group (netCDF shows an empty dataset)")
            else:
                self.read_group("", root)
        if flavor == "V1" and (".nczarray" in self.v1_names or ".nczattrs" in self.v1_names):
            flavor = "V1-dev"
        return Dataset(root, flavor, consolidated=bool(self.consolidated) or self.v3_consolidated,
                       problems=self.problems, notes=self.notes)

    def group_meta(self, prefix: str) -> tuple[dict, dict, dict | None]:
        """(.zgroup, .zattrs, NCZarr group dict or None)."""
        zgroup = self.json(join(prefix, ".zgroup")) or {}
        zattrs = self.json(join(prefix, ".zattrs")) or {}
        ncz = self.json(join(prefix, ".nczgroup")) if self.nczarr else None
        if ncz is not None:
            self.v1_names.add(".nczgroup")
        else:
            ncz = nczarr_key("_nczarr_group", zattrs, zgroup)
        return zgroup, zattrs, ncz if isinstance(ncz, dict) else None

    def attr_types(self, prefix: str, zattrs: dict) -> dict:
        types = None
        for name in (".nczattrs", ".nczattr"):
            v1 = self.json(join(prefix, name)) if self.nczarr else None
            if v1 is not None:
                self.v1_names.add(name)
                types = v1.get("types")
                break
        if types is None:
            holder = nczarr_key("_nczarr_attr", zattrs) or nczarr_key("_nczarr_attrs", zattrs) or {}
            types = alias(holder, "types", "attribute_types") if isinstance(holder, dict) else None
        return types if isinstance(types, dict) else {}

    def attributes(self, key: str, zattrs: dict, types: dict, var_type: str | None = None) -> list[Attribute]:
        out = []
        for name, raw in zattrs.items():
            if is_hidden_attr(name):
                continue
            t = types.get(name)
            if t is not None and str(t).upper().startswith("|J"):
                self.problem(key, f"attribute {name!r} typed {t} (JSON), which netCDF-C refuses on a user attribute")
                t = None
            nctype = attr_type(t) if t is not None else None
            if name == "_FillValue" and t is None:
                nctype = var_type  # netCDF-C types _FillValue as its variable
            if t is not None and nctype is None:
                self.problem(key, f"attribute {name!r} has unknown type {t!r}")
            inferred = nctype is None
            if nctype is None:
                if isinstance(raw, list) and not raw:
                    self.problem(key, f"attribute {name!r} is an empty list (netCDF-C fails on it)")
                    continue
                nctype = infer_type(raw)
            try:
                out.append(Attribute(name, nctype, attr_value(nctype, raw), raw if inferred else None))
            except ValueError as exc:
                if name == "_FillValue" and t is None:  # e.g. xarray's base64 fill for Zarr v3
                    self.notes.append(f"{key}: _FillValue {raw!r} is not a {nctype}; shown as text")
                    out.append(Attribute(name, infer_type(raw), attr_value(infer_type(raw), raw), raw))
                else:
                    self.problem(key, f"attribute {name!r} is not a valid {nctype}: {exc}")
        return out

    def read_group(self, prefix: str, group: Group) -> None:
        zgroup, zattrs, ncz = self.group_meta(prefix)
        gkey = join(prefix, ".zgroup")
        if self.exists(gkey) and zgroup.get("zarr_format") != 2:
            self.problem(gkey, f"zarr_format is {zgroup.get('zarr_format')!r}, not 2")
        group.attributes = self.attributes(join(prefix, ".zattrs"), zattrs, self.attr_types(prefix, zattrs))
        listed = self.children(prefix)
        arrays = [n for n in listed if self.exists(join(join(prefix, n), ".zarray"))]
        groups = [n for n in listed if self.exists(join(join(prefix, n), ".zgroup")) and n not in arrays]
        if self.nczarr and ncz is None:
            self.problem(gkey, "NCZarr dataset but the group has no _nczarr_group (netCDF-C shows it as pure Zarr or empty)")
        if ncz is not None:
            dims = alias(ncz, "dims", "dimensions")
            for name, spec in dim_items(dims):
                size, unlimited = dim_spec(spec)
                if size is None:
                    self.problem(gkey, f"dimension {name!r} has no valid size ({spec!r})")
                    continue
                group.dims.append(Dimension(name, size, unlimited))
            if dims is not None and not isinstance(dims, dict):
                self.problem(gkey, "_nczarr_group dimensions must be an object {name: size}")
            arrays = self.members(gkey, alias(ncz, "vars", "arrays"), arrays, "array")
            groups = self.members(gkey, alias(ncz, "groups"), groups, "group")
        for name in groups:
            sub = Group(name, fqn(join(prefix, name)))
            group.groups.append(sub)
        for name in arrays:
            var = self.read_array(join(prefix, name), group)
            if var is not None:
                group.variables.append(var)
        for sub in group.groups:
            self.read_group(sub.path[1:], sub)

    def members(self, key: str, declared: Any, found: list[str], kind: str) -> list[str]:
        if not isinstance(declared, list) or not all(isinstance(n, str) for n in declared):
            self.problem(key, f"_nczarr_group has no list of {kind}s")
            return found
        missing = [n for n in declared if n not in found]
        extra = [n for n in found if n not in declared]
        if missing:
            self.problem(key, f"_nczarr_group lists {kind}s that do not exist: {', '.join(missing)}")
        if extra:
            self.problem(key, f"{kind}s not listed in _nczarr_group (netCDF-C does not show them): {', '.join(extra)}")
        return [n for n in declared if n in found]

    def read_array(self, prefix: str, group: Group) -> Variable | None:
        akey = join(prefix, ".zarray")
        zarray = self.json(akey)
        if zarray is None:
            return None
        zattrs = self.json(join(prefix, ".zattrs")) or {}
        name = prefix.rpartition("/")[2]
        shape, chunks = zarray.get("shape"), zarray.get("chunks")
        if not _int_list(shape) or not _int_list(chunks) or len(shape) != len(chunks):
            self.problem(akey, "shape and chunks must be lists of integers of the same length")
            return None
        errors = [e for e in check_zarray({k: v for k, v in zarray.items() if not k.lower().startswith("_nczarr")})
                  if not e.startswith(("compressor id", "filter id", "dtype", "fill_value", "zarr_format"))]
        if errors:  # unknown codec ids, dtypes and fills still show the array (readers then fail on it)
            self.problems.extend(f"{akey}: {e}" for e in errors)
            return None
        nctype, big = nctype_of_dtype(zarray.get("dtype"), self.nczarr)
        if nctype is None:
            self.notes.append(f"{akey}: dtype {zarray.get('dtype')!r} has no netCDF type")
        var = Variable(
            name, nctype, str(zarray.get("dtype")), list(shape), list(chunks), [],
            fill_value=fill_value(nctype, zarray.get("fill_value")),
            order=zarray.get("order", "C"), big_endian=big,
            dimension_separator=zarray.get("dimension_separator") or ".",
            compressor=zarray.get("compressor"), filters=list(zarray.get("filters") or []),
        )
        var.attributes = self.attributes(join(prefix, ".zattrs"), zattrs, self.attr_types(prefix, zattrs), nctype)
        ncz = None
        if self.nczarr:
            for v1 in (".nczarray", ".nczvar"):
                ncz = self.json(join(prefix, v1))
                if ncz is not None:
                    self.v1_names.add(v1)
                    break
            if ncz is None:
                ncz = nczarr_key("_nczarr_array", zattrs, zarray)
            if not isinstance(ncz, dict):
                self.problem(akey, "NCZarr dataset but the array has no _nczarr_array")
                ncz = None
        if ncz is not None:
            self.nczarr_dims(akey, var, ncz)
        else:
            self.pure_dims(akey, var, group, zattrs.get("_ARRAY_DIMENSIONS"))
        return var

    def nczarr_dims(self, key: str, var: Variable, ncz: dict) -> None:
        refs = alias(ncz, "dimrefs", "dimension_references")
        storage = alias(ncz, "storage")
        var.scalar = bool(alias(ncz, "scalar")) or storage == "scalar"
        if var.scalar:
            if var.shape not in ([1], []):
                self.problem(key, f"scalar array with shape {var.shape} (must be [1])")
            return
        if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
            self.problem(key, "_nczarr_array has no list of dimension references")
            refs = []
        if len(refs) != len(var.shape):
            self.problem(key, f"{len(refs)} dimension references for an array of rank {len(var.shape)}")
            return
        for ref, size in zip(refs, var.shape):
            ref = ref if ref.startswith("/") else "/" + ref
            self.pending_refs.append((key, ref, size))
            var.dimrefs.append(ref)

    def pure_dims(self, key: str, var: Variable, group: Group, names: Any) -> None:
        if var.shape == []:
            var.scalar = True
            return
        if isinstance(names, list) and len(names) == len(var.shape) and all(isinstance(n, str) for n in names):
            clash = [n for n, s in zip(names, var.shape) if group.dim(n) and group.dim(n).size != s]
            if not clash:
                for n, s in zip(names, var.shape):
                    if group.dim(n) is None:
                        group.dims.append(Dimension(n, s))
                    var.dimrefs.append(f"{group.path.rstrip('/')}/{n}")
                return
            self.problem(key, f"_ARRAY_DIMENSIONS {clash} clash with a same-named dimension of another size")
        elif names is not None:
            self.problem(key, f"_ARRAY_DIMENSIONS {names!r} does not name one dimension per axis")
        for s in var.shape:
            dim = self.anon.get(s)
            if dim is None:
                dim = self.anon[s] = Dimension(f"_Anonymous_Dim_{s}", s)
                self.root.dims.append(dim)
            var.dimrefs.append(f"/{dim.name}")

    # -- Zarr v3 -----------------------------------------------------------------------------

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
                g = Group(name, fqn(child))
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
        node = {**node, "codecs": [c if isinstance(c, dict) else {"name": c} for c in node["codecs"]]}
        shape = node.get("shape")
        grid = node.get("chunk_grid") or {}
        chunks = (grid.get("configuration") or {}).get("chunk_shape")
        if not _int_list(shape) or not _int_list(chunks) or len(shape) != len(chunks):
            self.problem(key, "shape and chunk_grid chunk_shape must be lists of integers of the same length")
            return None
        dtype = node.get("data_type")
        config = {}
        if isinstance(dtype, dict):
            dtype, config = dtype.get("name"), dict(dtype.get("configuration") or {})
        nctype = V3_TYPES.get(dtype) if isinstance(dtype, str) else None
        if dtype == "null_terminated_bytes" and config.get("length_bytes") == 1:
            nctype = "char"  # as S1 in Zarr v2: what xarray writes for netCDF char variables
        if nctype is None:
            self.notes.append(f"{key}: data_type {dtype!r} has no netCDF type")
        codecs = node.get("codecs") or []
        big = any(isinstance(c, dict) and c.get("name") == "bytes"
                  and (c.get("configuration") or {}).get("endian") == "big" for c in codecs)
        enc = node.get("chunk_key_encoding") or {}
        sep = (enc.get("configuration") or {}).get("separator", "/" if enc.get("name", "default") == "default" else ".")
        var = Variable(prefix.rpartition("/")[2], nctype, str(dtype), list(shape), list(chunks), [],
                       fill_value=fill_value(nctype, node.get("fill_value")), big_endian=big,
                       dimension_separator=sep, codecs=list(codecs), dtype_config=config)
        var.attributes = self.attributes(key, node.get("attributes") or {}, {}, nctype)
        names = node.get("dimension_names")
        if isinstance(names, list) and any(n is None for n in names):
            names = None
        self.pure_dims(key, var, group, names)
        return var


def _int_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v)


def read_dataset(objects: Objects) -> Dataset:
    """The dataset model of a store; raises InvalidArgument if it holds no Zarr at all."""
    reader = Reader(objects)
    ds = reader.read()
    for key, ref, size in reader.pending_refs:
        dim = ds.find_dim(ref)
        if dim is None:
            ds.problems.append(f"{key}: dimension reference {ref} names no declared dimension")
        elif dim.size != size and not dim.unlimited:
            ds.problems.append(f"{key}: dimension {ref} has size {dim.size}, the array {size}")
    return ds
