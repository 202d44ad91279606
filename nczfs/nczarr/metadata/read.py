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
from typing import Any, Protocol

from nczfs.toolbox.errors import InvalidArgument, KeyNotFound
from nczfs.nczarr.metadata import jsontext
from nczfs.nczarr.metadata.attrvalues import fill_value, int_list
from nczfs.nczarr.metadata.model import Dataset, Dimension, Group, Variable
from nczfs.nczarr.metadata.read_attrs import AttributeReading
from nczfs.nczarr.metadata.read_v3 import V3Reading
from nczfs.nczarr.metadata.spelling import alias, dim_items, dim_spec, nctype_of_zarray, nczarr_key
from nczfs.nczarr.metadata.validate import check_zarray
from nczfs.store.base import SyncStore
from nczfs.store.keys import join


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


def fqn(prefix: str) -> str:
    """Store prefix (``g/h``) -> netCDF group name (``/g/h``)."""
    return "/" + prefix


class Reader(AttributeReading, V3Reading):
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
        self._read_consolidated()
        if self.exists("zarr.json"):
            return "zarr-v3"
        if self.exists(".nczarr"):
            return "V1"
        flavor = self._superblock_flavor()
        if flavor is not None:
            return flavor
        if self.exists(".zgroup") or self.exists(".zarray") or self.consolidated or self._zarr_below():
            return "zarr-v2"
        raise InvalidArgument("not a Zarr or NCZarr store: no .zgroup, .zarray, .zmetadata, zarr.json or .nczarr at the root")

    def _read_consolidated(self) -> None:
        zmeta = self.json(".zmetadata")
        if zmeta is None:
            return
        meta = zmeta.get("metadata")
        if isinstance(meta, dict):
            self.consolidated = meta
        else:
            self.problem(".zmetadata", "no 'metadata' object")

    def _superblock_flavor(self) -> str | None:
        """``V2-ZA``, ``V2-LC`` or ``V2-UC`` by where and how the NCZarr superblock is spelled."""
        if nczarr_key("_nczarr_superblock", self.json(".zattrs")) is not None:
            return "V2-ZA"
        for k in self.json(".zgroup") or {}:
            if k == "_nczarr_superblock":
                return "V2-LC"
            if k.lower() == "_nczarr_superblock":
                return "V2-UC"
        return None

    def _zarr_below(self) -> bool:
        """netCDF-C accepts a store with any .z* key in the tree (ncz_validate); look one level down."""
        return any(name.startswith((".z", ".ncz")) or any(n.startswith(".z") for n in self.objects.children(name))
                   for name in self.objects.children(""))

    # -- reading -----------------------------------------------------------------------------

    def read(self) -> Dataset:
        flavor = self.detect()
        self.nczarr = flavor.startswith("V")
        root = Group("", "/")
        self.root = root
        self.anon: dict[int, Dimension] = {}
        if flavor == "zarr-v3":
            self.read_root_v3(root)
        elif not self.exists(".zgroup") and self.exists(".zarray"):
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
            self.group_dims(gkey, group, alias(ncz, "dims", "dimensions"))
            arrays = self.members(gkey, alias(ncz, "vars", "arrays"), arrays, "array")
            groups = self.members(gkey, alias(ncz, "groups"), groups, "group")
        group.groups.extend(Group(name, fqn(join(prefix, name))) for name in groups)
        for name in arrays:
            var = self.read_array(join(prefix, name), group)
            if var is not None:
                group.variables.append(var)
        for sub in group.groups:
            self.read_group(sub.path[1:], sub)

    def group_dims(self, gkey: str, group: Group, dims: Any) -> None:
        for name, spec in dim_items(dims):
            size, unlimited = dim_spec(spec)
            if size is None:
                self.problem(gkey, f"dimension {name!r} has no valid size ({spec!r})")
                continue
            group.dims.append(Dimension(name, size, unlimited))
        if dims is not None and not isinstance(dims, dict):
            self.problem(gkey, "_nczarr_group dimensions must be an object {name: size}")

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
        if not self._usable_zarray(akey, zarray):
            return None
        nctype, big = nctype_of_zarray(zarray, self.nczarr)
        if nctype is None:
            self.notes.append(f"{akey}: dtype {zarray.get('dtype')!r} has no netCDF type")
        var = Variable(
            prefix.rpartition("/")[2], nctype, str(zarray.get("dtype")), list(zarray["shape"]),
            list(zarray["chunks"]), [],
            fill_value=fill_value(nctype, zarray.get("fill_value")),
            order=zarray.get("order", "C"), big_endian=big,
            dimension_separator=zarray.get("dimension_separator") or ".",
            compressor=zarray.get("compressor"), filters=list(zarray.get("filters") or []),
        )
        var.attributes = self.attributes(join(prefix, ".zattrs"), zattrs, self.attr_types(prefix, zattrs), nctype)
        ncz = self.nczarr_array(akey, prefix, zattrs, zarray) if self.nczarr else None
        if ncz is not None:
            self.nczarr_dims(akey, var, ncz)
        else:
            self.pure_dims(akey, var, group, zattrs.get("_ARRAY_DIMENSIONS"))
        return var

    def _usable_zarray(self, akey: str, zarray: dict) -> bool:
        """Can an array be shown from ``zarray`` (what is wrong recorded as a problem)?"""
        shape, chunks = zarray.get("shape"), zarray.get("chunks")
        if not int_list(shape) or not int_list(chunks) or len(shape) != len(chunks):
            self.problem(akey, "shape and chunks must be lists of integers of the same length")
            return False
        errors = [e for e in check_zarray({k: v for k, v in zarray.items() if not k.lower().startswith("_nczarr")})
                  if not e.startswith(("compressor id", "filter id", "dtype", "fill_value", "zarr_format"))]
        # unknown codec ids, dtypes and fills still show the array (readers then fail on it)
        self.problems.extend(f"{akey}: {e}" for e in errors)
        return not errors

    def nczarr_array(self, akey: str, prefix: str, zattrs: dict, zarray: dict) -> dict | None:
        """The array's NCZarr metadata: a V1 object, or the key in any placement."""
        ncz = None
        for v1 in (".nczarray", ".nczvar"):
            ncz = self.json(join(prefix, v1))
            if ncz is not None:
                self.v1_names.add(v1)
                break
        if ncz is None:
            ncz = nczarr_key("_nczarr_array", zattrs, zarray)
        if not isinstance(ncz, dict):
            self.problem(akey, "NCZarr dataset but the array has no _nczarr_array")
            return None
        return ncz

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
            var.named_dims = names == []
            return
        if isinstance(names, list) and len(names) == len(var.shape) and all(isinstance(n, str) for n in names):
            clash = [n for n, s in zip(names, var.shape) if (d := group.dim(n)) and d.size != s]
            if not clash:
                var.named_dims = True
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
