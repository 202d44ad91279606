"""Attributes read into the dataset model: the part of :class:`nczfs.nczarr.metadata.read.Reader` that
types each attribute, by the NCZarr type written for it (``_nczarr_attr``, V1's ``.nczattr``),
as netCDF-C types an untyped ``_FillValue`` (as its variable), or from its JSON value; xarray's
Zarr v3 ``_FillValue`` (base64 of the value's bytes) decoded (:func:`nczfs.nczarr.metadata.masks.decode_fill`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nczfs.nczarr.metadata.attrvalues import attr_value, infer_type, is_hidden_attr
from nczfs.nczarr.metadata.masks import decode_fill
from nczfs.nczarr.metadata.model import Attribute
from nczfs.nczarr.metadata.spelling import alias, attr_type, nczarr_key
from nczfs.store.keys import join


class AttributeReading:
    """Mixed into Reader, whose json/problem/notes/nczarr/v1_names it uses."""

    if TYPE_CHECKING:  # what Reader (read.py) gives the part, declared for the type checker alone
        notes: list[str]
        nczarr: bool
        v1_names: set[str]

        def json(self, key: str) -> Any: ...
        def problem(self, key: str, reason: str) -> None: ...

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
            t, nctype = self._declared_type(key, name, types.get(name), var_type)
            attr = self._attribute(key, name, raw, t, nctype)
            if attr is not None:
                out.append(attr)
        return out

    def _declared_type(self, key: str, name: str, t: Any, var_type: str | None) -> tuple[Any, str | None]:
        """(the NCZarr type written for attribute ``name``, its netCDF type), either None."""
        if t is not None and str(t).upper().startswith("|J"):
            self.problem(key, f"attribute {name!r} typed {t} (JSON), which netCDF-C refuses on a user attribute")
            t = None
        nctype = attr_type(t) if t is not None else None
        if name == "_FillValue" and t is None:
            nctype = var_type  # netCDF-C types _FillValue as its variable
        if t is not None and nctype is None:
            self.problem(key, f"attribute {name!r} has unknown type {t!r}")
        return t, nctype

    def _attribute(self, key: str, name: str, raw: Any, t: Any, nctype: str | None) -> Attribute | None:
        inferred = nctype is None
        if name == "_FillValue" and t is None and nctype and (value := decode_fill(raw, nctype)) is not None:
            return Attribute(name, nctype, value, raw)  # xarray's Zarr v3 fill: base64 of the value's bytes
        if nctype is None:
            if isinstance(raw, list) and not raw:
                self.problem(key, f"attribute {name!r} is an empty list (netCDF-C fails on it)")
                return None
            nctype = infer_type(raw)
        try:
            return Attribute(name, nctype, attr_value(nctype, raw), raw if inferred else None)
        except ValueError as exc:
            if name == "_FillValue" and t is None:  # e.g. xarray's base64 fill for Zarr v3
                self.notes.append(f"{key}: _FillValue {raw!r} is not a {nctype}; shown as text")
                return Attribute(name, infer_type(raw), attr_value(infer_type(raw), raw), raw)
            self.problem(key, f"attribute {name!r} is not a valid {nctype}: {exc}")
            return None

