"""Start and stop the tests' server processes (emulators, web servers) on loopback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable


def spawn(argv: list[str], log: Path, cwd: Path | None = None) -> subprocess.Popen:
    """``argv`` in a session of its own (stopped with its children), its output appended to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd)


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def wait_ready(proc: subprocess.Popen, ready: Callable[[], bool], what: str, log: Path, timeout: float = 60) -> None:
    """Wait until ``ready()``; stop ``proc`` and fail naming its log if it exits or takes longer than ``timeout``."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError(f"{what} did not start; see {log}")
        time.sleep(0.05)


def stop(proc: subprocess.Popen | None) -> None:
    """SIGTERM the process's session, SIGKILL it after 10 s."""
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
