"""What a mount's daemon keeps beside its control socket: a description of the mount, and the
multipart uploads it has open, so that what a killed daemon left behind can be found.

In the runtime directory (root: ``/run/nczfs``; another user: ``$XDG_RUNTIME_DIR/nczfs``, else
``/tmp/nczfs-UID``; mode 0700), for the daemon ``PID``:

- ``PID.sock``: the control socket (controlsock.py);
- ``PID.json``: the mount point, the source, its scope (the backend and where it lives: an S3
  endpoint, bucket and prefix), and where a zip mount stages its writes, written at start;
- ``PID.uploads``: one line per multipart upload opened (``open ID KEY``) and per upload
  completed or aborted (``done ID``), appended with one ``write`` each (S3 only).

A clean exit removes them (keeping ``PID.uploads`` and ``PID.json`` if an upload could not be
aborted). After a ``kill -9`` they stay: ``nczfs umount`` of the stale mount reads them to say
what was left behind and where (:func:`left_behind`); the next mount of the same scope takes them
over (:func:`take_over`): it recovers what they left (a zip's staged writes) and aborts the
uploads they had open, which no live writer can own; any mount starting removes those that left
nothing (:func:`prune`).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from typing import Any

from nczfs.store.registry import BACKENDS


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
    for ext in ("json", "uploads"):
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


# ------------------------------------------------------------------ multipart uploads


class UploadJournal:
    """``PID.uploads``: the multipart uploads this daemon has open, one appended line each change."""

    def __init__(self, directory: str):
        self.path = uploads_path(directory, os.getpid())
        self._fd: int | None = None
        self._lock = threading.Lock()

    def _append(self, line: str) -> None:
        data = (line + "\n").encode()
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(self._fd, data)

    def opened(self, upload_id: str, s3_key: str) -> None:
        self._append(f"open {json.dumps(upload_id)} {json.dumps(s3_key)}")

    def done(self, upload_id: str) -> None:
        self._append(f"done {json.dumps(upload_id)}")

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def open_uploads(path: str) -> dict[str, str]:
    """The uploads a journal says are still open: upload id -> S3 key (a torn last line ignored)."""
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
    except OSError:
        return out
    for line in lines:
        word, _, rest = line.partition(" ")
        try:
            if word == "open":
                dec = json.JSONDecoder()
                upload_id, end = dec.raw_decode(rest)
                out[upload_id] = dec.raw_decode(rest[end:].lstrip())[0]
            elif word == "done":
                out.pop(json.loads(rest), None)
        except ValueError:
            continue
    return out




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
    backend = BACKENDS.get(state.get("backend", ""))
    if isinstance(staging, str) and backend is not None and backend.staged is not None:
        n = backend.staged(staging)
        if n:
            out.append(f"{n} change(s) staged in {staging} are not yet in {state.get('location')}; "
                       f"mount it read/write again to commit them")
    uploads = open_uploads(uploads_path(directory, state["pid"]))
    if uploads:
        shown = ", ".join(sorted(uploads.values())[:3]) + (" ..." if len(uploads) > 3 else "")
        out.append(f"{len(uploads)} multipart upload(s) left open in {state.get('scope')} ({shown}); "
                   f"the next mount of it aborts them")
    return out


def prune(directory: str) -> None:
    """Remove the states of dead daemons that left nothing behind."""
    for state in dead_states(directory):
        if not left_behind(directory, state):
            remove_state(directory, state["pid"])


def take_over(directory: str, scope: str) -> dict[str, str]:
    """This mount serves the ``scope`` dead daemons served, and has recovered what they left
    there (a zip's staged writes): their states are removed, and the multipart uploads they had
    open returned (upload id -> S3 key) for the mount to abort."""
    uploads: dict[str, str] = {}
    for state in dead_states(directory):
        if state.get("scope") == scope:
            uploads.update(open_uploads(uploads_path(directory, state["pid"])))
            remove_state(directory, state["pid"])
    return uploads


def uploads_path(directory: str, pid: int) -> str:
    return _path(directory, pid, "uploads")
