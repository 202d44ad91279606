"""Command line: ``nczfs mount SOURCE MOUNTPOINT``, ``nczfs umount MOUNTPOINT``.

Exit codes: 0 success, 1 failure at run time, 2 bad arguments (SOURCE, MOUNTPOINT, options).
No FS logic lives here.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import subprocess
import sys
import time

import nczfs
from nczfs import runstate
from nczfs.config import (
    ICECHUNK_OPTIONS,
    OPTION_HELP,
    MountConfig,
    default_metadata_ttl,
    parse_options,
    source_values,
)
from nczfs.optionvalues import metrics_address, parse_size, present_view, validate_mode
from nczfs import logs
from nczfs.fuse.control import NotAnNczfsMount, read_control
from nczfs.errors import SourceError
from nczfs.mounttable import kernel_path, topmost
from nczfs.source import Source, parse_source
from nczfs.umount import UnmountError, store_pending, terminal, unmount

log = logging.getLogger("nczfs")


class UsageError(Exception):
    """A one-line message for the user; exit code 2."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nczfs", description="Mount NCZarr/Zarr stores as a directory tree.")
    p.add_argument("--version", action="version", version=f"nczfs {nczfs.__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    m = sub.add_parser("mount", help="mount SOURCE on MOUNTPOINT", epilog=options_epilog(),
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Mount SOURCE on MOUNTPOINT; return once the mount answers (a daemon "
                                   "stays in the background unless -f or --systemd).")
    m.add_argument("source", help="a directory, a file:// URL (with #mode=...), a zip file, s3://BUCKET/PREFIX "
                                  "(or any S3 URL netCDF-C takes), gs://BUCKET/PREFIX, az://CONTAINER/PREFIX, "
                                  "abfs[s]://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX, "
                                  "https://HOST/PATH/X.zarr (a web server's Zarr, read-only), a reference set")
    m.add_argument("mountpoint")
    m.add_argument("-f", "--foreground", action="store_true", help="stay attached; log to stderr")
    m.add_argument("--systemd", action="store_true",
                   help="for a Type=notify unit: stay attached, report readiness over $NOTIFY_SOCKET, "
                        "log to stderr with journal priority prefixes")
    m.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)  # nczfs.mounted()
    m.add_argument("-r", "--read-only", action="store_true", help="refuse every write with EROFS")
    m.add_argument("-v", "--verbose", action="count", default=0,
                   help="log more: -v debug, -vv trace (every request)")
    m.add_argument("-q", "--quiet", action="store_true", help="log only warnings and errors")
    m.add_argument("--log-level", default=None, metavar="LEVEL", type=str.lower, choices=list(logs.LEVELS),
                   help=f"one of {', '.join(logs.LEVELS)} (default info; a running daemon: 'nczfs log-level')")
    m.add_argument("--log-format", default=None, choices=("text", "json"),
                   help="json: one JSON object a line (time, level, logger, pid, message)")
    m.add_argument("-d", "--debug", action="store_true", help="log every request (--log-level trace)")
    m.add_argument("-o", dest="options", action="append", default=[], metavar="OPT[,OPT...]",
                   help="mount options, comma separated (every one below)")
    m.add_argument("--metadata-ttl", type=float, default=None, metavar="SECONDS",
                   help="reuse attributes, listings and missing names this long (default 1 for a "
                        "writable S3, GCS or Azure mount, 60 otherwise)")
    m.add_argument("--cache-size", default=None, metavar="BYTES",
                   help="memory for cached object data, e.g. 512M (default: 1/8 of RAM, at most 1G)")
    m.add_argument("--write-memory", default=None, metavar="BYTES",
                   help="memory for pending writes of all files together; past it a file being "
                        "written goes to a temp file, e.g. 256M (default: 1/8 of RAM, at most 1G)")
    m.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="object stores/reference: keep fetched object data in DIR across mounts (default: off)")
    m.add_argument("--cache-dir-size", default=None, metavar="BYTES",
                   help="bytes --cache-dir may hold, e.g. 50G (default 10G)")
    m.add_argument("--log-file", default=None, metavar="FILE",
                   help="log to FILE (default: the journal through /dev/log, else "
                        "/var/log/nczfs/MOUNT.log for root, $XDG_STATE_HOME/nczfs/MOUNT.log for others; "
                        "-f: stderr)")
    m.add_argument("--metrics", default=None, metavar="ADDR:PORT",
                   help="serve Prometheus metrics (every counter of 'nczfs stats') on ADDR:PORT")
    m.add_argument("--validate", default=None, metavar="off|warn|strict",
                   help="check metadata objects written through the mount (default strict: invalid -> EINVAL)")
    m.add_argument("--present", default=None, metavar="VIEW",
                   help="show datasets as: as-stored (default), netcdf-4.10, netcdf-4.9, netcdf-4.9.1, xarray")
    m.add_argument("--nc-files", action="store_true",
                   help="every dataset NAME also shows as read-only netCDF classic files NAME.nc (and NAME.GROUP.nc)")
    source_options(m)

    u = sub.add_parser("umount", help="flush pending writes and unmount")
    u.add_argument("mountpoint")
    u.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the daemon to exit")
    u.add_argument("-l", "--lazy", action="store_true",
                   help="detach now even if busy (pending writes are stored first); the daemon exits "
                        "once the last file open there is closed")
    u.add_argument("--stale-only", action="store_true",
                   help="only remove a mount whose daemon has died; otherwise do nothing (exit 0)")

    st = sub.add_parser("stats", help="print a running mount's request counters, log and metrics address")
    st.add_argument("mountpoint")
    st.add_argument("--json", action="store_true", help="print the daemon's control file as it is (JSON)")
    ll = sub.add_parser("log-level", help="show or change a running mount's log level")
    ll.add_argument("mountpoint")
    ll.add_argument("level", nargs="?", type=str.lower, choices=list(logs.LEVELS),
                    help=f"one of {', '.join(logs.LEVELS)} (none: print the current level)")
    y = sub.add_parser("sync", help="store pending writes now (zip: commit them into the archive)")
    y.add_argument("mountpoint")

    sub.add_parser("demo", help="mount the bundled sample dataset, show it, unmount")
    from nczfs.nczarr.commands import add_parsers

    add_parsers(sub, source_options)  # inspect, validate
    h = sub.add_parser("help", help="show the help of nczfs or of one command")
    h.add_argument("topic", nargs="?", metavar="COMMAND", help="a command (none: every command)")
    return p


