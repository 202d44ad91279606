"""The S3 clients of a mount: one boto3 client, and obstore's S3 store configured from it.

Both follow the AWS CLI's credential chain, endpoint, region and CA bundle (``AWS_CA_BUNDLE``):
the boto3 client finds them, and obstore is given the client's credentials and never looks for
any itself (no instance-metadata lookup of its own), as :class:`~.options.S3Options` ask.
"""

from __future__ import annotations

import datetime
import os
from typing import TYPE_CHECKING, Any

import boto3
import botocore.exceptions
from botocore import UNSIGNED
from botocore.config import Config

from nczfs.toolbox.errors import SourceError
from nczfs.store.objstore.s3url import S3Location
from nczfs.store.objstore.options import S3Options
from nczfs.store.objstore.transport import obstore_client_options, retry_config

if TYPE_CHECKING:
    from obstore.store import S3Credential

#: credentials that botocore refreshes are handed to obstore for at most this long
CREDENTIALS_TTL = datetime.timedelta(minutes=5)


def _session(options: S3Options) -> tuple[Any, str | None]:
    """The boto3 session of the profile asked for, and the profile's ``s3 = addressing_style``
    (as the AWS CLI reads it)."""
    profile = options.profile
    try:
        session = boto3.session.Session(profile_name=None if profile in (None, "no") else profile)
        style = (session._session.get_scoped_config().get("s3") or {}).get("addressing_style")
    except botocore.exceptions.BotoCoreError as exc:  # ProfileNotFound and friends
        raise SourceError(f"{options.source}: {exc}") from None
    return session, style


def make_client(options: S3Options, loc: S3Location, max_pool: int = 32):
    """One boto3 S3 client for the bucket at ``loc``: endpoint, profile, region and signing as the
    AWS CLI would; path style for an endpoint of its own (S3-compatible servers), unless the
    profile says otherwise, and AWS's choice on AWS."""
    session, style = _session(options)
    region = options.region or loc.region or options.url_region or session.region_name or "us-east-1"
    endpoint = options.endpoint_url or loc.endpoint_url
    custom = bool(endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"))
    cfg = Config(
        region_name=region,
        retries=options.botocore(),
        connect_timeout=options.connect_timeout,
        read_timeout=options.read_timeout,
        max_pool_connections=max_pool,
        tcp_keepalive=True,
        s3={"addressing_style": style or ("path" if custom or options.path_style else "auto")},
        signature_version=UNSIGNED if options.unsigned or options.profile == "no" else None,
        **_checksums(endpoint, options),
    )
    try:
        return session.client("s3", endpoint_url=endpoint, config=cfg)
    except (botocore.exceptions.BotoCoreError, ValueError) as exc:
        raise SourceError(f"{options.source}: {exc}") from None


def _checksums(endpoint: str | None, options: S3Options) -> dict[str, str]:
    """Over http a signed request's body is covered by its signature (SigV4 signs the SHA-256
    of every payload there): no CRC32 of it besides, which botocore's default adds to every
    UploadPart (docs/PERFORMANCE.md, issue 46). Over https, and unsigned, the CRC32 stays the
    one check of the body."""
    signed = not (options.unsigned or options.profile == "no")
    if signed and endpoint is not None and endpoint.lower().startswith("http://"):
        return {"request_checksum_calculation": "when_required"}
    return {}


class BotoCredentials:
    """obstore's credential provider: the boto3 client's own credentials (the AWS CLI's chain,
    refreshed by botocore), so obstore never looks for credentials itself."""

    def __init__(self, client: Any):
        self._signer = client._request_signer

    def __call__(self) -> S3Credential:
        creds = self._signer._credentials
        if creds is None:
            raise PermissionError("no AWS credentials found (set a profile, AWS_ACCESS_KEY_ID, or --no-sign-request)")
        frozen = creds.get_frozen_credentials()
        refreshing = getattr(creds, "refresh_needed", None) is not None
        return {"access_key_id": frozen.access_key, "secret_access_key": frozen.secret_key, "token": frozen.token,
                "expires_at": datetime.datetime.now(datetime.timezone.utc) + CREDENTIALS_TTL if refreshing else None}


def _ca_bundle(client: Any) -> str | None:
    """The CA bundle the boto3 client verifies with (``AWS_CA_BUNDLE``, the profile's ``ca_bundle``)."""
    verify = getattr(getattr(getattr(client, "_endpoint", None), "http_session", None), "_verify", None)
    if isinstance(verify, str) and os.path.isfile(verify):
        return verify
    return os.environ.get("AWS_CA_BUNDLE") or None


def _addressing(endpoint: str, style: str, bucket: str) -> dict[str, Any]:
    """obstore's endpoint and addressing: on AWS virtual-hosted, unless the bucket's name has dots;
    another endpoint path style, unless the client says virtual."""
    host = endpoint.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0]
    if host.endswith(".amazonaws.com") and style != "path":
        out: dict[str, Any] = {"virtual_hosted_style_request": "." not in bucket}
        if "." in bucket or style == "virtual":
            out["endpoint"] = endpoint
        return out
    if style == "virtual":  # obstore wants the bucket in a virtual-hosted endpoint
        scheme, rest = endpoint.split("://", 1)
        return {"endpoint": f"{scheme}://{bucket}.{rest}", "virtual_hosted_style_request": True}
    return {"endpoint": endpoint, "virtual_hosted_style_request": False}


def _requests(options: S3Options) -> dict[str, Any]:
    """obstore's settings for what every request says (requester pays, server-side encryption)."""
    out: dict[str, Any] = {}
    if options.requester_pays:
        out["request_payer"] = True
    if options.sse:
        out["server_side_encryption"] = options.sse
    if options.sse_kms_key_id:
        out["sse_kms_key_id"] = options.sse_kms_key_id
    return out


def obstore_s3(client: Any, bucket: str, options: S3Options) -> Any:
    """An obstore S3 store for ``bucket`` configured as the boto3 ``client`` is: its endpoint and
    addressing, region, credentials or unsigned requests, CA bundle; and as ``options`` ask
    (retries, timeouts, requester pays, server-side encryption)."""
    from obstore.store import S3Store as ObstoreS3

    meta = client.meta
    endpoint = meta.endpoint_url.rstrip("/")
    kwargs: dict[str, Any] = {"region": meta.region_name or "us-east-1", **_requests(options),
                              **_addressing(endpoint, (meta.config.s3 or {}).get("addressing_style") or "auto", bucket)}
    if endpoint.startswith("https://"):
        kwargs["unsigned_payload"] = True  # as botocore signs over TLS: no SHA-256 of every body
    credentials = None
    if meta.config.signature_version is UNSIGNED:
        kwargs["skip_signature"] = True
    else:
        credentials = BotoCredentials(client)
    return ObstoreS3(bucket, credential_provider=credentials, client_options=obstore_client_options(
        endpoint, _ca_bundle(client), connect_timeout=options.connect_timeout, read_timeout=options.read_timeout),
        retry_config=retry_config(options.retries), **kwargs)
