"""Run a mount: build the stack from the config, serve FUSE requests, shut down cleanly.

``serve`` runs in the daemon process (the foreground process, or the child forked by the
CLI). ``ready`` is called once: with None when the mount answers requests, or with an
error message if it could not be set up; ``warn`` before it with what the user should know
at mount time (reference targets outside the allowed roots).
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import gc
import logging
import os
import re
import signal
import socket
from typing import Callable

import pyfuse3
import trio

import nczfs
from nczfs.daemon import controlsock, runstate, stack
from nczfs.toolbox import background, logs
from nczfs.fuse import control, trio_loop
from nczfs.fuse.notifier import KernelNotifier, invalidate_attrs
from nczfs.fuse.selfcalls import run_through_mount
from nczfs.config.mountconfig import MountConfig
from nczfs.toolbox.errors import NczfsError
from nczfs.fs import holders
from nczfs.fs.filesystem import Filesystem
from nczfs.fs.options import FsOptions
from nczfs.toolbox.metrics import Exporter, trio_counters
from nczfs.fuse.ops import Operations
from nczfs.nczarr.metadata.codecids import numcodecs_ids
from nczfs.daemon.notify import notify, status
from nczfs.config.source import absolute_text
from nczfs.store.registry import backend_of, open_store
from nczfs.store.base import SyncStore
from nczfs.store.capabilities import JournalsUploads
from nczfs.store.threads import run_blocking
from nczfs.store import optional

log = logging.getLogger(__name__)

#: ``ready(None)`` answers False when whoever waited for the mount is gone: the mount ends
Ready = Callable[[str | None], "bool | None"]


def fuse_options(config: MountConfig, read_only_store: bool = False) -> set[str]:
    """libfuse's options: the mount table shows SOURCE (a local path absolute) and ``ro`` for a
    read-only mount, asked for or because the backend is (a reference set)."""
    text = absolute_text(config.source)
    fsname = text if text.isascii() and "," not in text and text.isprintable() else "nczfs"
    opts = {f"fsname={fsname}", "subtype=nczfs", "default_permissions"}
    if config.allow_other:
        opts.add("allow_other")
    if config.read_only or read_only_store:
        opts.add("ro")
    return opts


def reuse_freed_blocks() -> None:
    """Have glibc keep freed cache blocks for the next ones instead of unmapping them.

    By default an 8 MiB block is its own mmap, unmapped when evicted, so every block fetched
    lands on fresh memory and its first touch page-faults (about 3 us a page here: 0.4 s of
    CPU per 512 MiB). Blocks are allocated from one heap instead, and up to 256 MiB of freed
    heap is kept. Other C libraries: nothing to tune, nothing done.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold, m_arena_max = -1, -3, -8
    mallopt(m_mmap_threshold, 32 * 1024 * 1024)  # glibc's largest allowed value
    mallopt(m_trim_threshold, 256 * 1024 * 1024)
    # one arena: blocks fetched by any worker thread reuse any freed block (the threads hold
    # the GIL while they allocate anyway, so they never contend for it)
    mallopt(m_arena_max, 1)


def serve(config: MountConfig, ready: Ready, warn: Callable[[str], None] | None = None) -> int:
    """Mount, serve until unmounted or signalled, flush, unmount. Returns the exit status."""
    reuse_freed_blocks()
    log.info(
        "nczfs %s: mounting %s on %s (%s)",
        nczfs.__version__, loggable_source(config.source.text), config.mountpoint, effective_options(config),
    )
    exporter = None
    try:
        if config.metrics:
            exporter = Exporter(config.metrics, {"source": loggable_source(config.source.text),
                                                 "mountpoint": config.mountpoint, "version": nczfs.__version__})
            control.ABOUT["metrics"] = f"http://{exporter.address}/metrics"
        sync_store = open_store(config)
        for problem in optional.problems(sync_store):
            log.warning("%s", problem)
            if warn is not None:
                warn(problem)
    except NczfsError as exc:
        if exporter is not None:
            exporter.close()
        notify(status(f"failed: {exc}"))
        ready(str(exc))
        return 2
    try:
        return _serve_store(config, ready, sync_store, exporter)
    finally:
        if exporter is not None:
            exporter.close()