def source_options(p: argparse.ArgumentParser) -> None:
    """What reaching SOURCE needs: the same for mount, inspect and validate."""
    p.add_argument("--endpoint-url", default=None, metavar="URL",
                   help="S3, GCS, Azure: the server's endpoint URL (an S3-compatible server, an emulator)")
    p.add_argument("--profile", default=None, help="S3: the AWS profile whose credentials to use")
    p.add_argument("--region", default=None, help="S3: the bucket's region")
    p.add_argument("--no-sign-request", action="store_true",
                   help="S3, GCS, Azure: anonymous (unsigned) requests, as -o anon (GCS and Azure: read-only)")
    p.add_argument("--allow-root", dest="allow_roots", action="append", default=[], metavar="DIR",
                   help="reference sets: local targets may lie below DIR (repeatable; default: the JSON's directory)")


def options_epilog() -> str:
    width = max(len(form) for form, _ in OPTION_HELP)
    lines = [f"  {form:<{width}}  {text}" for form, text in OPTION_HELP]
    return "mount options (-o):\n" + "\n".join(lines) + f"\n\nmore: man nczfs; the documents in {docs_dir()}"


def docs_dir() -> str:
    """Where the package installed README.md and docs/ (pyproject's data-files), else the checkout's."""
    installed = os.path.join(sys.prefix, "share", "doc", "nczfs")
    if os.path.isdir(installed):
        return installed + "/"
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs") + "/"


def _daemon_log(config: MountConfig) -> logs.Destination:
    try:
        return logs.choose(config.log_file, config.mountpoint, daemon=True)
    except OSError as exc:
        raise UsageError(f"cannot write the log file {logs.default_log_file(config.mountpoint)}: "
                         f"{exc.strerror or exc}; give --log-file") from None


def _reporter(fd: int):  # type: ignore[no-untyped-def]
    """``ready`` and ``warn`` for mount.serve that tell the process waiting on pipe ``fd``:
    ``warning MSG`` lines, then ``ok`` or ``error MSG``; the pipe is closed once ready."""

    def ready(err: str | None) -> None:
        os.write(fd, b"ok\n" if err is None else f"error {err}\n".encode())
        os.close(fd)

    def warn(msg: str) -> None:
        os.write(fd, f"warning {msg}\n".encode())

    return ready, warn


