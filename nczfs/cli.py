"""Command line: ``nczfs mount SOURCE MOUNTPOINT``, ``nczfs umount MOUNTPOINT``.

Exit codes: 0 success, 1 failure at run time, 2 bad arguments (SOURCE, MOUNTPOINT, options).
No FS logic lives here.
"""

from __future__ import annotations

import argparse
import errno
import logging
import logging.handlers
import os
import subprocess
import sys
import time

import nczfs
from nczfs.config import (
    XATTR_SYNC,
    MountConfig,
    default_metadata_ttl,
    parse_options,
    parse_size,
    present_view,
    validate_mode,
)
from nczfs.control import NotAnNczfsMount, read_control
from nczfs.errors import SourceError
from nczfs.mounts import kernel_path, topmost
from nczfs.source import parse_source

log = logging.getLogger("nczfs")


class UsageError(Exception):
    """A one-line message for the user; exit code 2."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nczfs", description="Mount NCZarr/Zarr stores as a directory tree.")
    p.add_argument("--version", action="version", version=f"nczfs {nczfs.__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    m = sub.add_parser("mount", help="mount SOURCE on MOUNTPOINT")
    m.add_argument("source", help="a directory, a file:// URL (with #mode=...), a zip file, s3://BUCKET/PREFIX "
                                  "(or any S3 URL netCDF-C takes), gs://BUCKET/PREFIX, az://CONTAINER/PREFIX, "
                                  "abfs[s]://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX, "
                                  "https://HOST/PATH/X.zarr (a web server's Zarr, read-only), a reference set")
    m.add_argument("mountpoint")
    m.add_argument("-f", "--foreground", action="store_true", help="stay attached; log to stderr")
    m.add_argument("--systemd", action="store_true",
                   help="for a Type=notify unit: stay attached, report readiness over $NOTIFY_SOCKET, "
                        "log to stderr with journal priority prefixes")
    m.add_argument("-r", "--read-only", action="store_true", help="refuse every write with EROFS")
    m.add_argument("-d", "--debug", action="store_true", help="log every request")
    m.add_argument("-o", dest="options", action="append", default=[], metavar="OPT[,OPT...]",
                   help="mount options: ro, allow_other, uid=, gid=, umask=, metadata_ttl=, log_file=, ...; "
                        "object stores: retries=N (attempts after the first, default 2), connect_timeout=S "
                        "(default 5), read_timeout=S (seconds without a byte, default 60), anon; S3: "
                        "requester_pays, sse=AES256|aws:kms|aws:kms:dsse, sse_kms_key_id=KEY, "
                        "storage_class=CLASS; GCS: google_application_credentials=FILE; Azure: "
                        "azure_storage_account=NAME (every one in docs/OPERATIONS.md)")
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
    m.add_argument("--log-file", default=None)
    m.add_argument("--endpoint-url", default=None, metavar="URL",
                   help="S3, GCS, Azure: the server's endpoint URL (an S3-compatible server, an emulator)")
    m.add_argument("--profile", default=None, help="S3: the AWS profile whose credentials to use")
    m.add_argument("--region", default=None, help="S3: the bucket's region")
    m.add_argument("--no-sign-request", action="store_true",
                   help="S3, GCS, Azure: anonymous (unsigned) requests, as -o anon (GCS and Azure: read-only)")
    m.add_argument("--validate", default=None, metavar="off|warn|strict",
                   help="check metadata objects written through the mount (default strict: invalid -> EINVAL)")
    m.add_argument("--present", default=None, metavar="VIEW",
                   help="show datasets as: as-stored (default), netcdf-4.10, netcdf-4.9, netcdf-4.9.1, xarray")
    m.add_argument("--allow-root", dest="allow_roots", action="append", default=[], metavar="DIR",
                   help="reference sets: local targets may lie below DIR (repeatable; default: the JSON's directory)")

    u = sub.add_parser("umount", help="flush pending writes and unmount")
    u.add_argument("mountpoint")
    u.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the daemon to exit")
    u.add_argument("--stale-only", action="store_true",
                   help="only remove a mount whose daemon has died; otherwise do nothing (exit 0)")

    st = sub.add_parser("stats", help="print a running mount's request counters")
    st.add_argument("mountpoint")
    y = sub.add_parser("sync", help="store pending writes now (zip: commit them into the archive)")
    y.add_argument("mountpoint")

    sub.add_parser("demo", help="mount the bundled sample dataset, show it, unmount")
    from nczfs.nczarr.commands import add_parsers

    add_parsers(sub)  # inspect, validate
    return p


def _check_mountpoint(path: str) -> str:
    """The mount point as the kernel will name the mount (symlinks resolved: mounts.py), checked."""
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
    return path


def _is_fuse_mount(path: str) -> bool:
    found = topmost(path)
    return found is not None and found.fstype.startswith("fuse")


def _check_cache_dir(path: str, mountpoint: str) -> str:
    """``--cache-dir``: created if missing; refused unless entries can be written there."""
    from nczfs.diskcache import prepare_dir

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
    values = parse_options(args.options)
    if args.read_only:
        values["read_only"] = True
    if args.debug:
        values["debug"] = True
    if args.metadata_ttl is not None:
        if args.metadata_ttl < 0:
            raise UsageError("--metadata-ttl must not be negative")
        values["metadata_ttl"] = args.metadata_ttl
    if "metadata_ttl" not in values:
        values["metadata_ttl"] = default_metadata_ttl(source.backend, bool(values.get("read_only")))
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
    if args.log_file:
        values["log_file"] = os.path.abspath(args.log_file)
    if args.validate is not None:
        values["validate"] = validate_mode(args.validate)
    if args.present is not None:
        values["present"] = present_view(args.present)
    for key in ("endpoint_url", "profile", "region"):
        if getattr(args, key, None):
            values[key] = getattr(args, key)
    if getattr(args, "no_sign_request", False):
        values["no_sign_request"] = True
    if args.allow_roots:
        values["allow_roots"] = (*values.get("allow_roots", ()), *map(os.path.abspath, args.allow_roots))  # type: ignore[misc]
    if source.backend == "directory" and not os.path.isdir(source.location):
        raise UsageError(f"{args.source}: {source.location} is not a directory")
    mountpoint = _check_mountpoint(args.mountpoint)
    real_source = os.path.realpath(source.location)
    if source.backend == "directory" and (
        mountpoint == real_source or mountpoint.startswith(real_source.rstrip("/") + "/")
    ):
        raise UsageError(f"{mountpoint}: the mount point must not lie inside the source directory")
    if "cache_dir" in values:
        values["cache_dir"] = _check_cache_dir(values["cache_dir"], mountpoint)  # type: ignore[arg-type]
    foreground = args.foreground or args.systemd
    return MountConfig(source=source, mountpoint=mountpoint, foreground=foreground, **values)  # type: ignore[arg-type]


class JournalFormatter(logging.Formatter):
    """``<N>`` syslog priority prefixes, which journald reads from a service's stderr."""

    PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3, logging.CRITICAL: 2}

    def format(self, record: logging.LogRecord) -> str:
        prio = self.PRIORITY.get(record.levelno, 6)
        return "\n".join(f"<{prio}>{line}" for line in super().format(record).splitlines())


