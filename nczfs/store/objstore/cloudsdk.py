"""What GCS and Azure take a condition on that obstore sends without one, through each cloud's own
SDK: deletes, and writes too large for one PUT (obstore's uploads in parts take no condition).

- GCS (``google-cloud-storage``): ``Blob.delete(if_generation_match=G)``; a resumable upload
  (``Blob.upload_from_file`` in chunks) with ``if_generation_match=G`` (``0``: no object may be),
  which GCS checks when the upload is finished, so a change during it is refused too.
- Azure (``azure-storage-blob``): ``delete_blob`` with ``If-Match``; blocks staged (Put Block, in
  parallel) and committed by one Put Block List with ``If-Match`` (``If-None-Match: *``: no blob
  may be), which Azure checks then.
- Copies over an object too large to be read and written with one conditional PUT: GCS's
  ``Blob.rewrite`` with ``if_generation_match``, Azure's Copy Blob (``start_copy_from_url``) with
  the destination's ``If-Match``.

A refusal (412; Azure's 409 for a blob where none may be) is REFUSED, a missing object GONE.
Each SDK client is made from what the mount's obstore client is made from (the endpoint, the
credentials of :mod:`.cloudcreds`, the bounds of ``-o retries=``/``connect_timeout=``/
``read_timeout=``, a private CA from ``SSL_CERT_FILE``), once per mount, at its first use (the
probe at mount time, where writes are checked). Every call blocks: the store's methods run in
ThreadedStore's worker threads, never on the trio thread. A client that cannot be made (Azure
credentials of a kind only ``azure-identity`` takes, where it is not installed) leaves deletes
unconditional, said once by the probe (:meth:`CloudStore.probe_conditions`).
"""

from __future__ import annotations

import base64
import io
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, BinaryIO, Callable

from nczfs.store.objstore.cloudcreds import gcs_credentials
from nczfs.store.objstore.transport import Bounds
from nczfs.store.pieces import file_pieces
from nczfs.toolbox.errors import BackendError, NczfsError, PermissionDenied

#: what a conditional request met: carried out, the condition refused, no object there
DONE, REFUSED, GONE = "done", "refused", "gone"
#: blocks of one Azure upload staged at once
STAGED_AT_ONCE = 8


class CloudSdk:
    """One SDK client of one mount's bucket (container), made once, at its first use."""

    #: the condition a probe of the server names, which no object's version can be
    never: str = ""
    #: the header (GCS: query parameter) the condition rides on, as the log names it
    condition: str = ""
    service: str = ""

    def __init__(self, bucket: str, endpoint: str | None, bounds: Bounds, ca_file: str | None):
        self.bucket = bucket
        self.endpoint = endpoint.rstrip("/") if endpoint else None
        self.bounds = bounds
        self.ca_file = ca_file
        self._made: Any = None
        self._lock = threading.Lock()

    def client(self) -> Any:
        with self._lock:
            if self._made is None:
                self._made = self._make()
            return self._made

    def warm(self) -> None:
        """Make the client now in a thread of its own (importing the SDK takes some hundred ms),
        while the probe at mount time sends obstore's requests; failing, it is made (and its
        failure said) at its first use."""
        def make() -> None:
            try:
                self.client()
            except Exception:  # noqa: BLE001 - made again at the first use, which says why it fails
                pass

        threading.Thread(target=make, name=f"{self.service.lower()}-sdk", daemon=True).start()

    def _make(self) -> Any:
        raise NotImplementedError

    def delete(self, key: str, path: str, version: str) -> str:
        """Remove ``path`` only while it is ``version`` (GCS: a generation; Azure: an ETag as
        HTTP quotes it): DONE, REFUSED or GONE; other failures as nczfs errors naming ``key``."""
        raise NotImplementedError

    def upload(self, key: str, path: str, f: BinaryIO, size: int, part_size: int,
               version: str | None) -> tuple[str, dict[str, str]]:
        """``size`` bytes of ``f`` (from its position) stored as ``path`` in parts of
        ``part_size``, only while it is ``version`` (None: while no object is there): (REFUSED,
        {}) or (DONE, the object's ``e_tag`` and, GCS, ``version`` as obstore names them)."""
        raise NotImplementedError

    def copy(self, key: str, source: str, path: str, version: str) -> str:
        """A server-side copy of ``source`` to ``path``, made only while ``path`` is ``version``
        (as :meth:`delete` names it): DONE, REFUSED, or GONE (no ``source``)."""
        raise NotImplementedError

    def _failed(self, exc: BaseException, key: str, status: int | None, op: str) -> NczfsError:
        line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if status in (401, 403):
            return PermissionDenied(f"{key!r}: {self.service} {op} refused: {line}")
        return BackendError(f"{key!r}: {self.service} {op} failed: {line[:400]}")


