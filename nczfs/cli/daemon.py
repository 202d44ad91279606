"""``nczfs mount``: serve the mount attached (-f, --systemd, nczfs.mounted()'s pipe) or fork a
daemon and return once it reports over the readiness pipe that the mount answers."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Callable, NoReturn

from nczfs.toolbox import logs
from nczfs.cli.mountargs import build_config
from nczfs.cli.usage import UsageError
from nczfs.config.mountconfig import MountConfig

log = logging.getLogger("nczfs")


def cmd_mount(args: argparse.Namespace) -> int:
    config = build_config(args)
    if args.ready_fd is not None:  # started by nczfs.mounted(): the caller waits on the pipe
        return _serve_for_caller(config, args.ready_fd)
    if config.foreground:
        return _serve_attached(config, args.systemd)
    return _serve_detached(config)


def _serve_for_caller(config: MountConfig, fd: int) -> int:
    from nczfs.daemon.mount import serve

    dest = _daemon_log(config)
    logs.setup(dest, config.log_level, config.log_format, default_file=dest.kind == "file" and not config.log_file)
    return serve(config, *_reporter(fd))


def _serve_attached(config: MountConfig, systemd: bool) -> int:
    """-f or --systemd: log to stderr (the journal's priority prefixes for systemd), serve here."""
    from nczfs.daemon.mount import serve

    logs.setup(logs.choose(config.log_file, config.mountpoint, daemon=False, journal=systemd),
               config.log_level, config.log_format)

    def ready(err: str | None) -> None:
        if err and systemd:
            log.error("%s", err)  # with the journal's error priority
        elif err:
            print(f"nczfs: {err}", file=sys.stderr)

    def warn(msg: str) -> None:
        if not systemd:  # the journal has the log line
            print(f"nczfs: warning: {msg}", file=sys.stderr)

    return serve(config, ready, warn)


def _serve_detached(config: MountConfig) -> int:
    """Fork the daemon; wait for what it reports over the pipe."""
    from nczfs.daemon.mount import serve  # before the fork: the daemon runs it

    dest = _daemon_log(config)
    default_file = dest.kind == "file" and not config.log_file
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        _daemon(serve, config, dest, default_file, wfd)
    os.close(wfd)
    return _wait_ready(rfd, pid, dest, default_file)


def _daemon(serve: Callable[..., int], config: MountConfig, dest: logs.Destination, default_file: bool,
            wfd: int) -> NoReturn:
    """The forked daemon: a session of its own, no directory kept busy, stdio on /dev/null."""
    os.setsid()
    os.chdir("/")  # keep no directory busy (paths in the config are absolute)
    os.environ.pop("NOTIFY_SOCKET", None)  # a forked daemon is not the process systemd watches
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    logs.setup(dest, config.log_level, config.log_format, default_file=default_file)
    status = 1
    try:
        status = serve(config, *_reporter(wfd))
    except BaseException:
        log.exception("daemon failed")
    finally:
        os._exit(status)


def _wait_ready(rfd: int, pid: int, dest: logs.Destination, default_file: bool) -> int:
    """What the daemon reported: its warnings shown, then 0 (ready), 1 or 2 (its exit code's)."""
    with os.fdopen(rfd, "rb") as r:
        lines = r.read().decode(errors="replace").strip().splitlines() or [""]
    for line in lines[:-1]:
        print(f"nczfs: warning: {line.removeprefix('warning ')}", file=sys.stderr)
    msg = lines[-1]
    if msg == "ok":
        if default_file:
            print(f"nczfs: logging to {dest.path}", file=sys.stderr)
        return 0
    if msg.startswith("error "):
        print(f"nczfs: {msg[6:]}", file=sys.stderr)
        _, status = os.waitpid(pid, 0)
        return 2 if os.waitstatus_to_exitcode(status) == 2 else 1
    os.waitpid(pid, 0)
    print(f"nczfs: the daemon exited before the mount was ready (see the log: {dest})", file=sys.stderr)
    return 1


def _daemon_log(config: MountConfig) -> logs.Destination:
    try:
        return logs.choose(config.log_file, config.mountpoint, daemon=True)
    except OSError as exc:
        raise UsageError(f"cannot write the log file {logs.default_log_file(config.mountpoint)}: "
                         f"{exc.strerror or exc}; give --log-file") from None


def _reporter(fd: int):
    """``ready`` and ``warn`` for mount.serve that tell the process waiting on pipe ``fd``:
    ``warning MSG`` lines, then ``ok`` or ``error MSG``; the pipe is closed once ready. When
    that process is gone (killed before the mount was ready: the pipe is broken), ``ready``
    answers False, and mount.serve unmounts: nobody was told that the mount exists."""
    gone = False

    def send(line: str) -> None:
        nonlocal gone
        if not gone:
            try:
                os.write(fd, line.encode())
            except BrokenPipeError:
                gone = True
                log.warning("the nczfs mount command waiting for this mount is gone (killed before "
                            "the mount was ready)")

    def ready(err: str | None) -> bool:
        send("ok\n" if err is None else f"error {_one_line(err)}\n")
        os.close(fd)
        return not gone

    def warn(msg: str) -> None:
        send(f"warning {_one_line(msg)}\n")

    return ready, warn


def _one_line(msg: str) -> str:
    """A message as one line of the pipe's protocol (a line break in it would end the message)."""
    return msg.replace("\r", "\\r").replace("\n", "\\n")
