"""The versions views showed, kept after the views are replaced.

A view shows each metadata object it rewrites under the MD5 of the shown bytes, a version the
stored object never has. A write, rename or delete through the mount names the version the
client last saw; it is conditioned on the stored version the view that showed that version was
built from (ViewWrites._stored_condition). That view may be gone by then: views are replaced by
a write through the mount (dropped, built again when next asked for) and when older than the
TTL (built again). Every view replaced is kept here, as the versions it showed and the stored
versions it was built from, the last ``SHOWN_BEFORE`` of them; a view replaced at its TTL by one
showing the same objects from the same stored versions is not kept (its replacement answers for
it).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Iterable

from nczfs.nczarr.views.datasetview import DatasetView, stored_version

#: views replaced kept to translate the versions they showed (docs/SEMANTICS.md)
SHOWN_BEFORE = 64


class _NotShown:
    def __repr__(self) -> str:
        return "NOT_SHOWN"


#: no view kept showed that version of that key
NOT_SHOWN = _NotShown()


@dataclass(frozen=True)
class Shown:
    """What one replaced view showed: view key -> shown version; the stored versions it was built
    from (DatasetView.versions)."""

    etags: dict[str, str]
    versions: dict[str, str]

    @classmethod
    def of(cls, v: DatasetView) -> Shown:
        return cls({key: v.info(key).etag for key in v.objects}, v.versions)

    def stored_version(self, target: str) -> str | None:
        """As DatasetView.stored_version."""
        return stored_version(self.versions, target)


class ShownVersions:
    """The last ``keep`` views replaced, newest last."""

    def __init__(self, keep: int = SHOWN_BEFORE):
        self._replaced: collections.deque[Shown] = collections.deque(maxlen=keep)

    def __len__(self) -> int:
        return len(self._replaced)

    def replaced(self, old: DatasetView, new: DatasetView | None = None) -> None:
        """``old`` was replaced by ``new`` (None: dropped by a write)."""
        if new is not None and new.objects == old.objects and new.versions == old.versions:
            return
        self._replaced.append(Shown.of(old))

    def stored_version(self, key: str, target: str, shown: str, current: Iterable[DatasetView | None]) -> object:
        """The stored version of ``target`` behind version ``shown`` of view object ``key``: from
        the first of the ``current`` views that shows it so, else the last view replaced that
        did; NOT_SHOWN where none did."""
        for v in current:
            if v is not None and key in v.objects and v.info(key).etag == shown:
                return v.stored_version(target)
        for s in reversed(self._replaced):
            if s.etags.get(key) == shown:
                return s.stored_version(target)
        return NOT_SHOWN
