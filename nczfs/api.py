"""The Python API: mount from Python, or read a store through nczfs's views without FUSE.

``with nczfs.mounted(source, mountpoint, **options) as mnt:`` starts ``nczfs mount`` as a new
process (the caller's interpreter is not forked), returns once the mount answers, and on exit
stores pending writes and unmounts; every failure is raised as :class:`MountError`.

``nczfs.open_view(source, present=..., **options)`` returns a zarr-python store that reads
(and writes, with validation) through the same NCZarr layer a mount uses, in this process.

Options are the ``-o`` options as keywords: ``read_only=True``, ``cache_size="512M"``,
``endpoint_url="http://..."``, ``allow_root=["/data"]`` (a list repeats the option).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Iterator

from nczfs.config.mountconfig import MountConfig, parse_options
from nczfs.fuse.control import NotAnNczfsMount, read_control
from nczfs.toolbox.errors import NczfsError
from nczfs.daemon.umount import UnmountError, store_pending, unmount


class MountError(NczfsError):
    """The mount could not be made (bad source, mount point or option: the message says which)."""


class MountWarning(UserWarning):
    """What ``nczfs mount`` warns about (e.g. reference targets outside the allowed roots)."""


def option_strings(options: dict[str, Any]) -> list[str]:
    """Keyword options as ``-o`` items: True -> ``key``, False/None -> left out, a list -> repeated."""
    out: list[str] = []
    for key, value in options.items():
        key = {"allow_roots": "allow_root"}.get(key, key)
        if value is None or value is False:
            continue
        if value is True:
            out.append(key)
        elif isinstance(value, (list, tuple)):
            out.extend(f"{key}={v}" for v in value)
        else:
            out.append(f"{key}={value}")
    return out


class Mount:
    """A live mount made by :func:`mounted`."""

    def __init__(self, path: Path, source: str, process: subprocess.Popen):
        self.path = path
        self.source = source
        self.process = process

    @property
    def pid(self) -> int:
        return self.process.pid

    def _control(self) -> dict:
        try:
            return read_control(str(self.path))
        except (OSError, NotAnNczfsMount) as exc:
            raise MountError(f"{self.path}: {exc}") from None

    @property
    def log(self) -> str:
        """Where the daemon logs (a file's path, or the journal)."""
        return str(self._control().get("log"))

    def stats(self) -> dict[str, int]:
        """The daemon's counters, as ``nczfs stats`` shows them."""
        return self._control()["counters"]

    def sync(self) -> None:
        """Store every pending write now (zip: commit them into the archive)."""
        store_pending(str(self.path))

    def unmount(self, lazy: bool = False, timeout: float = 60.0) -> None:
        """Store pending writes, unmount and wait for the daemon (raises UnmountError)."""
        status = self.process.poll()
        if status is not None:  # the daemon died: what it held is gone; the mount is only removed
            if _is_mounted(self.path):
                subprocess.run(["fusermount3", "-u", "-z", str(self.path)], capture_output=True)
                raise UnmountError(f"{self.path}: the daemon had exited (status {status}); removed its stale mount")
            return
        unmount(str(self.path), self.process.pid, lazy=lazy, timeout=timeout)
        if lazy:
            return
        status = self.process.wait(timeout)
        if status != 0:
            raise UnmountError(f"{self.path}: the daemon exited with status {status} (writes not stored; "
                               f"see its log)")

    def __repr__(self) -> str:
        return f"<nczfs mount of {self.source} on {self.path}, pid {self.pid}>"


def start(source: str, mountpoint: str | os.PathLike, **options: Any) -> Mount:
    """Mount ``source`` on ``mountpoint``; returns once the mount answers requests (``nczfs.daemon.mount``
    is the module that serves a mount: this is ``nczfs.api.start``)."""
    opts = option_strings(options)
    _checked(str(source), opts)  # a bad SOURCE or option is refused here, as the command line would
    path = Path(os.path.abspath(mountpoint))
    rfd, wfd = os.pipe()
    argv = [sys.executable, "-m", "nczfs", "mount", "--ready-fd", str(wfd), str(source), str(path),
            *(["-o", ",".join(opts)] if opts else [])]
    with tempfile.TemporaryFile() as errors:
        try:
            process = subprocess.Popen(argv, pass_fds=(wfd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=errors, cwd="/", start_new_session=True, env=_child_env())
        finally:
            os.close(wfd)
        with os.fdopen(rfd, "rb") as r:
            lines = r.read().decode(errors="replace").splitlines()
        if lines and lines[-1] == "ok":
            for line in lines[:-1]:
                warnings.warn(line.removeprefix("warning "), MountWarning, stacklevel=3)
            return Mount(path, str(source), process)
        status = process.wait()
        errors.seek(0)
        said = errors.read().decode(errors="replace").strip()
    if lines and lines[-1].startswith("error "):
        raise MountError(lines[-1][6:])
    raise MountError(said.removeprefix("nczfs: ") or f"the daemon exited with status {status} before the mount was ready")


def _is_mounted(path: Path) -> bool:
    from nczfs.toolbox.mounttable import table

    return any(m.path == str(path) for m in table())


def _child_env() -> dict[str, str]:
    """The caller's environment; a caller importing nczfs from a checkout (not installed) runs
    the daemon from that checkout too."""
    env = dict(os.environ)
    here = Path(__file__).resolve().parents[1]
    if (here / "pyproject.toml").is_file():
        env["PYTHONPATH"] = os.pathsep.join([str(here), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("NOTIFY_SOCKET", None)
    return env


@contextlib.contextmanager
def mounted(source: str, mountpoint: str | os.PathLike, **options: Any) -> Iterator[Mount]:
    """``with nczfs.mounted(source, mountpoint, **options) as mnt:`` -- see :func:`start`;
    on leaving, pending writes are stored and the mount is removed."""
    m = start(source, mountpoint, **options)
    try:
        yield m
    finally:
        m.unmount()


def open_view(source: str, present: str = "as-stored", **options: Any):
    """A zarr-python store serving ``source`` as nczfs mounts it, in this process (no FUSE):
    ``present=`` one of as-stored, netcdf-4.10, netcdf-4.9, netcdf-4.9.1, xarray; writes are
    validated (``validate=``) and translated back as through a mount. Close it when done."""
    from nczfs.zarrstore import NczfsZarrStore

    parsed, values = _checked(source, option_strings({**options, "present": present}))
    return NczfsZarrStore.open(MountConfig.of(parsed, "", **values))


def _checked(source: str, opts: list[str]):
    """SOURCE parsed and the ``-o`` items ``opts`` parsed for its backend (those only other
    backends take refused), or MountError saying why not."""
    from nczfs.config.source import parse_source

    try:
        parsed = parse_source(source)
        return parsed, parse_options(opts, parsed.backend)
    except NczfsError as exc:
        raise MountError(str(exc)) from None
