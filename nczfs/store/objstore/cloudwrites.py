"""Conditional writes to Google Cloud Storage and Azure Blob through obstore: :class:`CloudStore`.

The version nczfs keeps of an object is its ETag on both (what listings give and reads pin with
``If-Match``). Azure conditions a write on it (``If-Match``; ``If-None-Match: *`` where no object
may be). GCS conditions writes on the object's generation instead
(``x-goog-if-generation-match``; ``0``: no object): the generation of the version each key was
last seen at (a HEAD) or written at (this mount's PUT) is remembered, and where it is not (a
version known from a listing only), one HEAD learns it first and refuses at once if the object
is another version. obstore sends a conditional write as one PUT read into memory whole, never
in parts: so up to :data:`CONDITIONAL_MAX` bytes; larger writes go up in parts through the
cloud's own SDK (:mod:`.cloudsdk`), the condition checked by the server when the upload is
finished (where the SDK works and the server honours its conditions, as the probe finds: else
in parts through obstore, checked by a HEAD just before). Deletes are conditional through the
SDK too. A rename over an object is a server-side copy
made only where none is (both clouds take that condition on a copy), else the source read and
written with the condition (up to :data:`CONDITIONAL_MAX`; larger: a server-side copy through
the SDK with the condition, or where the SDK cannot be used, checked by a HEAD before).
A refused write is :class:`~nczfs.toolbox.errors.Conflict` naming the version found (one HEAD, on that
path only). A write that got no answer (obstore does not resend a conditional PUT then) is looked
for, as on S3: stored if the object now holds what was sent (neither cloud's ETag is its MD5, so
an object as long as the data, up to :data:`LOOK_MAX` bytes, is read back), else
:class:`~nczfs.toolbox.errors.OutcomeUnknown`; a refusal is looked at the same way (an attempt whose
answer was lost, carried out, then refused when sent again).
"""

from __future__ import annotations

from dataclasses import replace
import io
import logging
import threading
import time
from typing import Any, BinaryIO

import obstore as obs

from nczfs.toolbox.errors import Conflict, KeyNotFound, NczfsError, OutcomeUnknown, Stale
from nczfs.store.base import check_writable
from nczfs.store.keys import check_key
from nczfs.store.pieces import file_pieces
from nczfs.store.values import ABSENT, ObjectInfo
from nczfs.store.objstore.cloudsdk import GONE, REFUSED, CloudSdk
from nczfs.store.objstore.listing import Listed
from nczfs.store.objstore.obprefix import ObjectStoreBackend, if_match, plain_etag
from nczfs.store.objstore.errors import first_line
from nczfs.store.objstore.probe import probe_conditions

log = logging.getLogger(__name__)

#: the largest write sent as one conditional PUT (obstore reads it into memory whole)
CONDITIONAL_MAX = 512 * 1024**2
#: a write whose answer was lost is looked for (its bytes read back) up to this many bytes
LOOK_MAX = 8 * 1024**2
#: generations remembered (GCS), the most recently learned kept
GENERATIONS = 4096


