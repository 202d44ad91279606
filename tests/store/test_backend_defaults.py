"""What each backend's store declares for the mount to pick its defaults by, read where a mount
reads it: its SOURCE and flags parsed as ``nczfs mount`` parses them, the store opened as the
daemon opens it (``open_store``), the cache built over it as the daemon builds it (``cached``).

Whether the store is remote (its bytes kept in memory and in ``--cache-dir``) and the metadata TTL
a mount uses when no ``-o metadata_ttl=`` is given are the store's
:class:`~nczfs.store.capabilities.Capabilities`; a read-only mount's default TTL is the long one
whatever the store says."""

from __future__ import annotations

import json
import zipfile

import pytest

from nczfs.cli.mountargs import build_config
from nczfs.cli.parser import build_parser
from nczfs.daemon.stack import cached
from nczfs.store.capabilities import LONG_TTL, SHORT_TTL
from nczfs.store.registry import BACKENDS, open_store
from nczfs.store.threads import ThreadedStore
from tests.mount.suitemounts import backend_of

#: backend -> (remote, the TTL of a writable mount when none is given); a read-only mount's: LONG_TTL
DEFAULTS = {
    "directory": (False, LONG_TTL),
    "zip": (False, LONG_TTL),
    "memory": (False, LONG_TTL),
    "reference": (True, LONG_TTL),
    "http": (True, LONG_TTL),
    "s3": (True, SHORT_TTL),
    "gcs": (True, SHORT_TTL),
    "azure": (True, SHORT_TTL),
    "icechunk": (True, SHORT_TTL),
}


def test_the_table_covers_every_registered_backend():
    assert set(DEFAULTS) == set(BACKENDS)


def _source(name: str, request, tmp_path, monkeypatch) -> tuple[str, list[str]]:
    """A SOURCE of backend ``name`` that opens, and the mount arguments that reach it."""
    if name == "memory":
        return f"memory://defaults-{tmp_path.name}", []
    if name == "reference":
        (tmp_path / "refs.json").write_text(json.dumps({"version": 1, "refs": {".zgroup": '{"zarr_format": 2}'}}))
        return str(tmp_path / "refs.json"), []
    if name == "http":
        from tests.store.test_webzarr import publish

        return publish(request.getfixturevalue("web_server"), f"defaults-{tmp_path.name}.zarr", 2, tmp_path), []
    if name == "zip":
        zipfile.ZipFile(tmp_path / "data.zip", "w").close()
        return str(tmp_path / "data.zip"), []
    backend, env = backend_of(name, request, tmp_path)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return backend.source, list(getattr(backend, "mount_args", []))


@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only"])
@pytest.mark.parametrize("name", DEFAULTS)
def test_each_backend_declares_whether_it_is_remote_and_its_default_ttl(name, read_only, request, tmp_path,
                                                                         monkeypatch):
    remote, writable_ttl = DEFAULTS[name]
    source, args = _source(name, request, tmp_path, monkeypatch)
    (tmp_path / "mnt").mkdir()
    argv = ["mount", source, str(tmp_path / "mnt"), *args, "-o", f"cache_dir={tmp_path / 'cache'}"]
    config = build_config(build_parser().parse_args([*argv, *(["--read-only"] if read_only else [])]))
    assert config.source.backend == name and config.metadata_ttl is None
    store = open_store(config)
    try:
        ttl = LONG_TTL if read_only else writable_ttl
        assert store.capabilities.remote is remote
        assert config.effective_metadata_ttl(store.capabilities) == ttl
        cache = cached(ThreadedStore(store), config)
        assert cache.cache_bytes is remote and (cache.disk is not None) is remote
        # a local directory's attributes are live: the cache asks it each time, the mount still uses the TTL
        assert cache.ttl == (0 if name == "directory" else ttl)
        given = build_config(build_parser().parse_args([*argv, "-o", "metadata_ttl=7"]))
        assert given.effective_metadata_ttl(store.capabilities) == 7.0
    finally:
        store.close()
