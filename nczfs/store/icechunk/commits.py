"""A branch mount's commits: one per sync, rebased onto commits made elsewhere meanwhile when they
do not conflict; writes that no commit took are kept on a branch of their own at the end."""

from __future__ import annotations

import datetime
import logging
import socket
from typing import Any

from nczfs.toolbox.errors import BackendError
from nczfs.store.icechunk.errors import reason

log = logging.getLogger(__name__)


def default_message() -> str:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"nczfs: writes on {socket.gethostname()} at {now}"


def held_back(where: str, waiting: list[str]) -> BackendError:
    """The error of a sync that files Icechunk cannot hold (``waiting``) keep from committing."""
    keys = sorted(waiting)
    shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
    return BackendError(
        f"{where}: not committed: Icechunk holds Zarr v3 keys of existing nodes only, "
        f"not {shown}; remove or rename them (the session keeps every write) and sync again"
    )


def commit(session: Any, message: str, *, where: str, branch: str | None) -> None:
    """Commit ``session``, rebased onto what others committed to ``branch`` if that conflicts not."""
    import icechunk

    try:
        session.commit(message, rebase_with=icechunk.ConflictDetector())
    except icechunk.RebaseFailedError as exc:
        conflicts = "; ".join(f"{c.path}: {c.conflict_type}" for c in getattr(exc, "conflicts", [])[:5])
        raise BackendError(
            f"{where}: not committed: branch {branch!r} moved on with conflicting changes "
            f"({conflicts or reason(exc)}); the session keeps every write: run nczfs sync again "
            "once the conflict is resolved"
        ) from None
    except Exception as exc:  # noqa: BLE001
        raise BackendError(
            f"{where}: not committed: {reason(exc)}; the session keeps every write: run nczfs sync again"
        ) from None


def keep_uncommitted(repo: Any, session: Any, message: str, *, where: str, branch: str | None) -> str | None:
    """Writes still uncommitted at the end (their sync failed: a conflict) are not lost: they
    become a snapshot on a branch of their own, named in the log and returned (None: there were
    none, or they could not be kept)."""
    if not session.has_uncommitted_changes:
        return None
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    name = f"nczfs-unmerged-{branch}-{stamp}"
    try:
        snap = session.flush(f"{message} (not merged into {branch})")
        repo.create_branch(name, snap)
    except Exception as exc:  # noqa: BLE001 - logged: nothing else can be done at exit
        log.error("%s: writes not committed and not kept: %s", where, reason(exc))
        return None
    log.error("%s: writes not committed to branch %r kept on branch %r (snapshot %s): merge them from there",
              where, branch, name, snap)
    return name
