"""Start and stop the tests' server processes (emulators, web servers) on loopback."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable

from tests.ports import listened_by_others, serves


def spawn(argv: list[str], log: Path, cwd: Path | None = None) -> subprocess.Popen:
    """``argv`` in a session of its own (stopped with its children), its output appended to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd)


def wait_ready(proc: subprocess.Popen, ports: list[int], what: str, log: Path, timeout: float = 60,
               ready: Callable[[], bool] | None = None) -> None:
    """Wait until ``proc`` listens on each of ``ports`` (its own listeners, not another process's:
    ports.py) and ``ready()``, if given, says so; stop ``proc`` and fail naming its log, and the
    ports another process holds, if it exits or takes longer than ``timeout``."""
    deadline = time.monotonic() + timeout
    while not (serves(proc, ports) and (ready is None or ready())):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            taken = listened_by_others(proc, ports)
            raise RuntimeError(f"{what} did not start{f' (another process listens on {taken})' if taken else ''}; see {log}")
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
