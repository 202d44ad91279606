"""What a mount's daemon keeps beside its control socket: a description of the mount, so that
what a killed daemon left behind can be found.

In the runtime directory (root: ``/run/nczfs``; another user: ``$XDG_RUNTIME_DIR/nczfs``, else
``/tmp/nczfs-UID``; mode 0700), for the daemon ``PID``:

- ``PID.sock``: the control socket (controlsock.py);
- ``PID.json``: the mount point, the source, the backend and its location, written at start.

A clean exit removes them. After a ``kill -9`` they stay: ``nczfs umount`` of the stale mount
reads them to say what was left behind and where (:func:`left_behind`); the next mount of the same
source, which recovers it, removes them (:func:`take_over`), and so does any mount starting while
nothing is left (:func:`prune`).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from typing import Any


def runtime_dir(uid: int | None = None) -> str:
    """Where the daemons of user ``uid`` (default: this process's) keep their sockets and state."""
    uid = os.getuid() if uid is None else uid
    if uid == 0:
        return "/run/nczfs"
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg) and os.stat(xdg).st_uid == uid:
        return os.path.join(xdg, "nczfs")
    return f"/tmp/nczfs-{uid}"


def private_dir(path: str) -> str:
    """``path`` made if missing (0700), and refused unless it is a directory of this user's that
    no one else may write (in ``/tmp`` another user could have made it first)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise OSError(errno.EPERM, f"{path} is not a private directory of uid {os.getuid()}")
    return path


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _path(directory: str, pid: int, ext: str) -> str:
    return os.path.join(directory, f"{pid}.{ext}")


def _pids(directory: str, ext: str) -> list[int]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    out = []
    for name in names:
        stem, dot, rest = name.partition(".")
        if dot and rest == ext and stem.isdigit():
            out.append(int(stem))
    return out


def write_state(directory: str, state: dict[str, Any]) -> None:
    """This daemon's ``PID.json`` (written whole, then renamed into place)."""
    path = _path(directory, os.getpid(), "json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": os.getpid(), **state}, f)
    os.replace(tmp, path)


def remove_state(directory: str, pid: int | None = None) -> None:
    """Remove the state of daemon ``pid`` (default: this one)."""
    pid = os.getpid() if pid is None else pid
    for ext in ("json",):
        try:
            os.unlink(_path(directory, pid, ext))
        except OSError:
            pass


def read_state(directory: str, pid: int) -> dict[str, Any] | None:
    try:
        with open(_path(directory, pid, "json")) as f:
            state = json.load(f)
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def dead_states(directory: str) -> list[dict[str, Any]]:
    """The states of daemons that are gone, newest first."""
    found = []
    for pid in _pids(directory, "json"):
        if alive(pid):
            continue
        state = read_state(directory, pid)
        if state is not None:
            try:
                state["_mtime"] = os.stat(_path(directory, pid, "json")).st_mtime
            except OSError:
                continue
            found.append(state)
    return sorted(found, key=lambda s: -s["_mtime"])


def state_dirs() -> list[str]:
    """Every runtime directory this user may read: its own; root's view takes in every user's."""
    dirs = [runtime_dir()]
    if os.getuid() == 0:
        for parent, pattern in (("/run/user", None), ("/tmp", "nczfs-")):
            try:
                names = os.listdir(parent)
            except OSError:
                continue
            for name in names:
                if pattern is None and name.isdigit():
                    dirs.append(os.path.join(parent, name, "nczfs"))
                elif pattern is not None and name.startswith(pattern) and name[len(pattern):].isdigit():
                    dirs.append(os.path.join(parent, name))
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


# ------------------------------------------------------------------ after a crash


def find_dead(mountpoint: str) -> tuple[str, dict[str, Any]] | None:
    """The state (and its directory) of the newest dead daemon that served ``mountpoint``."""
    best = None
    for directory in state_dirs():
        for state in dead_states(directory):
            if state.get("mountpoint") == mountpoint and (best is None or state["_mtime"] > best[1]["_mtime"]):
                best = (directory, state)
    return best


def left_behind(directory: str, state: dict[str, Any]) -> list[str]:
    """What the dead daemon of ``state`` left pending, and where, one sentence each ([]: nothing)."""
    out = []
    staging = state.get("staging")
    if isinstance(staging, str):
        from nczfs.store.zip_staging import staged_changes

        n = staged_changes(staging)
        if n:
            out.append(f"{n} change(s) staged in {staging} are not yet in {state.get('location')}; "
                       f"mount it read/write again to commit them")
    return out


def prune(directory: str) -> None:
    """Remove the states of dead daemons that left nothing behind."""
    for state in dead_states(directory):
        if not left_behind(directory, state):
            remove_state(directory, state["pid"])


def take_over(directory: str, backend: str, location: str) -> list[dict[str, Any]]:
    """This mount serves what dead daemons served (it has recovered what they left: a zip's
    staged writes): their states are removed and returned."""
    taken = [s for s in dead_states(directory) if (s.get("backend"), s.get("location")) == (backend, location)]
    for state in taken:
        remove_state(directory, state["pid"])
    return taken