def _check_mountpoint(path: str, nonempty: bool = False) -> str:
    """The mount point as the kernel will name the mount (symlinks resolved: mounttable.py), checked."""
    path = kernel_path(path)
    try:
        # statvfs reaches the filesystem (stat may be answered from the kernel's cache), so a
        # mount whose daemon died answers ENOTCONN here
        os.statvfs(path)
    except OSError as exc:
        if exc.errno == errno.ENOTCONN:
            raise UsageError(
                f"{path}: stale mount (transport endpoint is not connected); run 'nczfs umount {path}' first"
            ) from None
        raise UsageError(f"{path}: {exc.strerror}") from None
    if not os.path.isdir(path):
        raise UsageError(f"{path}: not a directory")
    if _is_fuse_mount(path):
        raise UsageError(f"{path}: already a FUSE mount point")
    if not nonempty and os.listdir(path):
        raise UsageError(f"{path}: not empty (the mount would hide what it holds); -o nonempty mounts over it")
    return path


def _check_memory(values: dict[str, object]) -> None:
    """A memory bound larger than the machine's memory is a typo (1T for 1G), refused."""
    from nczfs.cache import physical_memory

    ram = physical_memory()
    for key, flag in (("cache_size", "--cache-size"), ("write_memory", "--write-memory")):
        size = values.get(key)
        if isinstance(size, int) and ram and size > ram:
            raise UsageError(f"{flag} / -o {key}={_human(size)}: more than this machine's memory ({_human(ram)})")


def _human(n: int) -> str:
    for unit in ("", "K", "M", "G", "T"):
        if n < 1024 or unit == "T":
            return f"{n:g}{unit}" if unit == "" else f"{n:.4g}{unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _is_fuse_mount(path: str) -> bool:
    found = topmost(path)
    return found is not None and found.fstype.startswith("fuse")


def _check_cache_dir(path: str, mountpoint: str) -> str:
    """``--cache-dir``: created if missing; refused unless entries can be written there."""
    from nczfs.cache.disk import prepare_dir

    if (os.path.realpath(path).rstrip("/") + "/").startswith(mountpoint.rstrip("/") + "/"):
        raise UsageError(f"--cache-dir {path}: must not lie inside the mount point")
    try:
        return prepare_dir(path)
    except OSError as exc:
        raise UsageError(f"--cache-dir {path}: {exc.strerror or exc}") from None


def build_config(args: argparse.Namespace) -> MountConfig:
    try:
        return _build_config(args)
    except SourceError as exc:
        raise UsageError(str(exc)) from None


def _build_config(args: argparse.Namespace) -> MountConfig:
    source = parse_source(args.source)
    values = source_values(args)
    if args.read_only or values.get("tag") or values.get("snapshot"):  # Icechunk: a tag or snapshot never changes
        values["read_only"] = True
    if source.backend != "icechunk" and (given := sorted(ICECHUNK_OPTIONS & {k.rstrip("s") for k in values})):
        raise UsageError(f"-o {given[0]}: an option of Icechunk sources (icechunk:// or icechunk+s3://)")
    _logging_flags(args, values)
    _ttl_flags(args, values, source.backend)
    _cache_flags(args, values)
    _layer_flags(args, values)
    if source.backend == "directory" and not os.path.isdir(source.location):
        raise UsageError(f"{args.source}: {source.location} is not a directory")
    _check_memory(values)
    mountpoint = _check_mountpoint(args.mountpoint, bool(values.get("nonempty")))
    _check_not_inside(source, mountpoint)
    if "cache_dir" in values:
        values["cache_dir"] = _check_cache_dir(values["cache_dir"], mountpoint)  # type: ignore[arg-type]
    foreground = args.foreground or args.systemd
    return MountConfig(source=source, mountpoint=mountpoint, foreground=foreground, **values)  # type: ignore[arg-type]


def _layer_flags(args: argparse.Namespace, values: dict[str, object]) -> None:
    """--log-file, --validate, --present, --nc-files over what -o said."""
    if args.log_file:
        values["log_file"] = os.path.abspath(args.log_file)
    if args.validate is not None:
        values["validate"] = validate_mode(args.validate)
    if args.present is not None:
        values["present"] = present_view(args.present)
    if getattr(args, "nc_files", False):
        values["nc_files"] = True