def _serve_store(config: MountConfig, ready: Ready, sync_store: SyncStore, exporter: Exporter | None) -> int:
    ttl = config.effective_metadata_ttl(sync_store.capabilities)
    if config.metadata_ttl is None:
        log.info("metadata_ttl=%g: the store's default for a %s mount", ttl,
                 "read-only" if config.read_only else "writable")
    fs = _filesystem(config, sync_store, ttl)
    try:
        listener = controlsock.listen()
        state_dir, stale = _take_state(config, sync_store, listener)
    except OSError as exc:
        sync_store.close()
        notify(status("failed: no control socket"))
        ready(f"cannot make the control socket in {runstate.runtime_dir()}: {exc.strerror or exc}")
        return 1
    journal = None
    if isinstance(sync_store, JournalsUploads) and not config.read_only:  # a store of multipart uploads (S3)
        journal = sync_store.upload_log = runstate.UploadJournal(state_dir)
        _abort_stale_uploads(sync_store, stale, journal)
    ops = Operations(fs, ttl, direct_io=config.direct_io,
                     control_socket=controlsock.path_of(listener))
    try:
        pyfuse3.init(ops, config.mountpoint, fuse_options(config, sync_store.capabilities.read_only))
    except RuntimeError as exc:
        controlsock.close(listener)
        sync_store.close()
        _leave_state(state_dir, journal)
        notify(status(f"failed: cannot mount {config.mountpoint}"))
        ready(f"{config.mountpoint}: cannot mount ({exc}); see the log for libfuse's reason")
        return 1
    fs.someone_elses_close = holders.checker(config.mountpoint)
    fs.attrs_changed = invalidate_attrs
    failed: list[str] = []
    try:
        failed = trio.run(_serve, fs, config, ready, ops, exporter, listener)
    finally:
        controlsock.close(listener)
        pyfuse3.close(unmount=True)
        sync_store.close()
        _leave_state(state_dir, journal)
    if failed:
        log.error("unmounted with writes not stored: %s", ", ".join(failed))
        return 1
    log.info("unmounted %s", config.mountpoint)
    return 0


def _filesystem(config: MountConfig, sync_store: SyncStore, ttl: float) -> Filesystem:
    """The filesystem over the whole store stack, its NCZarr layer's changes told to the kernel;
    ``ttl``: the mount's metadata TTL (:meth:`~nczfs.config.mountconfig.MountConfig.effective_metadata_ttl`)."""
    kernel = KernelNotifier()
    fs = Filesystem(
        stack.build(sync_store, config, notify=kernel),
        FsOptions(uid=config.uid, gid=config.gid, umask=config.umask, read_only=config.read_only,
                  metadata_ttl=ttl, spill_threshold=config.spill_threshold,
                  write_memory=config.write_memory),
    )
    kernel.fs = fs
    return fs


def _take_state(config: MountConfig, sync_store: SyncStore, listener: socket.socket) -> tuple[str, dict[str, str]]:
    """The mount's state beside its control socket, and what dead mounts of its scope left (a
    writable mount takes that over: a zip's staged writes were recovered when the store opened;
    open multipart uploads are aborted by the caller)."""
    state_dir = os.path.dirname(controlsock.path_of(listener))
    scope = (sync_store.scope if isinstance(sync_store, JournalsUploads)
             else f"{config.source.backend}:{config.source.location}")
    runstate.prune(state_dir)
    stale = {} if config.read_only else runstate.take_over(state_dir, scope)
    runstate.write_state(state_dir, mount_state(config, scope))
    return state_dir, stale


