"""What a mount's options ask of the zip backend (:class:`ZipOptions`) and its ``-o`` rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from nczfs.toolbox.optionvalues import one_of
from nczfs.store.options import OVERWRITE, OptionRow, to, valued
from nczfs.store.zip.layout import LAYOUTS

if TYPE_CHECKING:
    from nczfs.store.opening import Opening


@dataclass(frozen=True)
class ZipOptions:
    """The archive (its path), whether the mount is read-only, the layout of an archive it
    creates (-o zip_layout=) and whether a close replaces only what it opened (-o overwrite=)."""

    location: str
    read_only: bool = False
    #: "netcdf" (default) or "flat" (zarr-python's)
    layout: str | None = None
    overwrite: str = "checked"

    rows: ClassVar[tuple[OptionRow, ...]] = (
        OptionRow("zip_layout=netcdf|flat", "zip: the layout of a new archive (default netcdf)",
                  {"zip_layout": (valued, to("zip_layout", lambda key, value: one_of(
                      value, LAYOUTS, f"must be one of {', '.join(LAYOUTS)}")))}),
        OVERWRITE,
    )

    @classmethod
    def of(cls, opening: Opening) -> ZipOptions:
        return cls(opening.source.location, opening.read_only, opening.options.get("zip_layout"),
                   opening.options.get("overwrite", "checked"))