def _check_not_inside(source: Source, mountpoint: str) -> None:
    real_source = os.path.realpath(source.location)
    if source.backend == "directory" and (
        mountpoint == real_source or mountpoint.startswith(real_source.rstrip("/") + "/")
    ):
        raise UsageError(f"{mountpoint}: the mount point must not lie inside the source directory")


def _logging_flags(args: argparse.Namespace, values: dict[str, object]) -> None:
    """--log-level (or -d, -v, -q), --log-format, --metrics over what -o said."""
    if args.log_level:
        values["log_level"] = args.log_level
    elif args.debug or args.verbose >= 2:
        values["log_level"] = "trace"
    elif args.verbose:
        values["log_level"] = "debug"
    elif args.quiet:
        values["log_level"] = "warning"
    if args.log_format:
        values["log_format"] = args.log_format
    if args.metrics:
        values["metrics"] = metrics_address(args.metrics)


def _ttl_flags(args: argparse.Namespace, values: dict[str, object], backend: str) -> None:
    """--metadata-ttl, else -o metadata_ttl=, else the backend's default."""
    if args.metadata_ttl is not None:
        if args.metadata_ttl < 0:
            raise UsageError("--metadata-ttl must not be negative")
        values["metadata_ttl"] = args.metadata_ttl
    if "metadata_ttl" not in values:
        values["metadata_ttl"] = default_metadata_ttl(backend, bool(values.get("read_only")))


def _cache_flags(args: argparse.Namespace, values: dict[str, object]) -> None:
    """--cache-size, --write-memory, --cache-dir, --cache-dir-size over what -o said."""
    if args.cache_size is not None:
        values["cache_size"] = parse_size("--cache-size", args.cache_size)
    if args.write_memory is not None:
        values["write_memory"] = parse_size("--write-memory", args.write_memory)
    if args.cache_dir:
        values["cache_dir"] = os.path.abspath(args.cache_dir)
    if args.cache_dir_size is not None:
        values["cache_dir_size"] = parse_size("--cache-dir-size", args.cache_dir_size)
    if "cache_dir_size" in values and "cache_dir" not in values:
        raise UsageError("--cache-dir-size needs --cache-dir")


def cmd_mount(args: argparse.Namespace) -> int:
    config = build_config(args)
    from nczfs.mount import serve

    if args.ready_fd is not None:  # started by nczfs.mounted(): the caller waits on the pipe
        dest = _daemon_log(config)
        logs.setup(dest, config.log_level, config.log_format, default_file=dest.kind == "file" and not config.log_file)
        return serve(config, *_reporter(args.ready_fd))
    if config.foreground:
        logs.setup(logs.choose(config.log_file, config.mountpoint, daemon=False, journal=args.systemd),
                   config.log_level, config.log_format)

        def ready(err: str | None) -> None:
            if err and args.systemd:
                log.error("%s", err)  # with the journal's error priority
            elif err:
                print(f"nczfs: {err}", file=sys.stderr)

        def warn(msg: str) -> None:
            if not args.systemd:  # the journal has the log line
                print(f"nczfs: warning: {msg}", file=sys.stderr)

        return serve(config, ready, warn)

    dest = _daemon_log(config)
    default_file = dest.kind == "file" and not config.log_file
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the daemon
        os.close(rfd)
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
    os.close(wfd)
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


def _report_stale(mnt: str, stale_only: bool) -> int:
    """A stale mount was removed: say so, with what its dead daemon left pending and where
    (runstate.py); exit 1 if it left anything, unless only asked to clear the way for a new
    mount (``--stale-only``, which the systemd unit runs before mounting again)."""
    found = runstate.find_dead(mnt)
    pending = runstate.left_behind(*found) if found else []
    if found and not pending:
        runstate.remove_state(found[0], found[1]["pid"])
    if not pending:
        print(f"nczfs: {mnt}: removed a stale mount (its daemon had died)", file=sys.stderr)
        return 0
    print(f"nczfs: {mnt}: removed a stale mount (its daemon had died); it left pending: {'; '.join(pending)}",
          file=sys.stderr)
    return 0 if stale_only else 1