async def _serve(fs: Filesystem, config: MountConfig, ready: Ready, ops: Operations | None = None,
                 exporter: Exporter | None = None, listener=None) -> list[str]:
    """Serve until unmounted, then store what is pending; the mount's background work (fetches,
    prefetch, early uploads) runs in its own nursery around both (background.py)."""
    if exporter is not None and ops is not None:
        exporter.source = trio_counters(ops.counters, trio.lowlevel.current_trio_token())
    async with background.owned():
        return await _serve_requests(fs, config, ready, ops, listener)


async def _serve_requests(fs: Filesystem, config: MountConfig, ready: Ready, ops: Operations | None,
                          listener) -> list[str]:
    async with trio.open_nursery() as nursery:
        flushed = trio.Event()  # by a signal: what failed then is not tried again below
        nursery.start_soon(_on_signals, fs, flushed)
        nursery.start_soon(_on_level_signals)
        if listener is not None:
            nursery.start_soon(controlsock.serve, listener, functools.partial(_control_request, fs))
        nursery.start_soon(_announce_ready, config, ready)
        if config.validate != "off" and not config.read_only:
            nursery.start_soon(_import_codecs)
        trio_loop.install()  # pyfuse3's loop on trio_loop.ReadLock
        settle_heap()
        await pyfuse3.main()
        nursery.cancel_scope.cancel()
    notify("STOPPING=1", status("unmounted; storing pending writes"))
    return await fs.flush_all(retry_failed=not flushed.is_set())


async def _control_request(fs: Filesystem, command: str) -> dict:
    """A request on the control socket (controlsock.py): ``sync`` stores every pending write."""
    if command != "sync":
        return {"ok": False, "error": f"unknown command {command!r}"}
    failed = await fs.flush_all()
    if failed:
        log.error("sync: not stored: %s", ", ".join(failed))
        return {"ok": False, "error": "not stored: " + ", ".join(failed), "failed": failed}
    return {"ok": True}


async def _import_codecs() -> None:
    """numcodecs (0.1-0.2 s to import) is loaded now, in a thread, not at the first metadata write."""
    try:
        await run_blocking(numcodecs_ids)
    except Exception as exc:  # noqa: BLE001 - never fatal here; the first metadata check reports it
        log.warning("cannot load numcodecs' codec list: %s", exc)
    settle_heap()


def settle_heap() -> None:
    """What the daemon has made so far (its modules, the store stack) lives as long as it does:
    Python's cycle collector stops going through it (``gc.freeze``), and its full collections,
    which the many small objects of a walk's requests set off, go through the new objects only."""
    gc.freeze()


async def _announce_ready(config: MountConfig, ready: Ready) -> None:
    # stat goes through the kernel to our own main loop: once it answers, the mount is live
    st = await run_through_mount(os.stat, config.mountpoint)
    await run_through_mount(turn_getxattr_off, config.mountpoint)
    await trio.to_thread.run_sync(set_read_ahead, st.st_dev, config.read_ahead_kb)
    log.info("mounted %s", config.mountpoint)
    if ready(None) is False:
        log.warning("unmounting %s: nobody waits for it", config.mountpoint)
        pyfuse3.terminate()
        return
    notify("READY=1", status(f"serving {loggable_source(config.source.text)} on {config.mountpoint}"))


def turn_getxattr_off(mountpoint: str) -> None:
    """Ask the mount for ops.XATTR_PROBE, which it answers ENOSYS: from then on the kernel
    answers getxattr itself (EOPNOTSUPP), and only setxattr's own check (pyfuse3 asks getxattr
    for XATTR_CREATE/REPLACE) reaches the daemon's getxattr, which answers it ENODATA."""
    from nczfs.fuse.ops import XATTR_PROBE

    try:
        os.getxattr(mountpoint, os.fsdecode(XATTR_PROBE))
    except OSError:
        pass


