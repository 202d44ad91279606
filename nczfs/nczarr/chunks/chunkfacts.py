"""What arrays' chunks hold that their metadata does not say, found by scanning the chunks: the
longest variable-length string (the fixed width netCDF readers are shown such strings with),
whether nanosecond times are whole microseconds. Views (viewbuild.py) and ``.nc`` files
(ncversions.py) ask; each array is scanned again only when one of its chunks changed."""

from __future__ import annotations

import numpy as np

from nczfs.toolbox.errors import KeyNotFound
from nczfs.nczarr.chunks import decoding
from nczfs.nczarr.chunks.recode import Codecs
from nczfs.nczarr.chunks.v2form import V2Array, v3_to_v2
from nczfs.nczarr.metadata.model import Dataset, Variable
from nczfs.nczarr.metadata.validate import is_metadata_key
from nczfs.store.base import Store
from nczfs.store.keys import join
from nczfs.store.values import ObjectInfo


def _v2(var: Variable, from_v3: bool) -> V2Array | None:
    if not from_v3:
        return V2Array(var.dtype, var.order, var.compressor, var.filters or None, var.dimension_separator)
    got = v3_to_v2(var)
    return None if isinstance(got, str) else got


def vlen_strings(var: Variable, from_v3: bool) -> bool:
    """Is ``var`` an array of variable-length strings (Zarr v3 ``string``, v2 ``|O`` with vlen-utf8)?"""
    v2 = _v2(var, from_v3)
    return var.nctype == "string" and v2 is not None and v2.dtype == "|O"


class ChunkFacts:
    """Scans of the chunks of arrays of ``inner``, kept by array with the chunks' versions."""

    def __init__(self, inner: Store):
        self.inner = inner
        #: array -> (its chunks' versions, what a scan of them found)
        self._scans: dict[str, tuple[tuple, dict]] = {}

    async def of(self, root: str, ds: Dataset, times: bool = True) -> dict[str, dict]:
        """What the chunks of the arrays of the dataset at ``root`` hold, by array path (``g/v``):
        ``maxlen`` of variable-length strings (UTF-8 bytes), ``us_exact`` of nanosecond times
        (Zarr v3; only if ``times``). Sharded arrays are not scanned."""
        out: dict[str, dict] = {}
        from_v3 = ds.flavor == "zarr-v3"
        for g in ds.root.walk():
            for var in g.variables:
                ns = times and from_v3 and var.dtype == "numpy.datetime64" and var.dtype_config.get("unit") == "ns"
                v2 = _v2(var, from_v3)
                if v2 is None or v2.sharding is not None or not (ns or vlen_strings(var, from_v3)):
                    continue
                path = join(g.path.strip("/"), var.name)
                out[path] = await self.scan(join(root, path), Codecs(v2.compressor, tuple(v2.filters or ())), ns)
        return out

    async def _chunks(self, prefix: str) -> list[tuple[str, ObjectInfo]]:
        """Every chunk below ``prefix`` with its version, from the listings (stat where they lack it)."""
        out: list[tuple[str, ObjectInfo]] = []
        try:
            entries = await self.inner.list_dir(prefix)
        except KeyNotFound:
            return out
        for e in entries:
            key = join(prefix, e.name)
            if e.is_dir:
                out.extend(await self._chunks(key))
            elif not is_metadata_key(key):
                out.append((key, e.info if e.info is not None else await self.inner.stat(key)))
        return out

    async def scan(self, array: str, codecs: Codecs, ns: bool) -> dict:
        """The facts of the chunks below ``array`` (``ns``: times; else strings)."""
        chunks = sorted(await self._chunks(array))
        signature = (ns, tuple((k, i.etag, i.size) for k, i in chunks))
        cached = self._scans.get(array)
        if cached is not None and cached[0] == signature:
            return cached[1]
        fact: dict = {"us_exact": True} if ns else {"maxlen": 0}
        for key, info in chunks:
            decoded = await decoding.decode(codecs.decode, await self.inner.get_version(key, None, info.etag or None))
            if ns:
                ints = np.frombuffer(decoded, "<i8")
                fact["us_exact"] &= bool(np.all((ints % 1000 == 0) | (ints == np.iinfo("i8").min)))
            else:
                fact["maxlen"] = max(fact["maxlen"], max((len(str(s).encode()) for s in decoded.ravel()), default=0))
        self._scans[array] = (signature, fact)
        return fact