class GcsSdk(CloudSdk):
    """``google-cloud-storage`` over the JSON API of the mount's endpoint (or Google's)."""

    never = "1"  # a generation no object has: GCS's are microseconds since 1970
    condition = "ifGenerationMatch"
    service = "GCS"

    def __init__(self, bucket: str, endpoint: str | None, bounds: Bounds = Bounds(), ca_file: str | None = None,
                 credentials_file: str | None = None):
        super().__init__(bucket, endpoint, bounds, ca_file)
        self.credentials_file = credentials_file

    def _make(self) -> Any:
        from google.auth.transport.requests import AuthorizedSession
        from google.cloud import storage

        credentials = gcs_credentials(self.credentials_file)
        session = AuthorizedSession(credentials)
        if self.ca_file:
            session.verify = self.ca_file
        options = {"api_endpoint": self.endpoint} if self.endpoint else None
        client = storage.Client(project=None, credentials=credentials, _http=session, client_options=options)
        return client.bucket(self.bucket)

    def _calls(self) -> dict[str, Any]:
        from google.cloud.storage.retry import DEFAULT_RETRY

        return {"retry": DEFAULT_RETRY.with_timeout(120.0) if self.bounds.retries else None,
                "timeout": (self.bounds.connect_timeout, self.bounds.read_timeout)}

    def delete(self, key: str, path: str, version: str) -> str:
        return self._outcome(key, "DELETE", lambda: self.client().blob(path).delete(
            if_generation_match=int(version), **self._calls()))

    def _outcome(self, key: str, op: str, call: Callable[[], object]) -> str:
        """What ``call`` (a conditional request) met: DONE, REFUSED or GONE."""
        from google.api_core import exceptions

        try:
            call()
        except exceptions.NotFound:
            return GONE
        except exceptions.PreconditionFailed:
            return REFUSED
        except Exception as exc:  # noqa: BLE001 - translated, naming the key
            raise self._failed(exc, key, getattr(exc, "code", None), op) from None
        return DONE

    def upload(self, key: str, path: str, f: BinaryIO, size: int, part_size: int,
               version: str | None) -> tuple[str, dict[str, str]]:
        from google.api_core import exceptions

        chunk = max(256 * 1024, part_size // (256 * 1024) * 256 * 1024)  # a multiple of 256 KiB, as GCS asks
        blob = self.client().blob(path, chunk_size=chunk)
        try:
            blob.upload_from_file(Window(f, size), size=size, if_generation_match=int(version or 0),
                                  content_type="application/octet-stream", checksum=None, **self._calls())
        except exceptions.PreconditionFailed:
            return REFUSED, {}
        except Exception as exc:  # noqa: BLE001 - translated, naming the key
            raise self._failed(exc, key, getattr(exc, "code", None), "resumable upload") from None
        return DONE, {"e_tag": blob.etag or "", "version": str(blob.generation or "")}

    def copy(self, key: str, source: str, path: str, version: str) -> str:
        """``Blob.rewrite`` (the JSON API's rewriteTo, called again with its token until done:
        GCS may copy a large object in several calls), each with ``ifGenerationMatch``."""
        def rewrite() -> None:
            bucket = self.client()
            target, token = bucket.blob(path), None
            while True:
                token, _, _ = target.rewrite(bucket.blob(source), token=token, if_generation_match=int(version),
                                             **self._calls())
                if token is None:
                    return

        return self._outcome(key, "rewrite", rewrite)


class AzureSdk(CloudSdk):
    """``azure-storage-blob`` on the mount's endpoint (or the account's own)."""

    never = '"0x0"'  # an ETag no blob has: Azure's are a 0x and 15 hexadecimal digits
    condition = "If-Match"
    service = "Azure"

    def __init__(self, bucket: str, endpoint: str | None, bounds: Bounds = Bounds(), ca_file: str | None = None,
                 account: str | None = None, credential: Callable[[], Any] | None = None):
        super().__init__(bucket, endpoint, bounds, ca_file)
        self.account = account
        self.credential = credential or (lambda: None)

    def _make(self) -> Any:
        from azure.storage.blob import ContainerClient

        url = self.endpoint or f"https://{self.account}.blob.core.windows.net"
        return ContainerClient(url, self.bucket, credential=self.credential(), retry_total=self.bounds.retries,
                               connection_timeout=self.bounds.connect_timeout, read_timeout=self.bounds.read_timeout,
                               connection_verify=self.ca_file or True)

    def delete(self, key: str, path: str, version: str) -> str:
        from azure.core import MatchConditions
        from azure.core.exceptions import HttpResponseError, ResourceModifiedError, ResourceNotFoundError

        try:
            self.client().get_blob_client(path).delete_blob(etag=version, match_condition=MatchConditions.IfNotModified)
        except ResourceNotFoundError:
            return GONE
        except ResourceModifiedError:
            return REFUSED  # Azurite answers a missing blob's If-Match so too (412): the store looks
        except HttpResponseError as exc:
            raise self._failed(exc, key, exc.status_code, "DELETE") from None
        except Exception as exc:  # noqa: BLE001 - translated, naming the key
            raise self._failed(exc, key, None, "DELETE") from None
        return DONE

    def upload(self, key: str, path: str, f: BinaryIO, size: int, part_size: int,
               version: str | None) -> tuple[str, dict[str, str]]:
        from azure.core import MatchConditions
        from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceModifiedError

        blob = self.client().get_blob_client(path)
        condition = ({"etag": version, "match_condition": MatchConditions.IfNotModified} if version
                     else {"match_condition": MatchConditions.IfMissing})
        try:
            ids = self._stage(blob, key, f, size, part_size)
            answer = blob.commit_block_list(ids, **condition)
        except (ResourceModifiedError, ResourceExistsError):
            return REFUSED, {}
        except HttpResponseError as exc:
            raise self._failed(exc, key, exc.status_code, "Put Block List") from None
        except NczfsError:
            raise
        except Exception as exc:  # noqa: BLE001 - translated, naming the key
            raise self._failed(exc, key, None, "Put Block List") from None
        return DONE, {"e_tag": answer.get("etag") or ""}

    def copy(self, key: str, source: str, path: str, version: str) -> str:
        """Copy Blob (``start_copy_from_url``, the source's URL in the mount's account) with the
        destination's ``If-Match``, which Azure checks as it starts the copy; one still pending
        (Azure may copy a large blob in the background) is waited for."""
        from azure.core import MatchConditions
        from azure.core.exceptions import HttpResponseError, ResourceModifiedError, ResourceNotFoundError

        blob = self.client().get_blob_client(path)
        try:
            status = blob.start_copy_from_url(self.client().get_blob_client(source).url, etag=version,
                                              match_condition=MatchConditions.IfNotModified).get("copy_status")
            wait = 0.05
            while status == "pending":
                time.sleep(wait)
                wait = min(1.0, wait * 2)
                status = blob.get_blob_properties().copy.status
        except ResourceModifiedError:
            return REFUSED
        except ResourceNotFoundError:
            return GONE
        except HttpResponseError as exc:
            raise self._failed(exc, key, exc.status_code, "Copy Blob") from None
        if status != "success":
            raise BackendError(f"{key!r}: Azure Copy Blob ended {status!r}, not success")
        return DONE

    @staticmethod
    def _stage(blob: Any, key: str, f: BinaryIO, size: int, part_size: int) -> list[str]:
        """The blocks of ``size`` bytes of ``f`` staged (Put Block), STAGED_AT_ONCE at a time
        (as many parts in memory); their IDs in order."""
        upload = uuid.uuid4().hex
        ids: list[str] = []
        pending: list[Future] = []
        with ThreadPoolExecutor(STAGED_AT_ONCE, thread_name_prefix="azure-blocks") as pool:
            for n, piece in enumerate(file_pieces(key, f, size, part_size)):
                ids.append(base64.b64encode(f"{upload}-{n:08d}".encode()).decode())
                pending.append(pool.submit(blob.stage_block, ids[-1], piece, length=len(piece)))
                if len(pending) >= STAGED_AT_ONCE:
                    pending.pop(0).result()
            for done in pending:
                done.result()
        return ids


class Window(io.RawIOBase):
    """``size`` bytes of ``f`` from its position, as a stream of its own that starts at 0 and
    seeks within them (a resumable upload starts at 0 and seeks back to resend a chunk)."""

    def __init__(self, f: BinaryIO, size: int):
        super().__init__()
        self.f, self.base, self.size, self.pos = f, f.tell(), size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        start = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, min(self.size, start + offset))
        return self.pos

    def readinto(self, buffer: Any) -> int:
        want = min(len(buffer), self.size - self.pos)
        if want <= 0:
            return 0
        self.f.seek(self.base + self.pos)
        got = self.f.readinto(memoryview(buffer)[:want])  # type: ignore[attr-defined]  # files and BytesIO have it
        self.pos += got or 0
        return got or 0
