"""Writes another client got in before: a conditional write refused, and the loser's data kept.

A file's content remembers the object version it started from (:attr:`Content.base
<nczfs.fs.content.Content.base>`: the ETag it was opened or last stored at, or ABSENT for a file
created where no object was). On a store that checks writes (S3: If-Match, If-None-Match: *) its
upload is made only while the object is still that version. When another client changed it
meanwhile, the upload is refused (:class:`~nczfs.toolbox.errors.Conflict`): nothing of the other
client's object is lost, and the writer's data is written beside it as a new object
``NAME.nczfs-conflict-<UTC time>``, the log names the key, both versions and that object, and
``nczfs stats`` counts it (``write.conflicts``); the close or fsync fails with ESTALE.
"""

from __future__ import annotations

import logging
from typing import Awaitable, Callable

from nczfs.toolbox.errors import Conflict, Exists, NczfsError
from nczfs.fs.content import Content
from nczfs.store.base import Store
from nczfs.store.keys import conflict_name
from nczfs.store.values import ABSENT, ObjectInfo
from nczfs.store import optional

log = logging.getLogger(__name__)

#: ``(content, key, if_version)``: store the content as ``key`` (WriteBack.store_content)
StoreContent = Callable[[Content, str, "str | None"], Awaitable[ObjectInfo]]


class Conflicts:
    """The conditions of one mount's writes, and what is done when one fails."""

    def __init__(self, store: Store, store_content: StoreContent):
        self.store = store
        #: stores a content whole as a key (what keeps a refused write's data)
        self.store_content = store_content
        self.stats = {"write.conflicts": 0, "write.conflicts-not-kept": 0}
        #: the last conflict (key, versions, what was refused) and where its data went: the
        #: kernel sends a request that failed with ESTALE once more (a rename), which meets the
        #: same conflict; it is counted, logged and kept once
        self._last: tuple[object, ...] = ()
        self._last_kept = ""

    def _again(self, exc: Conflict, what: object) -> bool:
        """Is this the conflict met last, of the same ``what`` (a content version, a source)?"""
        this = (exc.key, exc.expected, exc.found, what)
        again, self._last = this == self._last, this
        return again

    def condition(self, content: Content) -> str | None:
        """The ``if_version`` of an upload of ``content``: the version it started from, where the
        store checks writes (else None: the last writer wins)."""
        return content.base if self.store.capabilities.checks_writes and content.base else None

    def checked(self, condition: str) -> str | None:
        """``condition`` where the store checks writes, else None."""
        return condition if self.store.capabilities.checks_writes else None

    async def guarded(self, content: Content, key: str, condition: str | None, send: StoreContent) -> ObjectInfo:
        """``send(content, key, condition)``: the content stored as ``key`` only while the object is
        version ``condition``; refused, its data is kept beside and ESTALE raised (:meth:`keep`).
        Stored, the content replaces the version it made from then on."""
        try:
            info = await send(content, key, condition)
        except Conflict as exc:
            raise await self.keep(key, content, exc) from None
        content.base = info.etag or None
        return info

    async def keep(self, key: str, content: Content, exc: Conflict) -> Conflict:
        """``content`` (meant for ``key``, refused by ``exc``) written beside it as a new object;
        returns the error for the writer (ESTALE), naming where the data went."""
        if self._again(exc, (id(content), content.version)):
            return Conflict(key, exc.expected, exc.found, self._last_kept)
        self.stats["write.conflicts"] += 1
        kept = ""
        for n in range(5):
            name = conflict_name(key, n=n)
            try:
                await self.store_content(content, name, self.checked(ABSENT))
            except (Conflict, Exists):
                continue  # another conflict of the same second
            except NczfsError as err:
                log.error("%r: the data of a refused write could not be kept as %r either: %s", key, name, err)
                break
            kept = name
            break
        self._last_kept = kept
        if not kept:
            self.stats["write.conflicts-not-kept"] += 1
        log.error("%r: another client changed the object since this mount saw version %s (now: %s): the "
                  "write is refused (ESTALE)%s", key, "none" if exc.expected == ABSENT else exc.expected,
                  exc.found or "unknown, or none", f"; its data is kept as {kept!r}" if kept else
                  "; its data could not be kept")
        return Conflict(key, exc.expected, exc.found, kept)

    async def delete(self, key: str, version: str | None) -> None:
        """Remove the object ``key``: where the store checks deletes, only while it is ``version``
        (the one this mount last read or stored there); another client's newer version is not
        removed: ESTALE, counted and logged once (the kernel's second try meets the same)."""
        if not (self.store.capabilities.checks_deletes and version):
            await self.store.delete(key)
            return
        try:
            await self.store.delete(key, if_version=version)
        except Conflict as exc:
            self._refused(exc, "unlink")
            raise

    async def truncate(self, key: str, size: int, version: str | None) -> ObjectInfo:
        """Cut or extend the object ``key`` in place: where the store checks writes, only while it
        is ``version`` (the one this mount last read or stored there); else ESTALE, as :meth:`delete`."""
        try:
            return await optional.truncate(self.store, key, size, if_version=self.checked(version) if version else None)
        except Conflict as exc:
            self._refused(exc, "truncate")
            raise

    def _refused(self, exc: Conflict, what: str) -> None:
        """A change of ``exc.key`` in place (``what``: unlink, truncate) refused: counted and logged
        once (the kernel sends a request refused with ESTALE once more, which meets the same)."""
        if self._again(exc, what):
            return
        self.stats["write.conflicts"] += 1
        log.error("%r: another client changed the object since this mount saw version %s (now: %s): the "
                  "%s is refused (ESTALE); the object stays", exc.key, exc.expected, exc.found or "unknown", what)

    def refused_rename(self, src: str, exc: Conflict) -> Conflict:
        """A rename over ``exc.key`` refused (another client changed it since this mount saw it):
        the source stays where it is, with its data; the error for the caller (ESTALE)."""
        if self._again(exc, src):
            return Conflict(exc.key, exc.expected, exc.found, src)
        self.stats["write.conflicts"] += 1
        log.error("%r: another client changed the object since this mount saw version %s (now: %s): the rename "
                  "of %r over it is refused (ESTALE); its data stays there", exc.key,
                  "none" if exc.expected == ABSENT else exc.expected, exc.found or "unknown, or none", src)
        return Conflict(exc.key, exc.expected, exc.found, src)