class CloudStore(ObjectStoreBackend):
    """A GCS bucket's or an Azure container's prefix whose writes are conditional where
    ``checks_writes`` (set by :meth:`probe_conditions` at mount time)."""

    def __init__(self, store: Any, prefix: str = "", sdk: CloudSdk | None = None, **kw: Any):
        super().__init__(store, prefix, **kw)
        #: the cloud's own SDK: conditional deletes and large writes (None: neither is conditional)
        self.sdk = sdk
        #: GCS conditions writes on generations, Azure on ETags
        self.by_generation = self.service == "GCS"
        #: GCS: (ETag, generation) of each key's version last seen or written, by key
        self._generations: dict[str, tuple[str, str]] = {}
        self._gen_lock = threading.Lock()

    # ------------------------------------------------------------------ versions

    def _info(self, key: str, meta: Listed) -> ObjectInfo:
        info = super()._info(key, meta)
        if self.by_generation and meta.get("version"):  # a HEAD's or a PUT's (listings give none)
            self._remember(key, info.etag, str(meta["version"]))
        return info

    def _remember(self, key: str, etag: str, generation: str | None) -> None:
        if not etag or not generation:
            return
        with self._gen_lock:
            self._generations.pop(key, None)
            self._generations[key] = (etag, generation)
            if len(self._generations) > GENERATIONS:
                del self._generations[next(iter(self._generations))]

    def _mode(self, key: str, if_version: str) -> Any:
        """obstore's ``mode`` of a PUT made only while ``key`` is version ``if_version`` (or absent)."""
        if if_version == ABSENT:
            return "create"
        pin = if_match(if_version)
        if pin is None:
            return "overwrite"  # a weak ETag names no version a write can be conditioned on
        if not self.by_generation:
            return {"e_tag": pin}
        generation = self._generation(key, if_version)
        return "overwrite" if generation is None else {"e_tag": pin, "version": generation}

    def _generation(self, key: str, if_version: str) -> str | None:
        """GCS: the generation of ``key``'s version ``if_version`` (remembered, else one HEAD's:
        that answer's own, not the table's, which other calls fill too); None where the server
        names none; Conflict if the object is another version or none."""
        with self._gen_lock:
            known = self._generations.get(key)
        if known is not None and known[0] == if_version:
            return known[1]
        try:
            meta = self._head(key)
        except KeyNotFound:
            raise Conflict(key, if_version, "") from None
        info = self._info(key, meta)  # remembers it for the next write
        if info.etag != if_version:
            raise Conflict(key, if_version, info.etag)
        return str(meta["version"]) if meta.get("version") else None

    # ------------------------------------------------------------------ writes

    def _put(self, key: str, body: Any, size: int, if_version: str | None = None) -> ObjectInfo:
        conditional = if_version is not None and self.capabilities.checks_writes
        if conditional and size > CONDITIONAL_MAX:
            if self._checked_in_parts(size, if_version) and isinstance(body, (bytes, bytearray, memoryview)):
                return self._large_put(key, io.BytesIO(body), size, if_version)  # type: ignore[arg-type]  # not None: conditional says so
            self._check_before(key, if_version)  # type: ignore[arg-type]  # not None: conditional says so
            conditional = False
        if conditional and not isinstance(body, (bytes, bytearray, memoryview)):
            body = b"".join(body)  # obstore reads a conditional PUT's body whole anyway
        try:
            if not conditional:
                return super()._put(key, body, size)
            return self._conditional_put(key, body, if_version)  # type: ignore[arg-type]  # not None: conditional says so
        except OutcomeUnknown:
            found = self._holds(key, body)
            if found is None:
                raise
            log.warning("%r: a write got no answer, but the object is what it sent: stored", key)
            return found

    def set_file(self, key: str, f: BinaryIO, size: int, if_version: str | None = None) -> ObjectInfo:
        """Above CONDITIONAL_MAX with a condition: :meth:`_large_put`; else as any object store."""
        if not self._checked_in_parts(size, if_version):
            return super().set_file(key, f, size, if_version)
        check_key(key)
        check_writable(self, key)
        return self._large_put(key, f, size, if_version)  # type: ignore[arg-type]  # not None: checked says so

    def _checked_in_parts(self, size: int, if_version: str | None) -> bool:
        """Does a write of ``size`` bytes go up in parts through the cloud's SDK, its condition
        checked by the server? Above CONDITIONAL_MAX, where the probe found the SDK's conditions
        honoured (``checks_deletes``), on a version that can be named."""
        return (size > CONDITIONAL_MAX and if_version is not None and self.capabilities.checks_writes and self.capabilities.checks_deletes
                and self.sdk is not None and (if_version == ABSENT or if_match(if_version) is not None))

    def _large_put(self, key: str, f: BinaryIO, size: int, if_version: str) -> ObjectInfo:
        """A write above CONDITIONAL_MAX, in parts, through the cloud's SDK (:mod:`.cloudsdk`:
        GCS's resumable upload, Azure's blocks and Put Block List), made only while ``key`` is
        ``if_version``, which the server checks as it finishes the upload; refused: Conflict
        naming the version found (one HEAD)."""
        assert self.sdk is not None
        version = None
        if if_version != ABSENT:
            version = self._generation(key, if_version) if self.by_generation else if_match(if_version)
            if version is None:  # the server names no generations: nothing to condition on
                self._check_before(key, if_version)
                return super()._put(key, file_pieces(key, f, size, self.sizes.part_size), size)
        self._count("multipart")
        outcome, result = self.sdk.upload(key, self._full(key), f, size, self.sizes.part_size, version)
        if outcome == REFUSED:
            raise Conflict(key, if_version, self._version_of(key))
        etag = plain_etag(result.get("e_tag"))
        if self.by_generation:  # the JSON API's answer gives no ETag of the XML API's (obstore's)
            self._count("head")
            meta: dict = {}
            try:
                meta = dict(obs.head(self.store, self._full(key)))
            except Exception:  # noqa: BLE001 - the version stored is then one no object is now
                pass
            if str(meta.get("version")) == result.get("version"):
                return self._info(key, meta)
        return ObjectInfo(key, size, time.time_ns(), etag)

    def _conditional_put(self, key: str, data: Any, if_version: str) -> ObjectInfo:
        """One PUT made only while ``key`` is ``if_version``; refused: :meth:`_refused`'s answer.
        GCS: refused where the ETag is the same at another generation (the same bytes written
        again), it is sent once more, conditioned on that generation."""
        for again in (False, True):
            mode = self._mode(key, if_version)
            self._count("put")
            try:
                result = obs.put(self.store, self._full(key), data, mode=mode, **self.put_arguments())
                break
            except Exception as exc:
                err = self._put_error(exc, key, "put")
                if not isinstance(err, Stale):
                    raise err from None
                outcome = self._refused(key, if_version, data)
                if isinstance(outcome, ObjectInfo):
                    return outcome
                if again or not (self.by_generation and outcome.found == if_version):
                    raise outcome from None
        info = ObjectInfo(key, len(data), time.time_ns(), plain_etag(result.get("e_tag")))
        if self.by_generation:
            self._remember(key, info.etag, result.get("version"))
        return info

    def _refused(self, key: str, if_version: str, data: Any) -> ObjectInfo | Conflict:
        """A write refused because ``key`` is not version ``if_version``: the Conflict naming the
        version found (one HEAD), or that version's info if it holds what was sent (an attempt
        whose answer was lost was carried out, and obstore's next attempt refused)."""
        try:
            info = self.stat(key)
        except KeyNotFound:
            return Conflict(key, if_version, "")
        except NczfsError as exc:
            log.warning("%r: the version a refused write met is unknown: %s", key, exc)
            return Conflict(key, if_version, "")
        return info if self._sent(info, data) else Conflict(key, if_version, info.etag)

    def _holds(self, key: str, body: Any) -> ObjectInfo | None:
        """After a write that got no answer: the object's info if it holds what was sent (one
        HEAD; one GET of an object as long as that, up to LOOK_MAX bytes), else None."""
        if not isinstance(body, (bytes, bytearray, memoryview)) or len(body) > LOOK_MAX:
            return None
        try:
            info = self.stat(key)
            return info if self._sent(info, body) else None
        except NczfsError as exc:  # not known then either
            log.warning("%r: checking a write that got no answer failed too: %s", key, exc)
            return None

    def _sent(self, info: ObjectInfo, data: Any) -> bool:
        """Does the object (version ``info``) hold ``data``? (Neither cloud's ETag is the bytes' MD5.)"""
        if info.size != len(data) or len(data) > LOOK_MAX:
            return False
        try:
            return self.get_version(info.key, None, info.etag) == data
        except NczfsError:
            return False

    def _version_of(self, key: str) -> str:
        """``key``'s version now ("": none there)."""
        try:
            return self.stat(key).etag
        except KeyNotFound:
            return ""

    def _check_before(self, key: str, if_version: str) -> None:
        """A write too big for one conditional PUT: refused now if ``key`` is not version
        ``if_version`` (one HEAD; a change between it and the upload's end is not seen)."""
        found = self._version_of(key)
        if found != ("" if if_version == ABSENT else if_version):
            raise Conflict(key, if_version, found)

    def copy(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        """A server-side copy; ``if_version``: only while ``dst`` is that version. Where none may
        be, the copy carries the condition (GCS generation 0, Azure ``If-None-Match: *``); a
        version: the source read and written with the condition (up to CONDITIONAL_MAX), above
        it a copy through the SDK carrying it (:meth:`_large_copy`)."""
        if if_version is None or not self.capabilities.checks_writes:
            return super().copy(src, dst)
        check_key(src)
        check_key(dst)
        check_writable(self, dst)
        if if_version == ABSENT:
            self._count("copy")
            try:
                obs.copy(self.store, self._full(src), self._full(dst), overwrite=False)
            except Exception as exc:
                err = self._err(exc, src, "copy")
                raise (Conflict(dst, if_version, self._version_of(dst)) if isinstance(err, Stale) else err) from None
            return self.stat(dst)
        size = self.stat(src).size
        if size <= CONDITIONAL_MAX:
            return self._put(dst, self.get(src), size, if_version)
        if self._checked_in_parts(size, if_version):
            return self._large_copy(src, dst, if_version)
        self._check_before(dst, if_version)
        return super().copy(src, dst)

    def _large_copy(self, src: str, dst: str, if_version: str) -> ObjectInfo:
        """A copy over an object above CONDITIONAL_MAX through the cloud's SDK (:mod:`.cloudsdk`:
        GCS's rewrite with ``ifGenerationMatch``, Azure's Copy Blob with ``If-Match``), made only
        while ``dst`` is ``if_version``, which the server checks; refused: Conflict naming the
        version found (one HEAD)."""
        assert self.sdk is not None
        version = self._generation(dst, if_version) if self.by_generation else if_match(if_version)
        if version is None:  # the server names no generations: nothing to condition on
            self._check_before(dst, if_version)
            return super().copy(src, dst)
        self._count("copy")
        outcome = self.sdk.copy(dst, self._full(src), self._full(dst), version)
        if outcome == REFUSED:
            raise Conflict(dst, if_version, self._version_of(dst))
        if outcome == GONE:
            raise KeyNotFound(src)
        return self.stat(dst)

    # ------------------------------------------------------------------ deletes

    def delete(self, key: str, if_version: str | None = None) -> None:
        """Remove ``key``; ``if_version`` (where ``checks_deletes``): only while it is that version
        (:mod:`.cloudsdk`: GCS on its generation, Azure ``If-Match``), else Conflict naming
        the version found (one HEAD); gone already: not an error. GCS: refused where the ETag
        is the same at another generation (the same bytes written again), sent once more on it."""
        check_key(key)
        check_writable(self, key)
        pin = if_match(if_version) if if_version and if_version != ABSENT else None
        if pin is None or self.sdk is None or not self.capabilities.checks_deletes:
            self._delete_path(key, self._full(key))
            return
        for again in (False, True):
            try:
                condition = self._generation(key, if_version) if self.by_generation else pin  # type: ignore[arg-type]  # not None: pin says so
            except Conflict as exc:
                if not exc.found:
                    return  # gone already
                raise
            if condition is None:  # the server names no generations: nothing to condition on
                self._delete_path(key, self._full(key))
                return
            self._count("delete")
            if self.sdk.delete(key, self._full(key), condition) != REFUSED:
                with self._gen_lock:
                    self._generations.pop(key, None)
                return
            found = self._version_of(key)  # GCS: learns its generation
            if not found:
                return  # gone already (Azurite answers a missing blob's If-Match 412)
            if again or not (self.by_generation and found == if_version):
                raise Conflict(key, if_version, found)  # type: ignore[arg-type]  # not None: pin says so

    # ------------------------------------------------------------------ the probe

    def probe_conditions(self) -> bool:
        """Does the server refuse a conditional write whose condition fails? One probe at mount
        time (:func:`~nczfs.store.objstore.probe.probe_conditions`); where it does, a delete of
        the probe object on a version it is not must be refused too: ``checks_deletes`` says so."""
        def refused(exc: BaseException, key: str) -> bool:
            return isinstance(self._err(exc, key, "put"), Stale)

        self.capabilities = replace(self.capabilities, checks_deletes=False)
        return probe_conditions(self, self.store, refused,
                                "x-goog-if-generation-match" if self.by_generation else "If-None-Match",
                                then=self._probe_deletes)

    def _probe_deletes(self, key: str) -> None:
        """The probe object's delete on a version no object has (one DELETE, the SDK's): refused,
        deletes are conditional; carried out or failed: not, said once in the log."""
        if self.sdk is None:
            return
        self._count("delete")
        try:
            outcome = self.sdk.delete(key, self._full(key), self.sdk.never)
        except Exception as exc:  # noqa: BLE001 - a mount that cannot probe deletes checks none
            log.warning("%s: conditional deletes could not be tried (%s): an unlink removes whatever version is "
                        "there", self.url, first_line(exc))
            return
        self.capabilities = replace(self.capabilities, checks_deletes=outcome == REFUSED)
        if not self.capabilities.checks_deletes:
            log.warning("%s: the server ignores conditional deletes (%s): an unlink removes whatever version is "
                        "there", self.url, self.sdk.condition)
