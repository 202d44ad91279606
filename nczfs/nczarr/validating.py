"""ValidatingStore: metadata objects as their writer meant them, checked before they reach the store.

netCDF-C rewrites a metadata object in place, without O_TRUNC: a shorter new object leaves the
old one's last bytes after it (valid JSON, then a stale tail). Such content is stored as the JSON
its writer meant, in every mode (``off`` too): netCDF-C's own reader ignores the tail, every
other reader would fail on it.

Every ``set`` of a metadata object (``.zgroup``, ``.zarray``, ``.zattrs``, ``.zmetadata``,
``zarr.json``, the NCZarr V1 objects), and every ``rename``/``copy`` onto such a name, is
checked first: the object alone (:func:`nczfs.nczarr.metadata.validate.check_object`), then its
dimension references against the dimensions its groups declare in the store. Other names
(chunks, ``*.partial``, editor swap files) pass unchecked; a temporary file is checked when
it is renamed onto a metadata name.

``strict``: invalid content raises :class:`~nczfs.toolbox.errors.InvalidArgument` (EINVAL at
close/fsync/rename) naming the key and every reason, and the store is not touched.
``warn``: the reasons are logged and the object is stored. ``off``: nothing is checked.

netCDF-C ignores what close() returns: a refusal at close would be lost on it. So the filesystem
asks :meth:`ValidatingStore.check_content` at every write() of a metadata object, and once the
file holds a whole JSON value that would be refused, that write() fails with the refusal's errno.
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable, TypeVar

from nczfs.toolbox.errors import InvalidArgument, KeyNotFound, NotSupported
from nczfs.nczarr.metadata import jsontext
from nczfs.nczarr.metadata.codecids import codecs_known, numcodecs_ids
from nczfs.nczarr.metadata.spelling import nczarr_key
from nczfs.nczarr.metadata.validate import (
    check_object,
    parse,
    dimension_refs,
    group_dims,
    is_metadata_key,
    stale_tail_prefix,
)
from nczfs.store.base import Store
from nczfs.store.capabilities import check_content, checks_content
from nczfs.store.keys import join, parent_of
from nczfs.store.values import ObjectInfo
from nczfs.store.wrapper import WrapperStore
from nczfs.store.threads import run_blocking

log = logging.getLogger(__name__)
T = TypeVar("T")

class ValidatingStore(WrapperStore):
    #: staging and uploads of objects other than metadata (which set checks)
    passes = ("stage", "open_upload")

    def __init__(self, inner: Store, mode: str = "strict"):
        if mode not in ("warn", "strict", "off"):
            raise ValueError(f"validation mode {mode!r}")
        super().__init__(inner)
        self.mode = mode

    async def _json(self, key: str) -> Any:
        try:
            return jsontext.loads(await self.inner.get(key))
        except (KeyNotFound, ValueError):
            return None

    async def meant(self, key: str, data: bytes) -> bytes:
        """``data`` without the old object's tail a rewrite without O_TRUNC left after its JSON."""
        if parse(data)[1] and data.lstrip()[:1] == b"{":
            try:
                previous = await self.inner.get(key)
            except KeyNotFound:
                previous = None
            head = stale_tail_prefix(data, previous)
            if head is not None:
                log.info("%r: JSON followed by the old object's tail (a rewrite without O_TRUNC): "
                         "stored the JSON, %d bytes of %d", key, len(head), len(data))
                return head
        return data

    async def reasons(self, key: str, data: bytes) -> list[str]:
        """Why ``data`` may not be stored under ``key`` ([] if it may)."""
        if not codecs_known():
            await run_blocking(numcodecs_ids)  # the first check imports numcodecs: not on the trio thread
        errors = check_object(key, data)
        if errors:
            return errors
        return await self.dimension_errors(key, jsontext.loads(data))

    async def dimension_errors(self, key: str, value: Any) -> list[str]:
        """Dimension references of an array must name declared dimensions of matching size.

        Only what the store already declares is checked: a group whose NCZarr metadata is not
        written yet does not make a reference invalid (writers store objects in any order).
        """
        prefix = parent_of(key)
        refs, shape = await self._refs_and_shape(key, value)
        if not refs or not isinstance(shape, list):
            return []
        if len(refs) != len(shape):
            return [f"{len(refs)} dimension references for an array of rank {len(shape)}"]
        root = await self.dataset_root(prefix)
        if root is None:
            return []
        return await self._ref_errors(root, refs, shape)

    async def _refs_and_shape(self, key: str, value: Any) -> tuple[list[str] | None, Any]:
        """The array's dimension references and shape, from ``value`` (object ``key``) and the
        array's other objects in the store."""
        prefix, name = parent_of(key), key.rpartition("/")[2]
        refs = dimension_refs(value)
        if name == ".zarray":
            for other in (".zattrs", ".nczarray", ".nczvar"):
                if refs is None:
                    refs = dimension_refs(await self._json(join(prefix, other)))
            return refs, value.get("shape")
        zarray = await self._json(join(prefix, ".zarray")) if refs else None
        return refs, zarray.get("shape") if isinstance(zarray, dict) else None

    async def _ref_errors(self, root: str, refs: list[str], shape: list) -> list[str]:
        errors = []
        for ref, size in zip(refs, shape):
            gpath, _, dim = ref.rpartition("/")
            gprefix = join(root, gpath.lstrip("/")) if gpath.lstrip("/") else root
            dims = group_dims(*[await self._json(join(gprefix, n)) for n in (".zattrs", ".zgroup", ".nczgroup")])
            if dims is None:
                continue
            if dim not in dims:
                errors.append(f"dimension reference {ref} names no dimension declared in group {gpath or '/'}")
            elif dims[dim][0] != size and not dims[dim][1]:
                errors.append(f"dimension {ref} has size {dims[dim][0]}, the array {size} (axis of shape {shape})")
        return errors

    async def dataset_root(self, prefix: str) -> str | None:
        """The nearest folder at or above ``prefix`` holding an NCZarr superblock (None if none yet).

        Dimension references are relative to it: a mount may hold several datasets.
        """
        parts = prefix.split("/") if prefix else []
        for i in range(len(parts), -1, -1):
            folder = "/".join(parts[:i])
            objects = [await self._json(join(folder, n)) for n in (".zattrs", ".zgroup")]
            if nczarr_key("_nczarr_superblock", *objects) is not None or await self._json(join(folder, ".nczarr")):
                return folder
        return None

    async def check(self, key: str, data: bytes | bytearray | memoryview) -> None:
        if not is_metadata_key(key) or self.mode == "off":
            return
        errors = await self.reasons(key, bytes(data))
        if not errors:
            return
        message = f"{key!r}: invalid metadata: {'; '.join(errors)}"
        if self.mode == "strict":
            log.warning("refused %s", message)
            raise InvalidArgument(message)
        log.warning("stored anyway (validate=warn) %s", message)

    async def set(self, key: str, data: bytes | bytearray | memoryview, if_version: str | None = None) -> ObjectInfo:
        """Stores the JSON its writer meant (:meth:`meant`: the content changes), once checked."""
        if is_metadata_key(key):
            data = await self.meant(key, bytes(data))
            await self.check(key, data)
        return await self.inner.set(key, data, if_version=if_version)

    def _whole(self, key: str) -> bool:
        return is_metadata_key(key)  # checked whole, by set

    async def _write(self, op: str, keys: tuple[str, ...], call: Callable[[], Awaitable[T]],
                     data: bytes | bytearray | memoryview | None = None) -> T:
        """A metadata object is not truncated (it is rewritten whole, through set); one copied,
        renamed or linked onto a metadata name is checked first."""
        if op == "truncate" and is_metadata_key(keys[0]):
            raise NotSupported(f"{keys[0]!r}: metadata is checked whole")
        if op in ("rename", "copy", "link") and is_metadata_key(keys[1]):
            await self.check(keys[1], await self.inner.get(keys[0]))
        return await call()

    def checks_content(self, key: str) -> bool:
        return is_metadata_key(key) or checks_content(self.inner, key)

    async def check_content(self, key: str, data: bytes) -> None:
        """Refuse now what ``set`` would refuse, once ``data`` is a whole JSON value (with or without
        a stale tail); a file still being written is not judged."""
        if is_metadata_key(key):
            data = await self.meant(key, data)
            errors = parse(data)[1]
            # not whole JSON yet (judged at close); but JSON nested too deep never can be valid
            if errors and not any(jsontext.TOO_DEEP in e for e in errors):
                return
            if self.mode == "strict":
                await self.check(key, data)
        await check_content(self.inner, key, data)
