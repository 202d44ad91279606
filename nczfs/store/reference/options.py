"""What a mount's options ask of the reference backend (:class:`ReferenceOptions`) and its ``-o``
rows: where local targets may lie, and S3's options for its s3:// targets."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from nczfs.store.options import Flag, OptionRow, nonempty
from nczfs.store.objstore.options import S3Options

if TYPE_CHECKING:
    from nczfs.store.opening import Opening


def _allow_root(out: dict, key: str, value: str) -> None:
    out["allow_roots"] = (*out.get("allow_roots", ()), os.path.abspath(value))


@dataclass(frozen=True)
class ReferenceOptions:
    """The reference set (its path), the directories its local targets may lie in (-o allow_root=,
    --allow-root; default the set's own), the mount point (no target may lie inside it) and the S3
    options its s3:// targets are read with."""

    location: str
    mountpoint: str = ""
    allow_roots: tuple[str, ...] = ()
    s3: S3Options = S3Options()

    rows: ClassVar[tuple[OptionRow, ...]] = (
        OptionRow("allow_root=DIR", "reference sets: local targets may lie below DIR (--allow-root)",
                  {"allow_root": (nonempty, _allow_root)},
                  flags=(Flag("--allow-root", "reference sets: local targets may lie below DIR (repeatable; default: "
                                              "the set's own directory)", kind="repeat", metavar="DIR"),)),
        *S3Options.rows,
    )

    @classmethod
    def of(cls, opening: Opening) -> ReferenceOptions:
        return cls(opening.source.location, opening.mountpoint, opening.options.get("allow_roots", ()),
                   S3Options.of(opening))
