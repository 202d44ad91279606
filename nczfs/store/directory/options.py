"""What a mount's options ask of the directory backend (:class:`DirectoryOptions`) and its ``-o`` rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from nczfs.store.options import OVERWRITE, OptionRow, given

if TYPE_CHECKING:
    from nczfs.store.opening import Opening


@dataclass(frozen=True)
class DirectoryOptions:
    """The directory (its path), whether the mount is read-only and whether a close replaces only
    the version of a file it opened, against another program changing the files (-o overwrite=)."""

    location: str
    read_only: bool = False
    #: "checked" (default) or "last_writer_wins"
    overwrite: str = "checked"

    rows: ClassVar[tuple[OptionRow, ...]] = (OVERWRITE,)

    @classmethod
    def of(cls, opening: Opening) -> DirectoryOptions:
        return given(cls, opening.options, location=opening.source.location, read_only=opening.read_only)
