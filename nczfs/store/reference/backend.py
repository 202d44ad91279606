"""The reference backend's registry entry: a kerchunk/fsspec reference set (``.json``,
``.parq``, ``reference://``, ``#mode=refs``), its ``-o`` rows, and what tells its sources apart in
a shared ``--cache-dir``: the set, and how its s3:// targets are reached (S3's identity)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nczfs.store.registry import Backend, register
from nczfs.store.objstore.options import s3_identity
from nczfs.store.reference.options import ReferenceOptions

if TYPE_CHECKING:
    from nczfs.store.base import SyncStore
    from nczfs.store.opening import Opening


def _reference(opening: Opening) -> SyncStore:
    from nczfs.store.reference.store import ReferenceStore

    options = ReferenceOptions.of(opening)
    # s3:// targets are read with the mount's S3 options
    return ReferenceStore(options.location, allow_roots=options.allow_roots, mountpoint=options.mountpoint,
                          s3=options.s3)


REFERENCE = register(Backend("reference", _reference, schemes=("reference",), modes=("refs",), noun="a reference set",
                             suffixes=(".json", ".parq", ".parquet"), rows=ReferenceOptions.rows,
                             one_file=True, identity=s3_identity, forms="a reference set (.json, .parq)"))