def cmd_umount(args: argparse.Namespace) -> int:
    mnt = kernel_path(args.mountpoint)
    control = None
    try:
        control = read_control(mnt)
    except (OSError, NotAnNczfsMount) as exc:
        if isinstance(exc, OSError) and exc.errno == errno.ENOTCONN:
            subprocess.run(["fusermount3", "-u", "-z", mnt], check=False)
            return _report_stale(mnt, args.stale_only)
        if args.stale_only:
            return 0
        if not _is_fuse_mount(mnt):
            raise UsageError(f"{mnt}: not an nczfs mount point") from None
    if args.stale_only:
        return 0
    try:
        unmount(mnt, control["pid"] if control else None, lazy=args.lazy, timeout=args.timeout,
                progress=terminal(), control=control)
    except UnmountError as exc:
        print(f"nczfs: {exc}", file=sys.stderr)
        return 1
    return 0


def _control(mountpoint: str) -> dict:
    mnt = kernel_path(mountpoint)
    try:
        return read_control(mnt)
    except NotAnNczfsMount as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{mnt}: not an nczfs mount point ({exc.strerror})") from None


def cmd_stats(args: argparse.Namespace) -> int:
    data = _control(args.mountpoint)
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True))
        return 0
    about = {k: v for k, v in data.items() if k != "counters" and v is not None}
    counts = data["counters"]
    width = max((len(k) for k in (*counts, *about)), default=0)
    for key in sorted(about):
        print(f"{key:<{width}}  {about[key]}")
    for key in sorted(counts):
        print(f"{key:<{width}}  {counts[key]}")
    return 0


def cmd_log_level(args: argparse.Namespace) -> int:
    """Print the daemon's log level, or set it with the signal the daemon takes for it (logs.py)."""
    data = _control(args.mountpoint)
    if args.level is None:
        print(data.get("log_level", "info"))
        return 0
    os.kill(data["pid"], logs.level_signal(args.level))
    deadline = time.monotonic() + 10
    while _control(args.mountpoint).get("log_level") != args.level:
        if time.monotonic() > deadline:
            print(f"nczfs: {args.mountpoint}: the daemon did not take the new level", file=sys.stderr)
            return 1
        time.sleep(0.05)
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    """Ask the daemon to store every pending write (the same request umount makes first)."""
    mnt = kernel_path(args.mountpoint)
    try:
        control = read_control(mnt)
    except NotAnNczfsMount as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        if exc.errno == errno.ENOTCONN:
            print(f"nczfs: {mnt}: stale mount (its daemon has died); see 'nczfs umount {mnt}'", file=sys.stderr)
            return 1
        raise UsageError(f"{mnt}: not an nczfs mount point ({exc.strerror})") from None
    try:
        store_pending(mnt, terminal(), control)
    except UnmountError as exc:
        print(f"nczfs: {exc}; see the log", file=sys.stderr)
        return 1
    return 0


COMMANDS = ("mount", "umount", "sync", "stats", "log-level", "demo", "inspect", "validate", "help")


def cmd_help(args: argparse.Namespace) -> int:
    """``nczfs help [COMMAND]``: what ``nczfs [COMMAND] --help`` prints."""
    parser = _parser()
    if args.topic is None:
        parser.print_help()
        return 0
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if args.topic not in sub.choices:
        raise UsageError(f"help {args.topic}: no such command (commands: {', '.join(sub.choices)})")
    sub.choices[args.topic].print_help()
    return 0


def _helper_form(argv: list[str]) -> list[str]:
    """mount(8) runs ``nczfs SOURCE MOUNTPOINT -o OPTS`` (through mount.fuse3): that is ``nczfs mount``."""
    if len(argv) >= 2 and argv[0] not in COMMANDS and not argv[0].startswith("-"):
        return ["mount", *argv]
    return argv


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(_helper_form(sys.argv[1:] if argv is None else list(argv)))
    try:
        if args.command == "mount":
            return cmd_mount(args)
        if args.command == "umount":
            return cmd_umount(args)
        if args.command == "stats":
            return cmd_stats(args)
        if args.command == "sync":
            return cmd_sync(args)
        if args.command == "log-level":
            return cmd_log_level(args)
        if args.command == "help":
            return cmd_help(args)
        if args.command == "demo":
            from nczfs.demo import main as demo

            return demo()
        if args.command in ("inspect", "validate"):
            from nczfs.nczarr.commands import run

            return run(args)
    except UsageError as exc:
        print(f"nczfs: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 2
