"""The control socket: how ``nczfs sync`` and ``nczfs umount`` ask a mount's daemon to store its
pending writes (zip: commit them).

A channel of its own, as rclone's remote control is, so that neither the file system's answers
(a kernel that turned setxattr off for the mount) nor its permissions (an ``allow_other,umask=000``
mount lets anyone write its root) decide who may make the daemon write: a Unix stream socket
``PID.sock`` in a directory only the daemon's user may enter (runstate.py: root's is
``/run/nczfs``, another user's ``$XDG_RUNTIME_DIR/nczfs``, else ``/tmp/nczfs-UID``), mode 0600. The daemon answers only root and
its own user, by the peer's credentials the kernel gives (``SO_PEERCRED``); the client checks the
other way round that the socket's peer is the daemon the control file names (fuse/control.py tells the
socket's path and the daemon's pid).

One request a connection: a JSON line ``{"command": "sync"}``; the answer, a JSON line, is
``{"ok": true}`` or ``{"ok": false, "error": "...", "failed": [keys]}``. Nothing here imports
pyfuse3; the server runs on trio, the client blocks.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import struct
from typing import Any, Awaitable, Callable

from nczfs.daemon.runstate import alive, private_dir, runtime_dir

log = logging.getLogger(__name__)

#: bytes a request may hold
MAX_REQUEST = 4096
#: seconds a client has to send its request once connected
REQUEST_TIMEOUT = 10.0

Handler = Callable[[str], Awaitable[dict[str, Any]]]


class ControlError(Exception):
    """The daemon could not be asked, or refused; the message is for the user."""


def listen(directory: str | None = None) -> socket.socket:
    """The daemon's listening socket, ``DIR/PID.sock`` (sockets of daemons gone are removed first)."""
    directory = private_dir(directory or runtime_dir())
    for name in os.listdir(directory):
        stem, dot, ext = name.partition(".")
        if dot and ext == "sock" and stem.isdigit() and not alive(int(stem)):
            try:
                os.unlink(os.path.join(directory, name))
            except OSError:
                pass
    path = os.path.join(directory, f"{os.getpid()}.sock")
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        os.chmod(path, 0o600)  # the directory keeps others out already
        sock.listen(16)
    except OSError:
        sock.close()
        raise
    return sock


def path_of(sock: socket.socket) -> str:
    return sock.getsockname()


def close(sock: socket.socket) -> None:
    """Stop listening and remove the socket's file."""
    path = path_of(sock)
    sock.close()
    try:
        os.unlink(path)
    except OSError:
        pass


def peer(sock: socket.socket) -> tuple[int, int, int]:
    """The other end's (pid, uid, gid), as the kernel recorded them when it connected."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return pid, uid, gid


def may_control(uid: int) -> bool:
    """Who may ask this daemon: root and the user it runs as (the user who mounted)."""
    return uid == 0 or uid == os.getuid()


async def serve(listener: socket.socket, handler: Handler) -> None:
    """Answer requests on ``listener`` (a bound, listening stdlib socket) until cancelled."""
    import trio

    sock = trio.socket.from_stdlib_socket(listener)
    async with trio.open_nursery() as nursery:
        while True:
            conn, _ = await sock.accept()
            nursery.start_soon(_answer, conn, handler)


async def _answer(conn: Any, handler: Handler) -> None:
    import trio

    with conn:
        try:
            pid, uid, _ = peer(conn)
            if not may_control(uid):
                log.warning("control socket: uid %d (pid %d) may not control this mount; refused", uid, pid)
                reply: dict[str, Any] = {
                    "ok": False, "error": f"uid {uid} may not control this mount (only root and uid {os.getuid()} may)"}
            else:
                with trio.move_on_after(REQUEST_TIMEOUT) as waited:
                    raw = await _read_line(conn)
                if waited.cancelled_caught:
                    return
                try:
                    command = json.loads(raw)["command"]
                except (ValueError, KeyError, TypeError):
                    command = None
                if not isinstance(command, str):
                    reply = {"ok": False, "error": "not a control request"}
                else:
                    log.info("control socket: %r from pid %d (uid %d)", command, pid, uid)
                    reply = await handler(command)
            await conn.send((json.dumps(reply) + "\n").encode())
        except OSError as exc:  # the client went away
            log.debug("control socket: %s", exc)


async def _read_line(conn: Any) -> bytes:
    data = b""
    while b"\n" not in data and len(data) < MAX_REQUEST:
        more = await conn.recv(MAX_REQUEST)
        if not more:
            break
        data += more
    return data.partition(b"\n")[0]


def request(path: str, pid: int, command: str) -> dict[str, Any]:
    """Send ``command`` to the daemon ``pid`` listening on ``path`` and wait for its answer.

    ControlError with a one-line reason if it cannot be asked (no socket, not allowed, another
    process listening there) or did not answer."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with sock:
        try:
            sock.connect(path)
        except PermissionError:
            raise ControlError(f"not allowed to control this mount (only root and the user who mounted it may; "
                               f"{path} is theirs)") from None
        except OSError as exc:
            raise ControlError(f"cannot reach the daemon's control socket {path}: {exc.strerror or exc}") from None
        if peer(sock)[0] != pid:
            raise ControlError(f"{path} is not the control socket of the mount's daemon (pid {pid})")
        try:
            sock.sendall((json.dumps({"command": command}) + "\n").encode())
        except OSError:  # the daemon answered and closed before reading (a refusal): read that answer
            pass
        data = b""
        while not data.endswith(b"\n"):
            try:
                more = sock.recv(65536)
            except OSError as exc:
                raise ControlError(f"the daemon (pid {pid}) broke the connection: {exc.strerror or exc}") from None
            if not more:
                break
            data += more
    try:
        reply = json.loads(data)
    except ValueError:
        raise ControlError(f"the daemon (pid {pid}) closed the control socket without an answer") from None
    if not isinstance(reply, dict):
        raise ControlError(f"the daemon (pid {pid}) gave no answer a client can read")
    return reply
