"""``nczfs mount``'s arguments to a :class:`~nczfs.config.mountconfig.MountConfig`: the flags over what ``-o``
said, then SOURCE, MOUNTPOINT, the memory bounds and ``--cache-dir`` checked (UsageError)."""

from __future__ import annotations

import argparse
import errno
import os

from nczfs.cli.usage import UsageError
from nczfs.config.mountconfig import MountConfig, source_values
from nczfs.toolbox.errors import SourceError
from nczfs.toolbox.mounttable import is_fuse_mount, kernel_path
from nczfs.toolbox.optionvalues import metrics_address, nc_files, parse_size, present_view, validate_mode
from nczfs.config.source import Source, check_no_control_characters, parse_source
from nczfs.store.registry import BACKENDS


def build_config(args: argparse.Namespace) -> MountConfig:
    try:
        return _build_config(args)
    except SourceError as exc:
        raise UsageError(str(exc)) from None


def _build_config(args: argparse.Namespace) -> MountConfig:
    source = parse_source(args.source)
    check_no_control_characters("MOUNTPOINT", args.mountpoint)
    values = source_values(args, source.backend)
    if args.read_only:
        values["read_only"] = True
    _logging_flags(args, values)
    _ttl_flags(args, values)
    _cache_flags(args, values)
    _layer_flags(args, values)
    return _checked(args, source, values)


def _checked(args: argparse.Namespace, source: Source, values: dict[str, object]) -> MountConfig:
    """The config, once SOURCE, the memory bounds, MOUNTPOINT and --cache-dir pass their checks."""
    if BACKENDS[source.backend].directory and not os.path.isdir(source.location):
        raise UsageError(f"{args.source}: {source.location} is not a directory")
    _check_memory(values)
    mountpoint = _check_mountpoint(args.mountpoint, bool(values.get("nonempty")))
    _check_not_inside(source, mountpoint)
    if "cache_dir" in values:
        values["cache_dir"] = _check_cache_dir(values["cache_dir"], mountpoint)  # type: ignore[arg-type]  # a path string (_cache_flags)
    foreground = args.foreground or args.systemd
    return MountConfig.of(source, mountpoint, foreground=foreground, **values)


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


def _ttl_flags(args: argparse.Namespace, values: dict[str, object]) -> None:
    """--metadata-ttl over -o metadata_ttl= (neither: the backend's default, MountConfig.of)."""
    if args.metadata_ttl is not None:
        if args.metadata_ttl < 0:
            raise UsageError("--metadata-ttl must not be negative")
        values["metadata_ttl"] = args.metadata_ttl


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


def _layer_flags(args: argparse.Namespace, values: dict[str, object]) -> None:
    """--log-file, --validate, --present, --nc-files over what -o said."""
    if args.log_file:
        values["log_file"] = os.path.abspath(args.log_file)
    if args.validate is not None:
        values["validate"] = validate_mode(args.validate)
    if args.present is not None:
        values["present"] = present_view(args.present)
    if getattr(args, "nc_files", None):
        values["nc_files"], values["nc4_files"] = nc_files(args.nc_files)


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
    if is_fuse_mount(path):
        raise UsageError(f"{path}: already a FUSE mount point")
    if not nonempty and os.listdir(path):
        raise UsageError(f"{path}: not empty (the mount would hide what it holds); -o nonempty mounts over it")
    return path


def _check_not_inside(source: Source, mountpoint: str) -> None:
    real_source = os.path.realpath(source.location)
    if BACKENDS[source.backend].directory and (
        mountpoint == real_source or mountpoint.startswith(real_source.rstrip("/") + "/")
    ):
        raise UsageError(f"{mountpoint}: the mount point must not lie inside the source directory")


def _check_memory(values: dict[str, object]) -> None:
    """A memory bound larger than the machine's memory is a typo (1T for 1G), refused."""
    from nczfs.toolbox.budgets import physical_memory

    ram = physical_memory()
    for key, flag in (("cache_size", "--cache-size"), ("write_memory", "--write-memory")):
        size = values.get(key)
        if isinstance(size, int) and ram and size > ram:
            raise UsageError(f"{flag} / -o {key}={_human(size)}: more than this machine's memory ({_human(ram)})")


def _human(n: int) -> str:
    for unit in ("", "K", "M", "G", "T"):
        if n < 1024 or unit == "T":
            return f"{n:g}{unit}" if unit == "" else f"{n:.4g}{unit}"
        n /= 1024  # type: ignore[assignment]  # an int that becomes a float once divided
    return str(n)


def _check_cache_dir(path: str, mountpoint: str) -> str:
    """``--cache-dir``: created if missing; refused unless entries can be written there."""
    from nczfs.cache.disk import prepare_dir

    if (os.path.realpath(path).rstrip("/") + "/").startswith(mountpoint.rstrip("/") + "/"):
        raise UsageError(f"--cache-dir {path}: must not lie inside the mount point")
    try:
        return prepare_dir(path)
    except OSError as exc:
        raise UsageError(f"--cache-dir {path}: {exc.strerror or exc}") from None
