"""S3 URL forms netCDF-C accepts (NCZARR_FORMATS.md section 6), reduced to bucket, prefix and endpoint.

``s3://b/p``, ``gs3://b/p``, ``https://s3.<region>.amazonaws.com/b/p`` (path style),
``https://b.s3[.<region>].amazonaws.com/p`` (virtual host), ``https://storage.googleapis.com/b/p``,
``https://b.s3.<region>.<domain>/p`` and any other ``http(s)://host[:port]/b/p`` (an
S3-compatible server, path style). The fragment is handled by :mod:`nczfs.config.source`,
the ``[k=v]`` prefix by :mod:`nczfs.toolbox.urlparams`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from nczfs.toolbox.errors import SourceError
from nczfs.toolbox.urlparams import split_bracket_prefix

GOOGLE_ENDPOINT = "https://storage.googleapis.com"
#: S3 bucket naming rules (DNS-compatible names; dots allowed)
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str  # "" or a key prefix without leading/trailing "/"
    #: endpoint URL named by the URL itself (None: AWS, chosen by boto3 from the region)
    endpoint_url: str | None = None
    #: region named by the host (s3.<region>.amazonaws.com), else None
    region: str | None = None


def _split_path(path: str, text: str) -> tuple[str, str]:
    parts = [p for p in unquote(path).split("/") if p]
    if not parts:
        raise SourceError(f"{text}: no bucket in the URL")
    return parts[0], "/".join(parts[1:])


def _aws_region(host_rest: str) -> str | None:
    """``s3.amazonaws.com`` -> None, ``s3.eu-west-1.amazonaws.com`` / ``s3-eu-west-1...`` -> the region."""
    m = re.match(r"^s3[.-]([a-z0-9-]+)\.amazonaws\.com$", host_rest)
    if m and m.group(1) not in ("external-1",):
        return m.group(1)
    return None


def parse_s3_url(text: str) -> S3Location:
    """Bucket, prefix, endpoint and region from an S3 URL; SourceError with one line if it is not one."""
    body, _ = split_bracket_prefix(text.split("#", 1)[0])  # netCDF-C's old [k=v] prefix
    try:
        parts = urlsplit(body)
        parts.port  # noqa: B018 - a port out of range, or not a number, raises ValueError here
    except ValueError as exc:
        raise SourceError(f"{text}: not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme in ("s3", "gs3"):
        if not parts.netloc:
            raise SourceError(f"{text}: no bucket in the URL")
        bucket, prefix = parts.netloc, unquote(parts.path).strip("/")
        endpoint = GOOGLE_ENDPOINT if scheme == "gs3" else None
        loc = S3Location(bucket, _clean_prefix(prefix, text), endpoint, None)
    elif scheme in ("http", "https"):
        if not host:
            raise SourceError(f"{text}: no host in the URL")
        loc = _http_location(scheme, host, parts, text)
    else:
        raise SourceError(f"{text}: not an S3 URL")
    if not _BUCKET.match(loc.bucket) or ".." in loc.bucket:
        raise SourceError(f"{text}: {loc.bucket!r} is not a valid S3 bucket name")
    return loc


def _http_location(scheme: str, host: str, parts, text: str) -> S3Location:
    if host.endswith(".amazonaws.com"):
        if host.startswith("s3.") or host.startswith("s3-"):  # path style
            bucket, prefix = _split_path(parts.path, text)
            return S3Location(bucket, _clean_prefix(prefix, text), None, _aws_region(host) or "us-east-1")
        m = re.match(r"^(.+?)\.(s3[.-].*amazonaws\.com)$", host)
        if not m:
            raise SourceError(f"{text}: an amazonaws.com host that names no S3 endpoint")
        region = _aws_region(m.group(2)) or "us-east-1"
        return S3Location(m.group(1), _clean_prefix(unquote(parts.path).strip("/"), text), None, region)
    if host == "storage.googleapis.com":
        bucket, prefix = _split_path(parts.path, text)
        return S3Location(bucket, _clean_prefix(prefix, text), GOOGLE_ENDPOINT, None)
    port = f":{parts.port}" if parts.port else ""
    m = re.match(r"^([a-z0-9][a-z0-9.\-]*?)\.s3\.([a-z0-9-]+)\.(.+)$", host)
    if m:  # https://<bucket>.s3.<region>.<domain>/<key>: virtual host on another provider
        endpoint = f"{scheme}://s3.{m.group(2)}.{m.group(3)}{port}"
        return S3Location(m.group(1), _clean_prefix(unquote(parts.path).strip("/"), text), endpoint, m.group(2))
    bucket, prefix = _split_path(parts.path, text)
    netloc_host = f"[{host}]" if ":" in host else host
    return S3Location(bucket, _clean_prefix(prefix, text), f"{scheme}://{netloc_host}{port}", None)


def _clean_prefix(prefix: str, text: str) -> str:
    prefix = prefix.strip("/")
    if prefix and any(seg in ("", ".", "..") for seg in prefix.split("/")):
        raise SourceError(f"{text}: the key prefix {prefix!r} has an empty, '.' or '..' segment")
    return prefix