def set_read_ahead(dev: int, kib: int) -> None:
    """Raise the kernel's readahead for this mount (default 128 KiB): fewer, larger FUSE reads.

    Needs root; otherwise the default stays (what it is worth: docs/PERFORMANCE.md).
    """
    path = f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb"
    try:
        with open(path, "w") as f:
            f.write(f"{kib}\n")
    except OSError as exc:
        log.debug("cannot set %s: %s", path, exc)


async def _on_signals(fs: Filesystem, flushed: trio.Event) -> None:
    """First SIGTERM/SIGINT/SIGHUP: store pending writes, then unmount. A second one exits at once.

    The flush runs in its own task so that a second signal is seen while it is still running.
    """
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async with trio.open_nursery() as nursery:
            async for signum in signals:
                if nursery.child_tasks:
                    log.error("second signal %s: exiting without waiting for pending writes", signum)
                    os._exit(1)
                log.info("signal %s: flushing pending writes, then unmounting", signum)
                notify("STOPPING=1", status(f"signal {signum}: storing pending writes, then unmounting"))
                nursery.start_soon(_flush_and_terminate, fs, flushed)


async def _on_level_signals() -> None:
    """SIGUSR2 and ``nczfs log-level``'s signals change the level of the log (nczfs.toolbox.logs)."""
    with trio.open_signal_receiver(*logs.signals()) as signals:
        async for signum in signals:
            name = logs.on_signal(signum)
            if name is not None:
                logs.set_level(name)
                log.warning("log level now %s (signal %d)", name, signum)


async def _flush_and_terminate(fs: Filesystem, flushed: trio.Event) -> None:
    failed = await fs.flush_all()
    flushed.set()
    if failed:
        log.error("writes not stored: %s", ", ".join(failed))
    pyfuse3.terminate()
    await trio.sleep_forever()  # stay a child task: a later signal is a second signal


def _abort_stale_uploads(store, stale: dict[str, str], journal: runstate.UploadJournal) -> None:
    """Abort the multipart uploads dead mounts of this scope left open (runstate.take_over);
    those that cannot be aborted now are this mount's to abort, at its end or after it."""
    if not stale:
        return
    left = store.abort_uploads(stale)
    for upload_id, s3_key in left.items():
        journal.opened(upload_id, s3_key)
    log.info("aborted %d multipart upload(s) that a killed mount of %s had left open%s", len(stale) - len(left),
             optional.describe(store), f"; {len(left)} could not be, and will be tried again" if left else "")


def _leave_state(state_dir: str, journal: runstate.UploadJournal | None) -> None:
    """A clean exit removes this daemon's state, unless uploads it could not abort are left:
    the next mount of the scope aborts them."""
    if journal is not None:
        journal.close()
        left = runstate.open_uploads(journal.path)
        if left:
            log.warning("%d multipart upload(s) could not be aborted (%s); the next mount of this prefix "
                        "aborts them", len(left), ", ".join(sorted(left.values())[:3]))
            return
    runstate.remove_state(state_dir)


def mount_state(config: MountConfig, scope: str) -> dict:
    """What runstate.py keeps about this mount while it runs: where it is, what it serves, and
    where writes wait to be committed (a writable zip's staging directory)."""
    src = config.source
    stages = backend_of(config).staging
    staging = stages(src.location) if stages is not None and not config.read_only else None
    return {"mountpoint": config.mountpoint, "source": loggable_source(src.text), "backend": src.backend,
            "location": src.location, "scope": scope, "staging": staging}


def effective_options(config: MountConfig) -> str:
    """Every mount option with its value, for the start-up log line."""
    shown = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    del shown["source"], shown["mountpoint"]
    return ", ".join(f"{k}={v:03o}" if k == "umask" else f"{k}={v!r}" for k, v in shown.items())


def loggable_source(text: str) -> str:
    """SOURCE for logs and STATUS=: values of secret-looking ``#k=v`` / ``[k=v]`` parameters masked."""
    return re.sub(r"((?:secret|token|password)[^=&\]]*)=([^&\]]*)", r"\1=***", text, flags=re.IGNORECASE)
