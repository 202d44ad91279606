"""The one probe at mount time of whether an object store refuses a conditional write whose
condition fails (S3 ``If-None-Match: *``, GCS generation 0, Azure ``If-None-Match: *``)."""

from __future__ import annotations

import logging
import uuid
from typing import Any, Callable, Protocol

import obstore as obs

from nczfs.toolbox.errors import NczfsError
from nczfs.store.objstore.counting import RequestCounts
from nczfs.store.objstore.errors import first_line
from nczfs.store.objstore.paths import ObjectPaths

log = logging.getLogger(__name__)


class Probed(Protocol):
    """The store whose writes are probed: where it is (``url``, for messages), its ``paths``,
    its request counts, and how it deletes an object (the probe's, after)."""

    url: str
    paths: ObjectPaths
    requests: RequestCounts

    def _delete_path(self, key: str, path: str) -> None: ...


def probe_conditions(backend: Probed, store: Any, refused: Callable[[BaseException, str], bool], condition: str,
                     then: Callable[[str], None] | None = None) -> bool:
    """A PUT of a probe key ``.nczfs-probe-<uuid>`` through obstore ``store`` where none may be,
    the same again (which must be refused: ``refused(exc, key)``), then its DELETE. True: the
    server refuses it, writes are conditional. False: it took the second PUT (it ignores
    ``condition``), or the probe failed: the mount falls back to last-writer-wins, said once.
    ``then(key)``: called after the refusal, before the DELETE (a probe of conditional deletes)."""
    key = f".nczfs-probe-{uuid.uuid4().hex}"
    full = backend.paths.full(key)
    try:
        backend.requests.count("put")
        obs.put(store, full, b"", mode="create")
        try:
            backend.requests.count("put")
            obs.put(store, full, b"probe", mode="create")
            ignored = True
        except Exception as exc:  # noqa: BLE001 - the refusal asked for, or a failure
            if not refused(exc, key):
                raise
            ignored = False
        if not ignored and then is not None:
            then(key)
    except Exception as exc:  # noqa: BLE001 - a mount that cannot probe checks nothing
        log.warning("%s: conditional writes could not be tried (%s): the last writer wins (-o overwrite=)",
                    backend.url, first_line(exc))
        return False
    finally:
        try:
            backend._delete_path(key, full)
        except NczfsError as exc:
            log.warning("%r: the probe object of conditional writes could not be deleted: %s", key, exc)
    if ignored:
        log.warning("%s: the server ignores conditional writes (%s): a close over another client's change "
                    "replaces it, the last writer wins", backend.url, condition)
    return not ignored
