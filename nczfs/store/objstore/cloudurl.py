"""Google Cloud Storage and Azure Blob URLs, reduced to bucket (container), prefix and account.

``gs://bucket/prefix``; ``az://container/prefix``, ``abfs[s]://container/prefix`` (the account
from ``-o azure_storage_account=`` or the environment, as adlfs takes it),
``abfs[s]://container@account.dfs.core.windows.net/prefix`` (Hadoop's form) and
``https://account.blob.core.windows.net/container/prefix``. The fragment is handled by
:mod:`nczfs.config.source`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from nczfs.toolbox.errors import SourceError

#: GCS bucket names (3-63 characters, dots allowed; up to 222 with dots, rarely used)
_GCS_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._\-]{1,220}[a-z0-9]$")
#: Azure container names: 3-63 lower-case letters, digits and single hyphens
_CONTAINER = re.compile(r"^(?!.*--)[a-z0-9][a-z0-9\-]{1,61}[a-z0-9]$|^\$root$")
_AZURE_HOST = re.compile(r"^([a-z0-9]{3,24})\.(blob|dfs)\.core\.windows\.net$")


@dataclass(frozen=True)
class CloudLocation:
    scheme: str  # "gs" or "az"
    bucket: str  # bucket or container
    prefix: str  # "" or a key prefix without leading/trailing "/"
    #: Azure storage account named by the URL (None: from options or the environment)
    account: str | None = None

    @property
    def location(self) -> str:
        return f"{self.bucket}/{self.prefix}".rstrip("/")


def _prefix(path: str, text: str) -> str:
    prefix = unquote(path).strip("/")
    if prefix and any(seg in ("", ".", "..") for seg in prefix.split("/")):
        raise SourceError(f"{text}: the key prefix {prefix!r} has an empty, '.' or '..' segment")
    return prefix


def parse_cloud_url(text: str) -> CloudLocation:
    """Bucket (container), prefix and account of a gs://, az:// or abfs:// URL; SourceError with one line if it is not one."""
    parts = urlsplit(text.split("#", 1)[0])
    scheme = parts.scheme.lower()
    if scheme == "gs":
        if not parts.netloc:
            raise SourceError(f"{text}: no bucket in the URL")
        if not _GCS_BUCKET.match(parts.netloc) or ".." in parts.netloc:
            raise SourceError(f"{text}: {parts.netloc!r} is not a valid Google Cloud Storage bucket name")
        return CloudLocation("gs", parts.netloc, _prefix(parts.path, text))
    if scheme in ("az", "abfs", "abfss", "adl"):
        container, at, host = parts.netloc.partition("@")
        account = None
        if at:
            m = _AZURE_HOST.match(host.lower())
            if not m:
                raise SourceError(f"{text}: {host!r} is not an Azure storage host (<account>.dfs.core.windows.net)")
            account = m.group(1)
        if not container:
            raise SourceError(f"{text}: no container in the URL")
        if not _CONTAINER.match(container):
            raise SourceError(f"{text}: {container!r} is not a valid Azure container name")
        return CloudLocation("az", container, _prefix(parts.path, text), account)
    raise SourceError(f"{text}: not a gs://, az:// or abfs:// URL")


def azure_https_location(text: str) -> str | None:
    """``container/prefix`` of an ``https://<account>.blob.core.windows.net/...`` URL (None: another host)."""
    loc = azure_https(text)
    return None if loc is None else loc.location


def azure_https(text: str) -> CloudLocation | None:
    parts = urlsplit(text.split("#", 1)[0])
    m = _AZURE_HOST.match((parts.hostname or "").lower())
    if m is None:
        return None
    segments = [s for s in unquote(parts.path).split("/") if s]
    if not segments:
        raise SourceError(f"{text}: no container in the URL")
    if not _CONTAINER.match(segments[0]):
        raise SourceError(f"{text}: {segments[0]!r} is not a valid Azure container name")
    return CloudLocation("az", segments[0], _prefix("/".join(segments[1:]), text), m.group(1))


def parse_azure_source(text: str) -> CloudLocation:
    """Any Azure source URL: az://, abfs[s]:// or https://<account>.blob.core.windows.net/."""
    return azure_https(text) or parse_cloud_url(text)
