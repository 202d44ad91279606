"""What a mount tells its filesystem: owner and permissions of what it shows, the metadata TTL,
and where pending writes are kept."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FsOptions:
    uid: int = 0
    gid: int = 0
    #: permission bits of objects and directories are 0o666/0o777 less this (-o umask=)
    umask: int = 0o022
    read_only: bool = False
    metadata_ttl: float = 1.0
    #: bytes of pending writes one file keeps in memory before it moves to a temp file (None:
    #: a quarter of write_memory, at least MIN_SPILL_THRESHOLD)
    spill_threshold: int | None = None
    spill_dir: str | None = None
    #: bytes of pending writes all files together keep in memory; past it, a growing file spills
    #: to a temp file (None: as the read cache's default, an eighth of RAM between 64 MiB and 1 GiB)
    write_memory: int | None = None
