"""What a mount's options ask of the S3 backend (:class:`S3Options`) and its ``-o`` rows (those of
GCS, Azure and Icechunk too), built once from the mount's values. No client library is imported
here: a reference set's mount carries these for the s3:// targets it may never read."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from nczfs.toolbox.errors import BadValue
from nczfs.toolbox.optionvalues import one_of
from nczfs.store.options import OVERWRITE, Flag, OptionRow, abspath, const, flag, given, nonempty, to, valued
from nczfs.store.objstore.transport import BOUNDS, Bounds

if TYPE_CHECKING:
    from nczfs.store.opening import Opening

#: where requests go and as whom (S3, GCS, Azure, Icechunk, a reference set's s3:// targets)
ENDPOINT = (
    OptionRow("endpoint_url=URL, url=URL", "S3, GCS, Azure: the server's endpoint (--endpoint-url; url= as in s3fs)",
              {"endpoint_url": (nonempty, to("endpoint_url")), "url": (nonempty, to("endpoint_url"))},
              flags=(Flag("--endpoint-url", "S3, GCS, Azure: the server's endpoint URL (an S3-compatible server, an "
                                            "emulator)", metavar="URL"),)),
    OptionRow("no_sign_request", "S3: anonymous requests (--no-sign-request)",
              {"no_sign_request": (flag, const("no_sign_request", True))},
              flags=(Flag("--no-sign-request", "S3, GCS, Azure: anonymous (unsigned) requests, as -o anon (GCS and "
                                               "Azure: read-only)", kind="switch"),)),
    OptionRow("anon", "S3, GCS, Azure: anonymous requests (GCS and Azure: read-only)",
              {"anon": (flag, const("no_sign_request", True))}),
)
#: the AWS profile and region (S3, Icechunk)
PROFILE = (
    OptionRow("profile=NAME", "S3: the AWS profile (--profile)", {"profile": (nonempty, to("profile"))},
              flags=(Flag("--profile", "S3: the AWS profile whose credentials to use"),)),
    OptionRow("region=NAME", "S3: the bucket's region (--region)", {"region": (nonempty, to("region"))},
              flags=(Flag("--region", "S3: the bucket's region"),)),
)
#: GCS's credentials and Azure's account
CLOUD = (
    OptionRow("google_application_credentials=FILE", "GCS: the credentials file",
              {"google_application_credentials": (nonempty, to(None, abspath))}),
    OptionRow("azure_storage_account=NAME", "Azure: the storage account",
              {"azure_storage_account": (nonempty, to(None))}),
)


#: S3's server-side encryption modes, by the names users give them
SSE_MODES = {"aes256": "AES256", "s3": "AES256", "aws:kms": "aws:kms", "kms": "aws:kms", "aws:kms:dsse": "aws:kms:dsse"}
#: S3's storage classes (AWS's; S3-compatible servers take a subset)
STORAGE_CLASSES = ("STANDARD", "REDUCED_REDUNDANCY", "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING", "GLACIER",
                   "DEEP_ARCHIVE", "OUTPOSTS", "GLACIER_IR", "SNOW", "EXPRESS_ONEZONE")


def sse_mode(value: str) -> str:
    """``-o sse=``: AES256 (or s3), aws:kms (or kms), aws:kms:dsse."""
    mode = SSE_MODES.get(value.strip().lower())
    if mode is None:
        raise BadValue("must be AES256, aws:kms or aws:kms:dsse")
    return mode


def storage_class(value: str) -> str:
    """``-o storage_class=``: one of S3's storage classes, any case."""
    return one_of(value.strip().upper(), STORAGE_CLASSES, f"not an S3 storage class ({', '.join(STORAGE_CLASSES)})")


def _kms_key(out: dict, key: str, value: str) -> None:
    out["sse_kms_key_id"] = value
    out.setdefault("sse", "aws:kms")


#: what only S3 takes
S3_ONLY = (
    OptionRow("use_path_request_style", "S3: path-style addressing (as in s3fs; custom endpoints always)",
              {"use_path_request_style": (flag, const("path_style", True))}),
    OptionRow("requester_pays", "S3: requests say the requester pays",
              {"requester_pays": (flag, const("requester_pays", True))}),
    OptionRow("sse=AES256|aws:kms|aws:kms:dsse", "S3: server-side encryption of what the mount writes",
              {"sse": (valued, to("sse", lambda key, value: sse_mode(value)))}),
    OptionRow("sse_kms_key_id=KEY", "S3: the KMS key (implies sse=aws:kms)", {"sse_kms_key_id": (nonempty, _kms_key)}),
    OptionRow("storage_class=CLASS", "S3: the storage class of what the mount writes",
              {"storage_class": (valued, to("storage_class", lambda key, value: storage_class(value)))}),
    OptionRow("posix_meta", "S3: HEAD each object looked up or listed for the modes, owners, times, links in its "
                            "metadata", {"posix_meta": (flag, const("posix_meta", True))}),
)


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

    rows: ClassVar[tuple[OptionRow, ...]] = (*ENDPOINT, *PROFILE, *S3_ONLY, *BOUNDS, OVERWRITE)

    @classmethod
    def of(cls, opening: Opening) -> S3Options:
        params, values = opening.source.params, opening.options
        return given(cls, values, source=opening.source.text,
                     profile=values.get("profile") or params.get("aws.profile") or params.get("awsprofile"),
                     url_region=params.get("aws.region"), unsigned=bool(values.get("no_sign_request")),
                     read_only=opening.read_only)

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


def s3_identity(opening: Opening) -> tuple[str | None, str | None, str | None]:
    """(endpoint, region, profile): where S3 is reached and as whom, for an S3 source or a
    reference set's s3:// targets (what tells them apart in a shared --cache-dir); the profile as
    :class:`S3Options` reads it (-o profile=, else the URL's #aws.profile=)."""
    loc, options = opening.source.parsed, S3Options.of(opening)
    endpoint = (options.endpoint_url or (loc.endpoint_url if loc else None)
                or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"))
    return endpoint, options.region or (loc.region if loc else None) or options.url_region, options.profile


@dataclass(frozen=True)
class CloudOptions:
    """What a mount's options ask of a GCS or Azure source (anonymous sources are read-only:
    neither cloud takes anonymous writes)."""

    #: SOURCE as given
    source: str
    read_only: bool = False
    anonymous: bool = False
    endpoint_url: str | None = None
    bounds: Bounds = Bounds()
    google_application_credentials: str | None = None
    azure_storage_account: str | None = None
    #: -o overwrite=: "checked" (a write replaces only the version it started from) or "last_writer_wins"
    overwrite: str = "checked"

    rows: ClassVar[tuple[OptionRow, ...]] = (*ENDPOINT, *CLOUD, *BOUNDS, OVERWRITE)

    @classmethod
    def of(cls, opening: Opening) -> CloudOptions:
        values = opening.options
        anonymous = bool(values.get("no_sign_request"))
        return given(cls, values, source=opening.source.text, read_only=opening.read_only or anonymous,
                     anonymous=anonymous, bounds=given(Bounds, values))

    def transport(self, endpoint: str | None) -> dict[str, Any]:
        """Timeouts and retries; a private CA's certificates from ``SSL_CERT_FILE``."""
        return self.bounds.obstore(endpoint, self.ca_file())

    def ca_file(self) -> str | None:
        """A private CA's certificates (``SSL_CERT_FILE``), for obstore and the clouds' SDKs alike."""
        return os.environ.get("SSL_CERT_FILE") or None
