"""Run a mount: build the stack from the config, serve FUSE requests, shut down cleanly.

``serve`` runs in the daemon process (the foreground process, or the child forked by the
CLI). ``ready`` is called once: with None when the mount answers requests, or with an
error message if it could not be set up.
"""

from __future__ import annotations

import logging
import os
import signal
from typing import Callable

import pyfuse3
import trio

import nczfs
from nczfs.config import MountConfig
from nczfs.errors import NczfsError
from nczfs.filesystem import Filesystem, FsOptions
from nczfs.fuse_ops import Operations
from nczfs.store import open_store
from nczfs.threads import ThreadedStore

log = logging.getLogger(__name__)

Ready = Callable[[str | None], None]


def fuse_options(config: MountConfig) -> set[str]:
    text = config.source.text
    fsname = text if text.isascii() and "," not in text and text.isprintable() else "nczfs"
    opts = {f"fsname={fsname}", "subtype=nczfs", "default_permissions"}
    if config.allow_other:
        opts.add("allow_other")
    if config.read_only:
        opts.add("ro")
    return opts


def serve(config: MountConfig, ready: Ready) -> int:
    """Mount, serve until unmounted or signalled, flush, unmount. Returns the exit status."""
    log.info(
        "nczfs %s: mounting %s on %s (read_only=%s, metadata_ttl=%ss)",
        nczfs.__version__, config.source.text, config.mountpoint, config.read_only, config.metadata_ttl,
    )
    try:
        sync_store = open_store(config)
    except NczfsError as exc:
        ready(str(exc))
        return 2
    store = ThreadedStore(sync_store)
    fs = Filesystem(
        store,
        FsOptions(
            uid=config.uid,
            gid=config.gid,
            umask=config.umask,
            read_only=config.read_only,
            metadata_ttl=config.metadata_ttl,
            spill_threshold=config.spill_threshold,
        ),
    )
    ops = Operations(fs, config.metadata_ttl)
    try:
        pyfuse3.init(ops, config.mountpoint, fuse_options(config))
    except RuntimeError as exc:
        ready(f"{config.mountpoint}: cannot mount ({exc}); see the log for libfuse's reason")
        return 1
    failed: list[str] = []
    try:
        failed = trio.run(_serve, fs, config, ready)
    finally:
        pyfuse3.close(unmount=True)
        sync_store.close()
    if failed:
        log.error("unmounted with writes not stored: %s", ", ".join(failed))
        return 1
    log.info("unmounted %s", config.mountpoint)
    return 0


async def _serve(fs: Filesystem, config: MountConfig, ready: Ready) -> list[str]:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_on_signals, fs)
        nursery.start_soon(_announce_ready, config, ready)
        await pyfuse3.main()
        nursery.cancel_scope.cancel()
    return await fs.flush_all()


async def _announce_ready(config: MountConfig, ready: Ready) -> None:
    # stat goes through the kernel to our own main loop: once it answers, the mount is live
    st = await trio.to_thread.run_sync(os.stat, config.mountpoint)
    await trio.to_thread.run_sync(set_read_ahead, st.st_dev, config.read_ahead_kb)
    log.info("mounted %s", config.mountpoint)
    ready(None)


def set_read_ahead(dev: int, kib: int) -> None:
    """Raise the kernel's readahead for this mount (default 128 KiB): fewer, larger FUSE reads.

    Measured on the directory backend, sequential 8 MiB files: 128 KiB -> 374 MB/s,
    1 MiB -> 574 MB/s, 4 MiB -> 613 MB/s. Needs root; otherwise the default stays.
    """
    path = f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb"
    try:
        with open(path, "w") as f:
            f.write(f"{kib}\n")
    except OSError as exc:
        log.debug("cannot set %s: %s", path, exc)


async def _on_signals(fs: Filesystem) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        count = 0
        async for signum in signals:
            count += 1
            if count > 1:
                log.error("second signal %s: exiting without waiting for pending writes", signum)
                os._exit(1)
            log.info("signal %s: flushing pending writes, then unmounting", signum)
            failed = await fs.flush_all()
            if failed:
                log.error("writes not stored: %s", ", ".join(failed))
            pyfuse3.terminate()
