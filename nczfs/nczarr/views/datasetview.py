"""The view of one dataset: its metadata objects as the view shows them, and where each key
the view shows lies in the store (chunks of Zarr v3, sharded, recoded and string arrays)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from nczfs.nczarr.chunks.recode import Recode
from nczfs.nczarr.chunks.sharding import ShardedArray
from nczfs.nczarr.metadata.validate import is_metadata_key
from nczfs.nczarr.views.fillchunks import FillChunks
from nczfs.store.keys import parent_of
from nczfs.toolbox.errors import KeyNotFound
from nczfs.store.values import ABSENT, ObjectInfo

#: the chunk "prefix" of a zero-rank Zarr v3 array: its one chunk is "c" (shown as "0")
ZERO_RANK = "<zero-rank>"


def stored_version(versions: dict[str, str], key: str) -> str | None:
    """The ``if_version`` of a write back of stored ``key``, by the ``versions`` a view was built
    from (None: not known), or ABSENT where it found none."""
    return (versions[key] or None) if key in versions else ABSENT


@dataclass
class DatasetView:
    root: str
    flavor: str
    built: float
    #: full keys of the view's metadata objects -> bytes
    objects: dict[str, bytes] = field(default_factory=dict)
    hidden: set[str] = field(default_factory=set)
    #: full array prefix -> where its chunks live below it in the store (Zarr v3: "c/" or "c.")
    v3: dict[str, str] = field(default_factory=dict)
    mtime_ns: int = 0
    #: no arrays, groups or attributes yet (a dataset being created): any flavor may be written
    empty: bool = False
    #: full array prefix -> how its chunks are shown when the view's reader cannot take them as stored
    recodes: dict[str, Recode] = field(default_factory=dict)
    #: full array prefix -> a sharded Zarr v3 array, shown by its innermost chunks
    sharded: dict[str, ShardedArray] = field(default_factory=dict)
    #: full array prefix -> (what precedes the stored chunk indices, their separator): strings shown
    #: as chars along one more axis of one chunk, chunk ``i.j.0`` being the stored ``i.j``
    char_axis: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: full array prefix -> the chunks the view makes where the store has none (a chunk never
    #: written would read otherwise through the view: fillchunks.py)
    fills: dict[str, FillChunks] = field(default_factory=dict)
    #: full key of each stored metadata object the view was built from -> its version then ("":
    #: not known); kept only where the store checks writes (a write back names it: ViewWrites)
    versions: dict[str, str] = field(default_factory=dict)

    def info(self, key: str) -> ObjectInfo:
        data = self.objects[key]
        return ObjectInfo(key, len(data), self.mtime_ns, hashlib.md5(data).hexdigest())

    def stored_version(self, key: str) -> str | None:
        """The ``if_version`` of a write back of stored ``key``: the version the view was built
        from (None: not known), or ABSENT where it found none."""
        return stored_version(self.versions, key)

    def array_of(self, key: str) -> str | None:
        """The hidden, v3, recoded (...) array ``key`` lies in (or is), if any."""
        k = key
        while k:
            if k in self.hidden or k in self.v3 or k in self.recodes or k in self.sharded or k in self.char_axis \
                    or k in self.fills:
                return k
            k = parent_of(k)
        return None

    def recode_of(self, key: str) -> Recode | None:
        """How the chunk ``key`` is shown, if its array's chunks are recoded."""
        array = self.array_of(key)
        if array is None or array == key or array not in self.recodes or is_metadata_key(key):
            return None
        return self.recodes[array]

    def to_store(self, key: str) -> str | None:
        """The store key behind view key ``key`` (None: not in the view, or synthesised)."""
        if key in self.objects:
            return None
        array = self.array_of(key)
        if array is None:
            return None if is_metadata_key(key) else key
        if key == array:
            return None if array in self.hidden else key
        rest = key[len(array) + 1:]
        if array in self.hidden or array in self.sharded or is_metadata_key(rest):
            return None
        if array in self.char_axis:
            return self._char_axis_key(array, rest)
        if array not in self.v3:
            return key
        if self.v3[array] == ZERO_RANK:  # a zero-rank v3 array's one chunk "c", shown as "0"
            return f"{array}/c" if rest == "0" else None
        return f"{array}/{self.v3[array]}{rest}"

    def _char_axis_key(self, array: str, rest: str) -> str | None:
        """The stored chunk ``i.j`` behind chunk ``i.j.0`` of a string array shown as chars."""
        prefix, separator = self.char_axis[array]
        parts = rest.split(".")
        if len(parts) < 2 or parts[-1] != "0" or not all(p.isdigit() for p in parts):
            return None
        if prefix == ZERO_RANK:
            return f"{array}/c" if parts[:-1] == ["0"] else None
        return f"{array}/{prefix}{separator.join(parts[:-1])}"


def fills_at(v: DatasetView, key: str) -> tuple[FillChunks, str] | None:
    """The chunks ``v`` makes for the array ``key`` is or lies in, and ``key``'s path below that
    array ("": the array's own folder); None where ``v`` makes none."""
    array = v.array_of(key)
    made = v.fills.get(array) if array is not None else None
    if made is None or array is None:
        return None
    return made, key[len(array) + 1:] if key != array else ""


def made_fill(v: DatasetView, key: str) -> FillChunks | None:
    """The chunks ``v`` makes for the array whose chunk ``key`` would be (None: no such chunk)."""
    at = fills_at(v, key)
    return at[0] if at is not None and at[1] and at[0].holds(at[1]) else None


def shard_of(v: DatasetView, key: str) -> tuple[ShardedArray, str] | None:
    """The sharded array whose view chunk ``key`` is, and the chunk's name (None if not one)."""
    array = parent_of(key)
    if array in v.sharded and not is_metadata_key(key):
        return v.sharded[array], key[len(array) + 1:]
    return None


def shard_at(v: DatasetView, key: str) -> tuple[ShardedArray, str]:
    """:func:`shard_of` for a key the caller found to be a sharded array's chunk (KeyNotFound:
    it is none, the view changed)."""
    found = shard_of(v, key)
    if found is None:
        raise KeyNotFound(key)
    return found
