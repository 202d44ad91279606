"""One live mount of each backend for a whole test module, for the suites that run many short
examples on it (zarr-python's own store suites, the model-based file test): mounting per example
would cost more than the examples.

``mount_backend(name, request, base)`` is a context manager yielding the ``Mount``; each example
works in a fresh subdirectory of it (``fresh_dir``). ``NCZFS_LONG_SUITES=1`` makes the suites run
their long example counts (``examples``).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from typing import Iterator

from hypothesis import HealthCheck, settings

from tests.helpers import CloudBackend, DirectoryBackend, S3Backend, ZipBackend, mounted

#: the long runs, opt-in (as NCZFS_POSIX_FULL gates the whole pjdfstest)
LONG = os.environ.get("NCZFS_LONG_SUITES") == "1"


def examples(short: int, long: int = 200, steps: int | None = None) -> settings:
    """Hypothesis settings: ``short`` derandomized examples in CI, ``long`` random ones opt-in."""
    extra = {} if steps is None else {"stateful_step_count": steps}
    return settings(max_examples=long if LONG else short, deadline=None, derandomize=not LONG,
                    suppress_health_check=list(HealthCheck), database=None, **extra)


def fresh_dir(root: Path, stem: str = "ex") -> Path:
    """A new, empty subdirectory of a mount for one example."""
    path = root / f"{stem}-{uuid.uuid4().hex[:10]}"
    path.mkdir()
    return path


def _cloud(request, base: Path, name: str):
    """A CloudBackend of the session's fake-gcs-server or Azurite, and the environment its mount needs."""
    if name == "gcs":
        from tests.gcsserver import service_account_file

        server = request.getfixturevalue("gcs_server")
        key = service_account_file(base / "sa.json")
        opts = f"endpoint_url={server.endpoint},google_application_credentials={key}"
        return CloudBackend(server, server.new_bucket("zs"), "gs", ["-o", opts]), {}
    from tests.azurite import ACCOUNT, KEY

    server = request.getfixturevalue("azurite")
    opts = f"endpoint_url={server.endpoint},azure_storage_account={ACCOUNT}"
    return CloudBackend(server, server.new_container("zs"), "az", ["-o", opts]), {"AZURE_STORAGE_ACCOUNT_KEY": KEY}


class IcechunkRepo:
    """An empty Icechunk repository in a local directory (its mount commits at each sync)."""

    name = "icechunk"

    def __init__(self, path: Path) -> None:
        import icechunk

        icechunk.set_logs_filter("error")
        icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))
        self.source = f"icechunk://{path}"


def backend_of(name: str, request, base: Path):
    """(backend, environment for the daemon) for a backend name."""
    if name == "directory":
        (base / "backing").mkdir()
        return DirectoryBackend(base / "backing"), {}
    if name == "zip":
        return ZipBackend(base / "backing.zip"), {}
    if name == "s3":
        server = request.getfixturevalue("s3_server")
        return S3Backend(server, server.shared_bucket, server.new_prefix("zs")), {}
    if name in ("gcs", "azure"):
        return _cloud(request, base, name)
    if name == "icechunk":
        return IcechunkRepo(base / "repo"), {}
    raise AssertionError(name)


@contextlib.contextmanager
def mount_backend(name: str, request, base: Path, *args: str) -> Iterator:
    """A read/write mount of backend ``name`` on ``base/mnt``; unmounted at exit, when its log must
    hold no traceback and no ERROR line."""
    backend, env = backend_of(name, request, base)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with mounted(backend, base / "mnt", *args) as m:
            _restore(saved)
            yield m
    finally:
        _restore(saved)
    text = m.log_text()
    assert "Traceback" not in text and " ERROR " not in text, f"{name} daemon log has errors:\n{text}"


def _restore(saved: dict) -> None:
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def remount(m) -> None:
    """Unmount ``m`` (a ``Mount``) and mount its backend again on the same path, with the same
    options (every handle on it must be closed)."""
    from tests.helpers import is_mounted, run_nczfs, unmount

    unmount(m.path)
    extra = getattr(m.backend, "mount_args", [])
    res = run_nczfs("mount", m.backend.source, str(m.path), "--log-file", str(m.log), *extra, *m.extra_args)
    assert res.returncode == 0 and is_mounted(m.path), f"remount failed ({res.returncode}): {res.stderr}"


@contextlib.contextmanager
def mount_pair(request, base: Path, *args: str) -> Iterator[tuple]:
    """Two mounts of one S3 prefix (``base/mnt1``, ``base/mnt2``), as two machines would have."""
    server = request.getfixturevalue("s3_server")
    backend = S3Backend(server, server.shared_bucket, server.new_prefix("pair"))
    with mounted(backend, base / "mnt1", *args) as one, mounted(backend, base / "mnt2", *args) as two:
        yield one, two
    for m in (one, two):
        text = m.log_text()
        assert "Traceback" not in text and " ERROR " not in text, f"daemon log has errors:\n{text}"
