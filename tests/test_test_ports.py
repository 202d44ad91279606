"""The tests' own servers (ports.py): ports handed out to one test process at a time, and a
server up only on listeners of its own, never on another process's server that holds its port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import ports
from tests.procs import spawn, stop, wait_ready
from tests.s3server import SeaweedS3


@pytest.fixture
def registry(tmp_path, monkeypatch):
    """A registry of the test's own; every port taken as bindable (what is under test is the
    registry: the machine's ports in the test's narrow range may be anyone's connections)."""
    path = tmp_path / "ports"
    monkeypatch.setattr(ports, "REGISTRY", path)
    monkeypatch.setattr(ports, "_bindable", lambda port: True)
    return path


def test_ports_another_live_process_was_given_are_not_given_again(registry, monkeypatch):
    monkeypatch.setattr(ports, "LOW", 40000)
    monkeypatch.setattr(ports, "HIGH", 40012)
    other = subprocess.Popen(["sleep", "60"])
    try:
        registry.write_text("".join(f"{p} {other.pid}\n" for p in range(40000, 40008)) + "40008 999999999\n")
        got = ports.free_ports(3)
    finally:
        other.kill()
        other.wait()
    assert set(got) <= set(range(40008, 40012)), got  # a dead process's port (40008) may be given again
    held = dict(line.split() for line in registry.read_text().splitlines())
    assert all(held[str(p)] == held[str(p + 10000)] == str(os.getpid()) for p in got), held


def test_processes_asking_at_once_get_ports_of_their_own(registry):
    """Four processes asking for 6 ports each of 40 at once: without the registry, a port that is
    free when each looks is handed to several."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from tests import ports; from pathlib import Path;"
            "ports.REGISTRY = Path(sys.argv[2]); ports.LOW, ports.HIGH = 41000, 41040; ports._bindable = lambda p: True;"
            "import time; time.sleep(float(sys.argv[3]) - time.time());"
            "print(*ports.free_ports(6)); sys.stdout.flush(); time.sleep(3)")
    root = str(Path(__file__).parent.parent)
    at = time.time() + 1.0
    procs = [subprocess.Popen([sys.executable, "-c", code, root, str(registry), str(at)], stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    given = [[int(p) for p in proc.stdout.readline().split()] for proc in procs]
    for proc in procs:
        proc.wait(timeout=30)
    everyone = [p for mine in given for p in mine]
    assert all(len(mine) == 6 for mine in given) and len(set(everyone)) == len(everyone), given


def test_a_server_is_not_up_on_a_port_another_process_listens_on(tmp_path):
    port = ports.free_ports(1)[0]
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        late = spawn([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "late.log")
        try:
            with pytest.raises(RuntimeError, match=rf"another process listens on \[{port}\]"):
                wait_ready(late, [port], "late", tmp_path / "late.log", timeout=1)
        finally:
            stop(late)
    own = spawn([sys.executable, "-c", f"import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {port})); "
                 "s.listen(); time.sleep(60)"], tmp_path / "own.log")
    try:
        wait_ready(own, [port], "own", tmp_path / "own.log", timeout=30)
    finally:
        stop(own)


def test_seaweedfs_on_ports_another_server_holds_fails_naming_them(tmp_path):
    """The probe that creates a bucket is answered by whichever server holds the S3 port: a weed
    that could not bind its ports and exited must not be taken for up (its tests would talk to the
    other server, and freezing or killing it would change nothing)."""
    first = SeaweedS3(tmp_path / "first")
    first.start()
    try:
        second = SeaweedS3(tmp_path / "second", ports=list(first.ports))
        with pytest.raises(RuntimeError, match=r"SeaweedFS did not start \(another process listens on \["):
            second.start()
        second.proc = None  # exited; its stop() would remove the first one's unix sockets
        assert ports.serves(first.proc, first.ports)
    finally:
        first.stop()
