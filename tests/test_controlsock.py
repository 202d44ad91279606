"""The control socket (nczfs/daemon/controlsock.py): the daemon answers only root and its own user,
by the credentials the kernel gives (SO_PEERCRED), and a client talks only to the daemon the
control file names. The server runs here in a thread of the test's own process; the socket is
opened to everyone so that only the credential check decides."""

from __future__ import annotations

import os
import socket
import stat
import threading

import pytest
import trio

from nczfs.daemon import controlsock
from nczfs.daemon.controlsock import ControlError, request
from tests.mount.test_control import _as_user_in_process


@pytest.fixture
def server(public_dir):  # noqa: F811
    """A control socket served by a trio loop in a thread; its handler records the commands."""
    directory = public_dir / "run"
    listener = controlsock.listen(str(directory))
    asked: list[str] = []
    started = threading.Event()
    box: dict = {}

    async def handler(command: str) -> dict:
        asked.append(command)
        return {"ok": True}

    async def main() -> None:
        box["token"] = trio.lowlevel.current_trio_token()
        box["stop"] = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(controlsock.serve, listener, handler)
            started.set()
            await box["stop"].wait()
            nursery.cancel_scope.cancel()

    thread = threading.Thread(target=trio.run, args=(main,))
    thread.start()
    started.wait(10)
    try:
        yield controlsock.path_of(listener), asked, directory
    finally:
        trio.from_thread.run_sync(box["stop"].set, trio_token=box["token"])
        thread.join(10)
        controlsock.close(listener)


def test_the_socket_lies_in_a_private_directory_and_answers_its_user(server):
    path, asked, directory = server
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.path.basename(path) == f"{os.getpid()}.sock"
    assert request(path, os.getpid(), "sync") == {"ok": True}
    assert asked == ["sync"]


def test_another_user_is_refused_by_the_daemon_whatever_the_socket_allows(server, other_user):  # noqa: F811
    path, asked, directory = server
    os.chmod(directory, 0o755)
    os.chmod(path, 0o666)  # past the file permissions: the daemon's own check decides

    def ask() -> int:
        reply = request(path, os.getppid(), "sync")
        assert reply["ok"] is False and f"uid {other_user.pw_uid} may not control this mount" in reply["error"], reply
        return 0

    code, stderr = _as_user_in_process(other_user, ask)
    assert code == 0, stderr
    assert asked == []


def test_a_client_talks_only_to_the_daemon_the_control_file_names(server):
    path, asked, _ = server
    with pytest.raises(ControlError, match="is not the control socket of the mount's daemon"):
        request(path, 1, "sync")
    with pytest.raises(ControlError, match="cannot reach the daemon's control socket"):
        request(path + ".missing", os.getpid(), "sync")
    assert asked == []


def test_sockets_of_daemons_gone_are_removed_and_a_shared_directory_refused(tmp_path):
    directory = tmp_path / "run"
    directory.mkdir(mode=0o700)
    dead = directory / "999999999.sock"
    dead.write_bytes(b"")
    listener = controlsock.listen(str(directory))
    controlsock.close(listener)
    assert not dead.exists() and os.listdir(directory) == []
    os.chmod(directory, 0o777)  # another user could have made it, or put a socket there
    with pytest.raises(OSError, match="not a private directory"):
        controlsock.listen(str(directory))


def test_a_refusal_sent_before_the_request_is_read_is_the_answer(tmp_path, monkeypatch):
    """The daemon answers another user's connection with a refusal and closes it without reading
    the request: the client, whose request then meets a closed socket (EPIPE), reads that
    answer instead of failing with a traceback (it did, now and then, by timing)."""
    path = str(tmp_path / "s.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    closed = threading.Event()

    def refuse() -> None:
        conn, _ = srv.accept()
        conn.sendall(b'{"ok": false, "error": "refused"}\n')
        conn.close()
        closed.set()

    threading.Thread(target=refuse, daemon=True).start()
    real = controlsock.peer

    def peer(sock):  # the client checks its peer only once the daemon has closed: EPIPE for sure
        closed.wait(5)
        return real(sock)

    monkeypatch.setattr(controlsock, "peer", peer)
    try:
        assert controlsock.request(path, os.getpid(), "sync") == {"ok": False, "error": "refused"}
    finally:
        srv.close()
