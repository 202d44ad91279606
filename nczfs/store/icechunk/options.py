"""What a mount's options ask of the Icechunk backend (:class:`IcechunkOptions`), built from its
MountConfig by the scheme registry (:mod:`nczfs.store.registry`), the one place that reads it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class IcechunkOptions:
    """The repository (SOURCE), what its mount root shows (-o branch=, tag=, snapshot=, ro), the
    message of its commits (-o commit_message=), the virtual chunk containers it may read
    (-o virtual_chunk_container=) and how S3 is reached, for the repository's storage and
    virtual chunks alike (-o profile=, region=, endpoint_url=, no_sign_request)."""

    #: SOURCE as given (errors name it)
    source: str
    #: a local repository's path, or ``s3://bucket/prefix``
    location: str
    #: a branch (default main), or a tag or a snapshot, which mount read-only
    branch: str | None = None
    tag: str | None = None
    snapshot: str | None = None
    read_only: bool = False
    #: the message of the mount's commits (default: host and time)
    commit_message: str | None = None
    #: ``PREFIX[=URL]`` of each container whose virtual chunks the mount may read
    virtual_chunk_containers: tuple[str, ...] = ()
    profile: str | None = None
    region: str | None = None
    endpoint_url: str | None = None
    #: no credentials at all (-o no_sign_request)
    anonymous: bool = False
