"""Opening an Icechunk repository from a mount's config: its storage (a local directory, or S3
with the mount's endpoint, region and credentials), the virtual chunk containers it may read,
and the store on what it mounts."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from nczfs.errors import NczfsError, SourceError
from nczfs.store.icechunk.errors import reason
from nczfs.store.icechunk.store import IcechunkStore

if TYPE_CHECKING:
    from nczfs.config import MountConfig


def _s3_credentials(config: MountConfig) -> dict[str, Any]:
    """The mount's S3 credentials as icechunk takes them: anonymous, or the AWS CLI's chain."""
    if config.no_sign_request:
        return {"anonymous": True}
    import boto3
    import botocore.exceptions

    try:
        creds = boto3.session.Session(profile_name=config.profile).get_credentials()
    except botocore.exceptions.BotoCoreError as exc:
        raise SourceError(f"{config.source.text}: {exc}") from None
    if creds is None:
        return {"anonymous": True}
    frozen = creds.get_frozen_credentials()
    return {"access_key_id": frozen.access_key, "secret_access_key": frozen.secret_key, "session_token": frozen.token}


def _region(config: MountConfig) -> str:
    if config.region:
        return config.region
    import boto3

    try:
        return boto3.session.Session(profile_name=config.profile).region_name or "us-east-1"
    except Exception:  # noqa: BLE001 - ProfileNotFound is reported by _s3_credentials
        return "us-east-1"


def _endpoint(config: MountConfig) -> str | None:
    return config.endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")


def storage_for(config: MountConfig) -> Any:
    import icechunk

    location = config.source.location
    if not location.startswith("s3://"):
        return icechunk.local_filesystem_storage(location)
    bucket, _, prefix = location[len("s3://"):].partition("/")
    endpoint = _endpoint(config)
    return icechunk.s3_storage(
        bucket=bucket, prefix=prefix.strip("/") or None, region=_region(config), endpoint_url=endpoint,
        allow_http=bool(endpoint and endpoint.startswith("http://")), force_path_style=bool(endpoint),
        **_s3_credentials(config),
    )


def virtual_containers(config: MountConfig) -> tuple[list[Any], dict[str, Any]]:
    """The ``-o virtual_chunk_container=PREFIX[=URL]`` containers, and the credentials of each."""
    import icechunk

    containers, creds = [], {}
    for spec in config.virtual_chunk_containers:
        prefix, _, url = spec.partition("=")
        if prefix.startswith("file://"):
            store = icechunk.local_filesystem_store(url or prefix[len("file://"):])
            cred = None
        elif prefix.startswith(("s3://", "gs3://")):
            endpoint = url or _endpoint(config)
            store = icechunk.s3_store(
                region=_region(config), endpoint_url=endpoint, allow_http=bool(endpoint and endpoint.startswith("http://")),
                anonymous=config.no_sign_request, s3_compatible=bool(endpoint), force_path_style=bool(endpoint),
            )
            cred = icechunk.s3_credentials(**_s3_credentials(config))
        elif prefix.startswith(("http://", "https://")):
            store, cred = icechunk.http_store(), None
        else:
            raise SourceError(f"-o virtual_chunk_container={spec}: the prefix must be a file://, s3:// or http(s):// URL")
        containers.append(icechunk.VirtualChunkContainer(prefix, store))
        creds[prefix] = cred
    return containers, creds


def open_repository(config: MountConfig) -> Any:
    try:
        import icechunk
    except ImportError:
        raise SourceError(f"{config.source.text}: Icechunk sources need the icechunk package "
                          "(pip install 'nczfs[icechunk]')") from None

    if not os.environ.get("ICECHUNK_LOG"):
        icechunk.set_logs_filter("error")  # its warnings would go to stderr, not the mount's log
    storage = storage_for(config)
    try:
        repo = icechunk.Repository.open(storage)
        containers, creds = virtual_containers(config)
        if containers:
            repo_config = repo.config
            for container in containers:
                repo_config.set_virtual_chunk_container(container)
            repo = icechunk.Repository.open(
                storage, config=repo_config, authorize_virtual_chunk_access=icechunk.containers_credentials(creds)
            )
    except NczfsError:
        raise
    except Exception as exc:  # noqa: BLE001 - no repository there, storage unreachable
        raise SourceError(f"{config.source.text}: cannot open the Icechunk repository: {reason(exc)}") from None
    return repo


def open_icechunk(config: MountConfig) -> IcechunkStore:
    return IcechunkStore(
        open_repository(config),
        branch=config.branch,
        tag=config.tag,
        snapshot=config.snapshot,
        read_only=config.read_only,
        commit_message=config.commit_message,
        where=config.source.text,
    )
