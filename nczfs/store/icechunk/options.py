"""What a mount's options ask of the Icechunk backend (:class:`IcechunkOptions`) and its ``-o``
rows (its own, refused on other sources, and S3's endpoint, profile and region)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Mapping

from nczfs.toolbox.errors import BadValue
from nczfs.store.options import OptionRow, given, nonempty
from nczfs.store.objstore.options import ENDPOINT, PROFILE

if TYPE_CHECKING:
    from nczfs.store.opening import Opening

#: what the mount root shows: one of them
POINTS = ("branch", "tag", "snapshot")
#: the prefixes of virtual chunk containers Icechunk reads (nczfs.store.icechunk.repository)
VIRTUAL_PREFIXES = ("file://", "s3://", "gs3://", "http://", "https://")


def _option(out: dict[str, object], key: str, value: str) -> None:
    if key == "virtual_chunk_container":
        if not value.partition("=")[0].startswith(VIRTUAL_PREFIXES):
            raise BadValue("the prefix must be a file://, s3:// or http(s):// URL")
        out["virtual_chunk_containers"] = (*out.get("virtual_chunk_containers", ()), value)  # type: ignore[misc]  # out holds objects: this one a tuple
        return
    if key in POINTS and any(k in out for k in POINTS if k != key):
        raise BadValue("choose one of branch=, tag= and snapshot=")
    out[key] = value


OWN = (
    OptionRow("branch=NAME, tag=NAME, snapshot=ID",
              "Icechunk: what the root shows (default branch main; a tag or snapshot: read-only)",
              {k: (nonempty, _option) for k in POINTS}, own=True),
    OptionRow("commit_message=TEXT", "Icechunk: the message of the mount's commits (default: host and time)",
              {"commit_message": (nonempty, _option)}, own=True),
    OptionRow("virtual_chunk_container=PREFIX[=URL]",
              "Icechunk: read virtual chunks below PREFIX (file://, s3://, https://; repeatable)",
              {"virtual_chunk_container": (nonempty, _option)}, own=True),
)


def read_only_point(values: Mapping[str, object]) -> bool:
    """A tag or a snapshot never changes: its mount is read-only."""
    return bool(values.get("tag") or values.get("snapshot"))


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

    rows: ClassVar[tuple[OptionRow, ...]] = (*OWN, *ENDPOINT, *PROFILE)

    @classmethod
    def of(cls, opening: Opening) -> IcechunkOptions:
        return given(cls, opening.options, source=opening.source.text, location=opening.source.location,
                     read_only=opening.read_only, anonymous=bool(opening.options.get("no_sign_request")))
