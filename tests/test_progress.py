"""``nczfs sync`` / ``umount`` show what is left to store on a terminal, and nothing elsewhere."""

from __future__ import annotations

import os
import pty
import subprocess

import pytest

from tests.helpers import NCZFS, DirectoryBackend, mounted, run_nczfs


def _on_a_terminal(*args: str, env: dict[str, str]) -> tuple[int, str]:
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([*NCZFS, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave,
                              env=env, timeout=120)
    finally:
        os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other end is closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.returncode, out.decode(errors="replace")


@pytest.mark.fuse
def test_sync_shows_bytes_left_on_a_terminal(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    env = {**os.environ, "NCZFS_PROGRESS_AFTER": "0"}  # at once: this store takes well under 2 s
    with mounted(DirectoryBackend(src), tmp_path / "mnt") as m:
        with open(m.path / "big", "wb") as f:
            f.write(os.urandom(1024 * 1024) * 100)  # kept open: pending until stored
            assert run_nczfs("stats", "--json", str(m.path)).stdout.count('"write.bytes-pending": 104857600') == 1
            status, out = _on_a_terminal("sync", str(m.path), env=env)
            assert status == 0, out
            assert "nczfs: storing pending writes: 100.0 MiB left" in out, out
            assert out.endswith("\r\x1b[K"), repr(out[-40:])  # the line is cleared when done
            assert (src / "big").stat().st_size == 100 * 1024 * 1024
            f.write(b"more")
            res = subprocess.run([*NCZFS, "sync", str(m.path)], capture_output=True, text=True, env=env, timeout=120)
            assert res.returncode == 0 and res.stderr == ""  # not a terminal: silent
