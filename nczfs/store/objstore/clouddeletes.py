"""Deletes made only while an object is the version the mount saw, on GCS and Azure, through each
cloud's own SDK: obstore's DELETE takes no condition.

- GCS: ``google-cloud-storage``'s ``Blob.delete(if_generation_match=G)`` (the JSON API's
  ``ifGenerationMatch``): refused (412) unless the object is generation G.
- Azure: ``azure-storage-blob``'s ``BlobClient.delete_blob(etag=E, match_condition=IfNotModified)``
  (``If-Match``): refused (412) unless the blob is version E.

Each SDK client is made from what the mount's obstore client is made from (the endpoint, the
credentials of the options and the environment, the bounds of ``-o retries=``/``connect_timeout=``/
``read_timeout=``, a private CA from ``SSL_CERT_FILE``), once per mount, at its first use (the
probe at mount time, where writes are checked). Every call blocks: the store's methods run in
ThreadedStore's worker threads, never on the trio thread. A client that cannot be made (Azure
credentials of a kind only ``azure-identity`` takes, where it is not installed) leaves deletes
unconditional, said once by the probe (:meth:`CloudStore.probe_conditions`).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Callable

from nczfs.store.objstore.transport import Bounds
from nczfs.toolbox.errors import BackendError, NczfsError, PermissionDenied

#: what a conditional delete met: the object removed, the condition refused, no object there
DELETED, REFUSED, GONE = "deleted", "refused", "gone"
#: the scope obstore's GCS tokens carry
GCS_SCOPES = ("https://www.googleapis.com/auth/devstorage.read_write",)


class ConditionalDeletes:
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

    def _make(self) -> Any:
        raise NotImplementedError

    def delete(self, key: str, path: str, version: str) -> str:
        """Remove ``path`` only while it is ``version`` (GCS: a generation; Azure: an ETag as
        HTTP quotes it): DELETED, REFUSED or GONE; other failures as nczfs errors naming ``key``."""
        raise NotImplementedError

    def _failed(self, exc: BaseException, key: str, status: int | None) -> NczfsError:
        line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if status in (401, 403):
            return PermissionDenied(f"{key!r}: {self.service} DELETE refused: {line}")
        return BackendError(f"{key!r}: {self.service} DELETE failed: {line[:400]}")


class GcsDeletes(ConditionalDeletes):
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

    def delete(self, key: str, path: str, version: str) -> str:
        from google.api_core import exceptions
        from google.cloud.storage.retry import DEFAULT_RETRY

        retry = DEFAULT_RETRY.with_timeout(120.0) if self.bounds.retries else None
        try:
            self.client().blob(path).delete(if_generation_match=int(version), retry=retry,
                                            timeout=(self.bounds.connect_timeout, self.bounds.read_timeout))
        except exceptions.NotFound:
            return GONE
        except exceptions.PreconditionFailed:
            return REFUSED
        except Exception as exc:  # noqa: BLE001 - translated, naming the key
            raise self._failed(exc, key, getattr(exc, "code", None)) from None
        return DELETED


def gcs_credentials(credentials_file: str | None) -> Any:
    """The credentials obstore's GCS client takes, in its order: ``-o google_application_credentials=``,
    ``GOOGLE_SERVICE_ACCOUNT_KEY`` (the key's JSON), ``GOOGLE_SERVICE_ACCOUNT_PATH`` (or
    ``GOOGLE_SERVICE_ACCOUNT``), then Google's default chain (``GOOGLE_APPLICATION_CREDENTIALS``,
    gcloud's application-default credentials, the metadata server). A service account's tokens
    are signed by the key itself (self-signed JWTs, as obstore makes them: no token server asked)."""
    import google.auth
    from google.oauth2 import service_account

    path = (credentials_file or os.environ.get("GOOGLE_SERVICE_ACCOUNT_PATH")
            or os.environ.get("GOOGLE_SERVICE_ACCOUNT"))
    if credentials_file is None and (key := os.environ.get("GOOGLE_SERVICE_ACCOUNT_KEY")):
        credentials: Any = service_account.Credentials.from_service_account_info(json.loads(key), scopes=GCS_SCOPES)
    elif path:
        credentials = _credentials_file(path)
    else:
        credentials, _ = google.auth.default(scopes=GCS_SCOPES)
    if isinstance(credentials, service_account.Credentials):
        credentials = credentials.with_always_use_jwt_access(True)
    return credentials


def _credentials_file(path: str) -> Any:
    """A service account's key file, or gcloud's application-default credentials (a user's)."""
    from google.oauth2 import credentials as user, service_account

    with open(path, encoding="utf-8") as f:
        kind = json.load(f).get("type")
    if kind == "service_account":
        return service_account.Credentials.from_service_account_file(path, scopes=GCS_SCOPES)
    if kind == "authorized_user":
        return user.Credentials.from_authorized_user_file(path, scopes=GCS_SCOPES)
    raise NczfsError(f"{path}: credentials of type {kind!r}: conditional deletes take a service account's or a user's")


class AzureDeletes(ConditionalDeletes):
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
            raise self._failed(exc, key, exc.status_code) from None
        except Exception as exc:  # noqa: BLE001 - translated, naming the key
            raise self._failed(exc, key, None) from None
        return DELETED


def azure_credential(account: str | None, key: str | None, sas: str | None) -> Callable[[], Any]:
    """The Azure SDK's credential of what obstore's client is made from: an account key (the
    options', or obstore's variables ``AZURE_STORAGE_ACCOUNT_KEY``/``_ACCESS_KEY``/``_MASTER_KEY``),
    a SAS (the connection string's, ``AZURE_STORAGE_SAS_KEY``/``_TOKEN``), a bearer token
    (``AZURE_STORAGE_TOKEN``), else ``azure-identity``'s default chain (a service principal,
    workload identity, the Azure CLI, a managed identity), made when the client is."""
    env = os.environ.get
    key = key or env("AZURE_STORAGE_ACCOUNT_KEY") or env("AZURE_STORAGE_ACCESS_KEY") or env("AZURE_STORAGE_MASTER_KEY")
    sas = sas or env("AZURE_STORAGE_SAS_KEY") or env("AZURE_STORAGE_SAS_TOKEN")

    def made() -> Any:
        if key:
            return {"account_name": account, "account_key": key}
        if sas:
            from azure.core.credentials import AzureSasCredential

            return AzureSasCredential(sas.lstrip("?"))
        if token := env("AZURE_STORAGE_TOKEN"):
            return _Bearer(token)
        try:
            from azure.identity import DefaultAzureCredential
        except ImportError:
            raise NczfsError("no account key or SAS given, and azure-identity (for a service principal, the "
                             "Azure CLI or a managed identity) is not installed") from None
        return DefaultAzureCredential(exclude_interactive_browser_credential=True)

    return made


class _Bearer:
    """A bearer token given as it is (``AZURE_STORAGE_TOKEN``), as azure-core asks a credential for one."""

    def __init__(self, token: str):
        self.token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken(self.token, 2**31 - 1)
