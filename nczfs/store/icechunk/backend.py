"""The Icechunk backend's registry entry: ``icechunk:///path`` and ``icechunk+s3://bucket/prefix``,
its ``-o`` rows (its own refused on other sources), and that a tag or a snapshot mounts read-only.
The client library is imported when a mount opens one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nczfs.store.registry import Backend, register
from nczfs.store.icechunk.options import IcechunkOptions, read_only_point
from nczfs.store.icechunk.sources import locate_icechunk

if TYPE_CHECKING:
    from nczfs.store.base import SyncStore
    from nczfs.store.opening import Opening


def _icechunk(opening: Opening) -> SyncStore:
    from nczfs.store.icechunk.repository import open_icechunk

    return open_icechunk(IcechunkOptions.of(opening))


ICECHUNK = register(Backend("icechunk", _icechunk, schemes=("icechunk", "icechunk+s3"), locate=locate_icechunk,
                            noun="Icechunk sources", rows=IcechunkOptions.rows,
                            read_only_if=read_only_point,
                            forms="icechunk:///PATH or icechunk+s3://BUCKET/PREFIX (an Icechunk repository)"))
