"""The peers bench_s3.py runs besides s3fs-fuse: rclone mount in both cache modes, and the check
that a write is durable: every object it wrote listed by another client.

``rclone mount`` (Debian ``rclone``) is mounted with ``--vfs-cache-mode off`` ("rclone-off":
reads and writes go straight to S3; a file opened for writing is streamed as it is written) and
``--vfs-cache-mode full`` ("rclone-full": files go through a local cache, written back
``--vfs-write-back`` (5 s) after their last close), otherwise at its defaults, on a config file
naming the run's SeaweedFS (``provider = SeaweedFS``, path style).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.s3server import ADMIN

#: the rclone mounts, by label: their --vfs-cache-mode
RCLONE_MODES = {"rclone-off": "off", "rclone-full": "full"}
#: seconds a write may take to become listed before the run fails
DURABLE_WITHIN = 300.0


def rclone_config(work: Path, endpoint: str, ca_file: Path | None) -> Path:
    """An rclone config file with one remote, ``bench``, on the run's S3 server."""
    conf = work / "rclone.conf"
    conf.write_text("[bench]\ntype = s3\nprovider = SeaweedFS\nenv_auth = false\n"
                    f"access_key_id = {ADMIN[0]}\nsecret_access_key = {ADMIN[1]}\nendpoint = {endpoint}\n"
                    "region = us-east-1\nforce_path_style = true\n")
    return conf


def rclone_mount(p: Any, label: str) -> None:
    """Mount ``p.bucket`` with rclone in ``label``'s cache mode (its cache a fresh folder)."""
    mnt = p.mnt[label]
    cache = p.work / f"rclone-cache-{label}"
    subprocess.run(["rm", "-rf", str(cache)], check=True)
    ca = ["--ca-cert", str(p.server.ca_file)] if p.https else []
    # rclone's AWS SDK fails on AWS_CA_BUNDLE ("unsupported transport"): its own --ca-cert instead
    env = {k: v for k, v in p.env.items() if k != "AWS_CA_BUNDLE"}
    subprocess.run(["rclone", "mount", f"bench:{p.bucket}", str(mnt), "--config", str(p.rclone_conf),
                    "--vfs-cache-mode", RCLONE_MODES[label], "--cache-dir", str(cache), "--daemon", *ca],
                   check=True, env=env)
    wait_mounted(mnt, "rclone")


def wait_mounted(mnt: Path, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.ismount(mnt):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not mount {mnt}")
        time.sleep(0.05)


def fuse_umount(mnt: Path, timeout: float = 120.0) -> None:
    """Unmount a peer's mount and wait until its daemon let go (rclone-full first writes back
    what its cache holds: the wait covers that)."""
    subprocess.run(["fusermount3", "-u", str(mnt)], check=True)
    deadline = time.monotonic() + timeout
    while os.path.ismount(mnt) and time.monotonic() < deadline:
        time.sleep(0.05)


def find_daemon(program: str, mnt: Path) -> int:
    """The pid of the ``program`` process serving ``mnt`` (its mount point on its command line)."""
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and Path(argv[0].decode()).name == program and str(mnt).encode() in argv:
            return int(proc.name)
    raise RuntimeError(f"no {program} process for {mnt}")


def wait_listed(client: Any, bucket: str, sizes: dict[str, int | None], timeout: float = DURABLE_WITHIN) -> None:
    """Return once every key of ``sizes`` is listed by ``client`` (another S3 client than the
    mount) with its size (None: any): the write is durable then, whatever the mount
    acknowledged before."""
    prefixes = {key.rsplit("/", 1)[0] + "/" if "/" in key else "" for key in sizes}
    deadline = time.monotonic() + timeout
    while True:
        seen: dict[str, int] = {}
        for prefix in prefixes:
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                seen |= {o["Key"]: o["Size"] for o in page.get("Contents", ())}
        missing = [key for key, size in sizes.items() if key not in seen or size is not None and seen[key] != size]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"not listed {timeout:.0f} s after the write: {missing[:5]}")
        time.sleep(0.02)