class AnswerNoLongerAwaited(logging.Filter):
    """pyfuse3 logs an ERROR when the kernel no longer waits for an answer (``fuse_reply_*``
    fails with ENOENT): the mount went away while a request was being served, as a RELEASE the
    kernel sends in the background after the last close can race an unmount. The work was done,
    only its answer had nowhere to go: an INFO line that says so."""

    MARK = "fuse_reply_* failed with No such file or directory"

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and self.MARK in record.getMessage():
            record.msg, record.args = f"{record.getMessage()} (the kernel no longer waited for this answer: unmounted or aborted meanwhile)", ()
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


#: where a daemon without --log-file logs (journald and syslog daemons listen here)
SYSLOG_ADDRESS = "/dev/log"


def setup_logging(config: MountConfig, daemon: bool, journal: bool = False) -> None:
    level = logging.DEBUG if config.debug else logging.INFO
    root = logging.getLogger()
    root.handlers.clear()
    handler: logging.Handler
    if config.log_file:
        handler = logging.FileHandler(config.log_file)
        handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
    elif journal:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JournalFormatter("%(levelname)s %(name)s: %(message)s"))
    elif not daemon:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    elif os.path.exists(SYSLOG_ADDRESS):
        handler = logging.handlers.SysLogHandler(address=SYSLOG_ADDRESS)
        handler.setFormatter(logging.Formatter("nczfs[%(process)d]: %(levelname)s %(name)s: %(message)s"))
    else:
        handler = logging.NullHandler()
    root.addHandler(handler)
    root.setLevel(level)
    pyfuse3_log = logging.getLogger("pyfuse3")
    if not any(isinstance(f, AnswerNoLongerAwaited) for f in pyfuse3_log.filters):
        pyfuse3_log.addFilter(AnswerNoLongerAwaited())
    if not config.debug:
        for noisy in ("pyfuse3", "trio"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


def cmd_mount(args: argparse.Namespace) -> int:
    config = build_config(args)
    from nczfs.mount import serve

    if config.foreground:
        setup_logging(config, daemon=False, journal=args.systemd)

        def ready(err: str | None) -> None:
            if err and args.systemd:
                log.error("%s", err)  # with the journal's error priority
            elif err:
                print(f"nczfs: {err}", file=sys.stderr)

        return serve(config, ready)

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
        setup_logging(config, daemon=True)
        status = 1
        try:
            def ready(err: str | None) -> None:
                os.write(wfd, b"ok\n" if err is None else f"error {err}\n".encode())
                os.close(wfd)

            status = serve(config, ready)
        except BaseException:
            log.exception("daemon failed")
        finally:
            os._exit(status)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as r:
        msg = r.read().decode(errors="replace").strip()
    if msg == "ok":
        return 0
    if msg.startswith("error "):
        print(f"nczfs: {msg[6:]}", file=sys.stderr)
        _, status = os.waitpid(pid, 0)
        return 2 if os.waitstatus_to_exitcode(status) == 2 else 1
    os.waitpid(pid, 0)
    print("nczfs: the daemon exited before the mount was ready (see the log)", file=sys.stderr)
    return 1


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def cmd_umount(args: argparse.Namespace) -> int:
    mnt = kernel_path(args.mountpoint)
    pid = None
    try:
        pid = read_control(mnt)["pid"]
    except (OSError, NotAnNczfsMount) as exc:
        if isinstance(exc, OSError) and exc.errno == errno.ENOTCONN:
            subprocess.run(["fusermount3", "-u", "-z", mnt], check=False)
            print(f"nczfs: {mnt}: removed a stale mount (its daemon had died)", file=sys.stderr)
            return 0
        if args.stale_only:
            return 0
        if not _is_fuse_mount(mnt):
            raise UsageError(f"{mnt}: not an nczfs mount point") from None
    if args.stale_only:
        return 0
    try:
        os.setxattr(mnt, XATTR_SYNC, b"1")
    except OSError as exc:
        # EROFS: the kernel refuses setxattr on a read-only mount, which has no pending writes
        if pid is not None and exc.errno != errno.EROFS:
            print(f"nczfs: {mnt}: pending writes could not be stored ({exc.strerror}); not unmounted", file=sys.stderr)
            return 1
    res = subprocess.run(["fusermount3", "-u", mnt], capture_output=True, text=True)
    if res.returncode != 0:
        print(f"nczfs: {res.stderr.strip() or 'fusermount3 -u failed'}", file=sys.stderr)
        return 1
    if pid is not None:
        deadline = time.monotonic() + args.timeout
        while _alive(pid):
            if time.monotonic() > deadline:
                print(f"nczfs: daemon {pid} still running after {args.timeout}s", file=sys.stderr)
                return 1
            time.sleep(0.05)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    mnt = kernel_path(args.mountpoint)
    try:
        counts = read_control(mnt)["counters"]
    except NotAnNczfsMount as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{mnt}: not an nczfs mount point ({exc.strerror})") from None
    width = max((len(k) for k in counts), default=0)
    for key in sorted(counts):
        print(f"{key:<{width}}  {counts[key]}")
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    """Ask the daemon to store every pending write (the same request umount makes first)."""
    mnt = kernel_path(args.mountpoint)
    if not _is_fuse_mount(mnt):
        raise UsageError(f"{mnt}: not an nczfs mount point")
    try:
        os.setxattr(mnt, XATTR_SYNC, b"1")
    except OSError as exc:
        if exc.errno == errno.EROFS:  # a read-only mount has nothing to store
            return 0
        print(f"nczfs: {mnt}: pending writes could not be stored ({exc.strerror}); see the log", file=sys.stderr)
        return 1
    return 0


COMMANDS = ("mount", "umount", "sync", "stats", "demo", "inspect", "validate")


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
