"""Open Google Cloud Storage and Azure Blob sources as obstore-backed stores.

Credentials follow each cloud's own chain, as its command-line tools take them:

- GCS: ``-o google_application_credentials=FILE`` (or ``GOOGLE_APPLICATION_CREDENTIALS``), a
  service-account key (``GOOGLE_SERVICE_ACCOUNT_KEY``/``_PATH``), gcloud's application-default
  credentials, then the metadata server of a Google Compute Engine machine. ``-o anon``: no
  credentials at all (public buckets; read-only, since GCS takes no anonymous writes). The
  endpoint: ``-o endpoint_url=`` or ``STORAGE_EMULATOR_HOST`` (Google's SDKs' variable).
- Azure: the account from the URL (``abfs://c@ACCOUNT.dfs.core.windows.net``),
  ``-o azure_storage_account=`` or ``AZURE_STORAGE_ACCOUNT_NAME``/``AZURE_STORAGE_ACCOUNT``;
  ``AZURE_STORAGE_CONNECTION_STRING`` (account, key, SAS, endpoint), an account key
  (``AZURE_STORAGE_ACCOUNT_KEY``/``AZURE_STORAGE_KEY``), a SAS token
  (``AZURE_STORAGE_SAS_TOKEN``), a service principal (``AZURE_CLIENT_ID``/``_SECRET``/
  ``AZURE_TENANT_ID``), the Azure CLI's login (``AZURE_USE_AZURE_CLI``), then a managed
  identity. ``-o anon``: public containers, read-only. The endpoint: ``-o endpoint_url=``.
"""

from __future__ import annotations

from dataclasses import replace
import os
from typing import Any

from nczfs.store.objstore.cloudurl import parse_azure_source, parse_cloud_url
from nczfs.toolbox.errors import SourceError, option_error
from nczfs.store.objstore.cloudcreds import azure_credential
from nczfs.store.objstore.cloudsdk import AzureSdk, GcsSdk
from nczfs.store.objstore.cloudwrites import CloudStore
from nczfs.store.objstore.options import CloudOptions


def open_gcs(options: CloudOptions) -> CloudStore:
    from obstore.store import GCSStore

    text = options.source
    loc = parse_cloud_url(text)
    kwargs: dict[str, Any] = {}
    endpoint = options.endpoint_url or _emulator_host()
    if endpoint:
        kwargs["base_url"] = endpoint.rstrip("/")
    if options.anonymous:
        kwargs["skip_signature"] = True
    elif options.google_application_credentials:
        path = options.google_application_credentials
        if not os.path.isfile(path):
            raise option_error("google_application_credentials", path, "no such file")
        kwargs["application_credentials"] = path
    try:
        store = GCSStore(loc.bucket, **options.transport(endpoint), **kwargs)
    except Exception as exc:  # bad credentials files, unknown settings
        raise SourceError(f"{text}: {str(exc).splitlines()[0]}") from None
    sdk = GcsSdk(loc.bucket, endpoint, options.bounds, options.ca_file(), kwargs.get("application_credentials"))
    backend = CloudStore(store, loc.prefix, url=f"gs://{loc.location}", service="GCS", sdk=sdk,
                         read_only=options.read_only)
    return probe(backend, options)


def _emulator_host() -> str | None:
    """``STORAGE_EMULATOR_HOST`` as Google's client libraries read it (``host:port`` or a URL)."""
    host = os.environ.get("STORAGE_EMULATOR_HOST")
    if not host:
        return None
    return host if "://" in host else f"http://{host}"


def connection_string() -> dict[str, str]:
    """``AZURE_STORAGE_CONNECTION_STRING``'s settings (``Key=Value;...``), by key."""
    text = os.environ.get("AZURE_STORAGE_CONNECTION_STRING", "")
    out = {}
    for part in text.split(";"):
        key, eq, value = part.partition("=")
        if eq and key.strip():
            out[key.strip()] = value.strip()
    return out


def open_azure(options: CloudOptions) -> CloudStore:
    from obstore.store import AzureStore

    text = options.source
    loc = parse_azure_source(text)
    conn = connection_string()
    account = (loc.account or options.azure_storage_account or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
               or os.environ.get("AZURE_STORAGE_ACCOUNT") or conn.get("AccountName"))
    endpoint = options.endpoint_url or conn.get("BlobEndpoint") or os.environ.get("AZURE_STORAGE_ENDPOINT")
    if not account and not endpoint:
        raise SourceError(f"{text}: no Azure storage account: name one in the URL "
                          "(abfs://CONTAINER@ACCOUNT.dfs.core.windows.net/...), with -o azure_storage_account= "
                          "or AZURE_STORAGE_ACCOUNT_NAME")
    kwargs: dict[str, Any] = _azure_credentials(options.anonymous, conn)
    if account:
        kwargs["account_name"] = account
    if endpoint:
        kwargs["endpoint"] = endpoint.rstrip("/")
    try:
        store = AzureStore(loc.bucket, **options.transport(endpoint), **kwargs)
    except Exception as exc:
        raise SourceError(f"{text}: {str(exc).splitlines()[0]}") from None
    sdk = AzureSdk(loc.bucket, endpoint, options.bounds, options.ca_file(), account,
                   azure_credential(account, kwargs.get("account_key"), kwargs.get("sas_key")))
    backend = CloudStore(store, loc.prefix, url=f"az://{loc.location}", service="Azure", sdk=sdk,
                         read_only=options.read_only)
    return probe(backend, options)


def _azure_credentials(anonymous: bool, conn: dict[str, str]) -> dict[str, Any]:
    """obstore's Azure credentials the environment names beyond what obstore reads itself: an
    account key as ``AZURE_STORAGE_KEY`` or in the connection string, the string's SAS token."""
    if anonymous:
        return {"skip_signature": True}
    out = {}
    key = os.environ.get("AZURE_STORAGE_KEY") or conn.get("AccountKey")
    if key and not any(os.environ.get(v) for v in ("AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_ACCESS_KEY",
                                                   "AZURE_STORAGE_MASTER_KEY")):
        out["account_key"] = key
    if sas := conn.get("SharedAccessSignature"):
        out["sas_key"] = sas
    return out


def probe(backend: CloudStore, options: CloudOptions) -> CloudStore:
    """Fail now, with one line, if the bucket is missing, the credentials wrong or the endpoint
    down; a writable store's writes (and deletes) are conditional where the server honours
    conditions (one probe)."""
    checking = not options.read_only and options.overwrite == "checked"
    if checking and backend.sdk is not None:
        backend.sdk.warm()
    try:
        backend.probe()
    except Exception as exc:  # noqa: BLE001 - reported to the user, one line
        raise SourceError(f"{options.source}: {exc}") from None
    if checking:
        checked = backend.probe_conditions()  # sets checks_deletes itself: the record is read after it
        backend.capabilities = replace(backend.capabilities, checks_writes=checked)
    return backend
