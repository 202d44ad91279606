"""``nczfs mount``'s arguments to a :class:`~nczfs.config.mountconfig.MountConfig`: the -o strings, then
the flags (each read by its -o key's rule), then SOURCE, MOUNTPOINT, the memory bounds and
``--cache-dir`` checked (UsageError)."""

from __future__ import annotations

import argparse
import errno
import os
from typing import Mapping

from nczfs.cli.usage import UsageError
from nczfs.config.mountconfig import MountConfig, flag_items, option_items, parse_items, source_flags
from nczfs.toolbox.errors import SourceError, option_error
from nczfs.toolbox.mounttable import is_fuse_mount, kernel_path
from nczfs.config.source import Source, check_no_control_characters, parse_source
from nczfs.store.registry import BACKENDS


#: mount's own flags that say what an -o key says, each a spelling of that key (argparse's name:
#: the key), read by the key's rule after the -o strings: a flag wins over -o, and a later flag over
#: an earlier one here (--log-level over -d); -v and -q are log_level's too (_verbosity_items)
MOUNT_FLAGS: Mapping[str, str] = {
    "read_only": "read_only", "debug": "debug", "log_level": "log_level", "log_format": "log_format",
    "metrics": "metrics", "metadata_ttl": "metadata_ttl", "cache_size": "cache_size", "write_memory": "write_memory",
    "cache_dir": "cache_dir", "cache_dir_size": "cache_dir_size", "log_file": "log_file", "validate": "validate",
    "present": "present", "nc_files": "nc_files",
}


def mount_flags() -> dict[str, str]:
    """Every flag of mount read by an -o key's rule: its own, then those the registered backends
    declare for reaching SOURCE (mountconfig.source_flags), by argparse's name."""
    return {**MOUNT_FLAGS, **{key: key for key in source_flags()}}


def build_config(args: argparse.Namespace) -> MountConfig:
    try:
        return _build_config(args)
    except SourceError as exc:
        raise UsageError(str(exc)) from None


def _build_config(args: argparse.Namespace) -> MountConfig:
    source = parse_source(args.source)
    check_no_control_characters("MOUNTPOINT", args.mountpoint)
    items = [*option_items(args), *_verbosity_items(args), *flag_items(args, mount_flags())]
    return _checked(args, source, parse_items(items, source.backend))


def _verbosity_items(args: argparse.Namespace) -> list[str]:
    """-q, -v, -vv as log_level items, the louder last (so it wins; -d and --log-level come after)."""
    levels = ["warning"] * bool(args.quiet) + ["debug", "trace"][: args.verbose]
    return [f"log_level={level}" for level in levels]


def _checked(args: argparse.Namespace, source: Source, values: dict[str, object]) -> MountConfig:
    """The config, once SOURCE, the memory bounds, MOUNTPOINT and --cache-dir pass their checks."""
    size = values.get("cache_dir_size")
    if isinstance(size, int) and "cache_dir" not in values:
        raise UsageError(str(option_error("cache_dir_size", _human(size), "needs --cache-dir / -o cache_dir")))
    if BACKENDS[source.backend].directory and not os.path.isdir(source.location):
        raise UsageError(f"{args.source}: {source.location} is not a directory")
    _check_memory(values)
    mountpoint = _check_mountpoint(args.mountpoint, bool(values.get("nonempty")))
    _check_not_inside(source, mountpoint)
    if "cache_dir" in values:
        values["cache_dir"] = _check_cache_dir(values["cache_dir"], mountpoint)  # type: ignore[arg-type]  # a path string (its -o rule)
    foreground = args.foreground or args.systemd
    return MountConfig.of(source, mountpoint, foreground=foreground, **values)


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
    for key in ("cache_size", "write_memory"):
        size = values.get(key)
        if isinstance(size, int) and ram and size > ram:
            raise UsageError(str(option_error(key, _human(size), f"more than this machine's memory ({_human(ram)})")))


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
