"""What a mount's options ask of the S3 backend (:class:`S3Options`), built once from its
MountConfig. No client library is imported here: a reference set's mount carries these for the
s3:// targets it may never read."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nczfs.store.s3.transport import Bounds

if TYPE_CHECKING:
    from nczfs.config import MountConfig


@dataclass(frozen=True)
class S3Options(Bounds):
    """What a mount's options ask of the S3 backend: the bounds of every request (-o retries=,
    connect_timeout=, read_timeout=), what every request says (-o requester_pays, sse=,
    sse_kms_key_id=, storage_class=), and where and as whom it is sent (-o profile=, region=,
    endpoint_url=, no_sign_request, use_path_request_style, posix_meta, ro)."""

    requester_pays: bool = False
    sse: str | None = None
    sse_kms_key_id: str | None = None
    storage_class: str | None = None
    #: SOURCE as given (errors name it)
    source: str = ""
    profile: str | None = None
    region: str | None = None
    #: the region the URL's ``#aws.region=`` names (after the URL's own host's)
    url_region: str | None = None
    endpoint_url: str | None = None
    unsigned: bool = False
    path_style: bool = False
    read_only: bool = False
    #: objects looked up or listed are asked (HEAD) for the attributes in their metadata
    posix_meta: bool = False
    #: -o overwrite=: "checked" (a write replaces only the version it started from) or
    #: "last_writer_wins"
    overwrite: str = "checked"

    @classmethod
    def of(cls, config: MountConfig) -> S3Options:
        params = config.source.params
        given = {k: getattr(config, k) for k in ("sse", "sse_kms_key_id", "storage_class") if getattr(config, k) is not None}
        return cls(requester_pays=config.requester_pays, source=config.source.text,
                   profile=config.profile or params.get("aws.profile") or params.get("awsprofile"),
                   region=config.region, url_region=params.get("aws.region"), endpoint_url=config.endpoint_url,
                   unsigned=config.no_sign_request, path_style=config.path_style, read_only=config.read_only,
                   posix_meta=config.posix_meta, overwrite=config.overwrite, **Bounds.given(config), **given)

    def payer(self) -> dict[str, str]:
        """boto3's argument naming the requester as the payer, if asked for."""
        return {"RequestPayer": "requester"} if self.requester_pays else {}

    def writes(self) -> dict[str, str]:
        """boto3's arguments of a request that makes an object (multipart upload, copy)."""
        out = self.payer()
        if self.storage_class:
            out["StorageClass"] = self.storage_class
        if self.sse:
            out["ServerSideEncryption"] = self.sse
        if self.sse_kms_key_id:
            out["SSEKMSKeyId"] = self.sse_kms_key_id
        return out

    def without_retries(self) -> S3Options:
        return dataclasses.replace(self, retries=0)
