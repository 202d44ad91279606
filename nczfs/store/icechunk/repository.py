"""Opening an Icechunk repository from a mount's :class:`IcechunkOptions`: its storage (a local
directory, or S3 with the mount's endpoint, region and credentials), the virtual chunk containers
it may read, and the store on what it mounts."""

from __future__ import annotations

import os
from typing import Any, Callable

from nczfs.toolbox.errors import NczfsError, SourceError, option_error
from nczfs.store.icechunk.errors import reason
from nczfs.store.icechunk.options import IcechunkOptions
from nczfs.store.icechunk.store import IcechunkStore


def _s3_credentials(options: IcechunkOptions) -> dict[str, Any]:
    """The mount's S3 credentials as icechunk takes them: anonymous, or the AWS CLI's chain."""
    if options.anonymous:
        return {"anonymous": True}
    import boto3
    import botocore.exceptions

    try:
        creds = boto3.session.Session(profile_name=options.profile).get_credentials()
    except botocore.exceptions.BotoCoreError as exc:
        raise SourceError(f"{options.source}: {exc}") from None
    if creds is None:
        return {"anonymous": True}
    frozen = creds.get_frozen_credentials()
    return {"access_key_id": frozen.access_key, "secret_access_key": frozen.secret_key, "session_token": frozen.token}


def _region(options: IcechunkOptions) -> str:
    if options.region:
        return options.region
    import boto3

    try:
        return boto3.session.Session(profile_name=options.profile).region_name or "us-east-1"
    except Exception:  # noqa: BLE001 - ProfileNotFound is reported by _s3_credentials
        return "us-east-1"


def _endpoint(options: IcechunkOptions) -> str | None:
    return options.endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")


def _s3_client(options: IcechunkOptions) -> Callable[..., Any]:
    """Icechunk's S3 storage for the mount: a read-only mount reads through the object_store
    crate's client, which spends half the CPU of the default (AWS SDK) client on a GET
    (docs/PERFORMANCE.md, "Icechunk: reads sent in bursts"), where the installed icechunk has
    it; a mount that commits uses the default client, which Icechunk's commits are made with."""
    import icechunk
    import icechunk.storage

    reads_only = options.read_only or options.tag is not None or options.snapshot is not None
    lighter = getattr(icechunk.storage, "s3_object_store_storage", None)
    return lighter if reads_only and lighter is not None else icechunk.s3_storage


def storage_for(options: IcechunkOptions) -> Any:
    import icechunk

    location = options.location
    if not location.startswith("s3://"):
        return icechunk.local_filesystem_storage(location)
    bucket, _, prefix = location[len("s3://"):].partition("/")
    endpoint = _endpoint(options)
    return _s3_client(options)(
        bucket=bucket, prefix=prefix.strip("/") or None, region=_region(options), endpoint_url=endpoint,
        allow_http=bool(endpoint and endpoint.startswith("http://")), force_path_style=bool(endpoint),
        **_s3_credentials(options),
    )


def virtual_containers(options: IcechunkOptions) -> tuple[list[Any], dict[str, Any]]:
    """The ``-o virtual_chunk_container=PREFIX[=URL]`` containers, and the credentials of each."""
    import icechunk

    containers, creds = [], {}
    store: Any  # icechunk's storage config of each kind
    for spec in options.virtual_chunk_containers:
        prefix, _, url = spec.partition("=")
        if prefix.startswith("file://"):
            store = icechunk.local_filesystem_store(url or prefix[len("file://"):])
            cred = None
        elif prefix.startswith(("s3://", "gs3://")):
            endpoint = url or _endpoint(options)
            store = icechunk.s3_store(
                region=_region(options), endpoint_url=endpoint, allow_http=bool(endpoint and endpoint.startswith("http://")),
                anonymous=options.anonymous, s3_compatible=bool(endpoint), force_path_style=bool(endpoint),
            )
            cred = icechunk.s3_credentials(**_s3_credentials(options))
        elif prefix.startswith(("http://", "https://")):
            store, cred = icechunk.http_store(), None
        else:
            raise option_error("virtual_chunk_container", spec, "the prefix must be a file://, s3:// or http(s):// URL")
        containers.append(icechunk.VirtualChunkContainer(prefix, store))
        creds[prefix] = cred
    return containers, creds


def open_repository(options: IcechunkOptions) -> Any:
    try:
        import icechunk
    except ImportError:
        raise SourceError(f"{options.source}: Icechunk sources need the icechunk package "
                          "(pip install 'nczfs[icechunk]')") from None

    if not os.environ.get("ICECHUNK_LOG"):
        icechunk.set_logs_filter("error")  # its warnings would go to stderr, not the mount's log
    storage = storage_for(options)
    try:
        repo = icechunk.Repository.open(storage)
        containers, creds = virtual_containers(options)
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
        raise SourceError(f"{options.source}: cannot open the Icechunk repository: {reason(exc)}") from None
    return repo


def open_icechunk(options: IcechunkOptions) -> IcechunkStore:
    return IcechunkStore(
        open_repository(options),
        branch=options.branch,
        tag=options.tag,
        snapshot=options.snapshot,
        read_only=options.read_only,
        commit_message=options.commit_message,
        where=options.source,
    )
