"""PutObject on S3: one attempt a call, so that a request that went out without an answer is
known, and such a write looked for (its ETag: the MD5 of what was sent) before it is called of
unknown outcome.

:class:`Puts` is a part of :class:`~nczfs.store.objstore.store.S3Store`; so is the answer to a write
refused by its condition (:meth:`Puts.conflict`), which its other writes give too.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any, Callable

import obstore as obs

from nczfs.toolbox.errors import BackendError, Conflict, KeyNotFound, NczfsError, OutcomeUnknown, Stale
from nczfs.store.values import ABSENT, ObjectInfo
from nczfs.store.objstore.errors import ANSWERED, NOT_SENT, SERVER_ERROR, first_line, translate_boto
from nczfs.store.objstore.listing import Listed
from nczfs.store.objstore.meta import MetaOfWrites
from nczfs.store.objstore.obprefix import UNNAMEABLE, bare_etag, boto_conditions, info_of, plain_etag, put_mode
from nczfs.store.objstore.s3bucket import S3Bucket

log = logging.getLogger(__name__)


def refused_condition(err: NczfsError, if_version: str) -> bool:
    """Does ``err`` say that a write's condition failed: 412 (Stale), or no object where one of
    version ``if_version`` was expected (AWS answers an If-Match of a missing key 404)?"""
    return isinstance(err, Stale) or (isinstance(err, KeyNotFound) and if_version != ABSENT)


class Puts:
    """One PutObject of ``s3`` (what ``set`` and ``set_file`` send below the multipart threshold),
    with the attributes ``meta`` holds for the key; ``stat`` (the store's) finds the version a
    refused write met. The store checks the key and that it is writable before it asks."""

    def __init__(self, s3: S3Bucket, meta: MetaOfWrites, stat: Callable[[str], ObjectInfo]):
        self.s3 = s3
        self.meta = meta
        self.stat = stat

    def put(self, key: str, body: Any, size: int, if_version: str | None = None) -> ObjectInfo:
        """One PutObject (``if_version``: only while the object is that version, or absent); a
        write whose request went out without an answer is looked for (its ETag: the MD5 of what
        was sent) before it is called of unknown outcome, as is one whose condition failed (an
        earlier attempt of it may have been carried out)."""
        s3 = self.s3
        full = s3.full(key)
        data = body if isinstance(body, (bytes, bytearray, memoryview)) else b"".join(body)
        meta, headers = self.meta.to_write(key)
        try:
            if UNNAMEABLE.search(full):  # a key obstore cannot name
                etag = s3.client.put_object(Bucket=s3.bucket, Key=full, Body=bytes(data), Metadata=headers,
                                            **s3.options.writes(), **boto_conditions(if_version)).get("ETag")
            else:
                etag = self._put_attempts(key, full, data, if_version, headers)
        except Exception as exc:
            err = translate_boto(exc, key, "PutObject")
            md5 = hashlib.md5(data, usedforsecurity=False).hexdigest()
            if if_version is not None and refused_condition(err, if_version):
                return self.conflict(key, if_version, md5)
            if isinstance(err, OutcomeUnknown):  # stored after all, if the object is what was sent
                found = self.holds(key, md5)
                if found is not None:
                    return found
            raise err from None
        mtime = meta.mtime_ns if meta is not None and meta.mtime_ns is not None else time.time_ns()
        return ObjectInfo(key, size, mtime, bare_etag(etag), meta)

    def conflict(self, key: str, if_version: str, sent: str) -> ObjectInfo:
        """A write refused because ``key`` is not version ``if_version``: the object's info if it
        is what was sent after all (``sent``: its ETag; an attempt that got no answer was carried
        out, and its retry refused), else :class:`~nczfs.toolbox.errors.Conflict` naming the version
        found (one HEAD, on this path only)."""
        try:
            info = self.stat(key)
        except KeyNotFound:
            raise Conflict(key, if_version, "") from None
        except NczfsError as exc:
            log.warning("%r: the version a refused write met is unknown: %s", key, exc)
            raise Conflict(key, if_version, "") from None
        if sent and info.etag == sent:
            return info
        raise Conflict(key, if_version, info.etag)

    def _put_attempts(self, key: str, full: str, data: bytes | bytearray | memoryview,
                      if_version: str | None = None, headers: dict[str, str] | None = None) -> str | None:
        """obstore's PUT, ``-o retries=`` + 1 attempts, paused between as obstore's own are. An
        attempt that never reached the server (refused, no route) or was answered 5xx is tried
        again as obstore would; one that went out and got no answer (a timeout, a broken
        connection) too, but the write's outcome is then unknown whatever later attempts meet."""
        s3, unanswered, failure = self.s3, False, ""
        for _ in s3.options.attempts(lambda: s3.requests.add("retries-considered")):
            s3.requests.count("put")
            try:
                return obs.put(s3.once, full, data, use_multipart=False, mode=put_mode(if_version),
                               **self.put_arguments(headers)).get("e_tag")
            except Exception as exc:
                text = str(exc)
                if ANSWERED.search(text) and not SERVER_ERROR.search(text):
                    raise s3.requests.error(exc, key, "put") from None  # refused: the answer is final
                failure = first_line(exc)
                if not ANSWERED.search(text) and not NOT_SENT.search(text):
                    unanswered = True
                    s3.went_unanswered()
        if unanswered:
            raise OutcomeUnknown(f"{key!r}: S3 PutObject got no answer ({failure}); it may still be carried out "
                                 "(outcome unknown)")
        raise BackendError(f"{key!r}: S3 PutObject failed: {failure}")

    def holds(self, key: str, etag: str) -> ObjectInfo | None:
        """After a write whose answer never came: the object's info if it is the version written
        (its ETag: the MD5 of a single PUT's body, of a multipart upload's part MD5s and their
        count), else None (another version, none, or no answer to the HEAD either). One attempt:
        the answer is wanted now, not after another round of retries."""
        if not etag:
            return None
        s3 = self.s3
        full = s3.full(key)
        try:
            if UNNAMEABLE.search(full):  # a key obstore cannot name
                resp = s3.client.head_object(Bucket=s3.bucket, Key=full, **s3.options.payer())
                meta: Listed = {"size": resp["ContentLength"], "last_modified": resp["LastModified"], "e_tag": resp.get("ETag")}
            else:
                s3.requests.count("head")
                meta = obs.head(s3.once, full)
        except Exception as exc:  # noqa: BLE001 - not known then either
            log.warning("%r: checking a write that got no answer failed too: %s", key, first_line(exc))
            return None
        if plain_etag(meta.get("e_tag")) != etag:
            return None
        log.warning("%r: a write got no answer, but the object is what it sent: stored", key)
        return info_of(key, meta)

    def put_arguments(self, headers: dict[str, str] | None = None) -> dict[str, Any]:
        """The storage class asked for (obstore sends it as ``x-amz-storage-class``), and the user
        metadata ``headers`` (obstore sends an attribute of another name as ``x-amz-meta-NAME``)."""
        storage_class = self.s3.options.storage_class
        attributes = {"Storage-Class": storage_class} if storage_class else {}
        attributes.update(headers or {})
        return {"attributes": attributes} if attributes else {}
