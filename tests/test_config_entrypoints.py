"""Every entry point builds its config in one place, and so checks a source's options alike:
``nczfs mount``, ``nczfs inspect``/``validate``, ``nczfs.open_view`` and ``nczfs.mounted`` refuse
an option only another backend takes (naming the key and whose it is), and a source its options
make read-only (an Icechunk tag) is read-only whichever way it is opened."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import nczfs
from nczfs.cli import main
from nczfs.cli.mountargs import build_config
from nczfs.cli.parser import build_parser
from nczfs.cli.usage import UsageError
from nczfs.config.mountconfig import MountConfig, parse_options, source_values
from nczfs.config.source import parse_source
from nczfs.store.icechunk.store import IcechunkStore
from nczfs.toolbox.errors import SourceError

FOREIGN = r"-o tag=v1: an option of Icechunk sources \(icechunk:// or icechunk\+s3://\)"


@pytest.fixture
def ocean(tmp_path) -> Path:
    root = tmp_path / "ocean.file"
    shutil.copytree(Path(nczfs.__file__).parent / "samples" / "ocean.file", root)
    return root


@pytest.fixture
def tagged(tmp_path) -> Path:
    """A local Icechunk repository whose tag v1 holds a root group."""
    icechunk = pytest.importorskip("icechunk")
    zarr = pytest.importorskip("zarr")
    path = tmp_path / "repo"
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))
    session = repo.writable_session("main")
    zarr.create_group(session.store, attributes={"title": "tagged"})
    repo.create_tag("v1", session.commit("a group"))
    return path


def test_an_option_of_another_backend_is_refused_by_the_mount_command(ocean, tmp_path):
    with pytest.raises(UsageError, match=FOREIGN):
        build_config(build_parser().parse_args(["mount", str(ocean), str(tmp_path), "-o", "tag=v1"]))


@pytest.mark.parametrize("command", ["inspect", "validate"])
def test_an_option_of_another_backend_is_refused_by_inspect_and_validate(ocean, command, capsys):
    assert main([command, str(ocean), "-o", "ro,tag=v1"]) == 2
    assert "nczfs: -o tag=v1: an option of Icechunk sources (icechunk:// or icechunk+s3://)" in capsys.readouterr().err
    assert main([command, str(ocean)]) == 0


def test_an_option_of_another_backend_is_refused_by_open_view_and_mounted(ocean, tmp_path):
    with pytest.raises(nczfs.MountError, match=FOREIGN):
        nczfs.open_view(str(ocean), tag="v1")
    with pytest.raises(nczfs.MountError, match=r"-o commit_message=x: an option of Icechunk sources"):
        nczfs.open_view(str(ocean), read_only=True, commit_message="x")
    # refused before any daemon is started: the mount point need not even exist
    with pytest.raises(nczfs.MountError, match=FOREIGN):
        with nczfs.mounted(str(ocean), tmp_path / "nowhere", tag="v1"):
            pass


def test_an_option_parsed_for_a_source_is_refused_where_only_another_backend_takes_it():
    assert parse_options(["tag=v1"], "icechunk") == {"tag": "v1"}
    with pytest.raises(SourceError, match=FOREIGN):
        parse_options(["ro", "tag=v1"], "directory")
    with pytest.raises(SourceError, match="-o virtual_chunk_container=file:///d/: an option of Icechunk sources"):
        parse_options(["virtual_chunk_container=file:///d/"], "s3")


def test_a_source_flag_is_read_by_its_option_rule(tmp_path):
    """--endpoint-url, --profile, --region, --no-sign-request and --allow-root set what their -o
    keys set (the rows' rules: no copy of them), after the -o strings."""
    args = build_parser().parse_args(["inspect", "refs.json", "-o", "profile=a,allow_root=/x", "--profile", "b",
                                      "--endpoint-url", "http://e:1", "--region", "r", "--no-sign-request",
                                      "--allow-root", "rel"])
    values = source_values(args, "reference")
    assert values == {"profile": "b", "endpoint_url": "http://e:1", "region": "r", "no_sign_request": True,
                      "allow_roots": ("/x", str(Path("rel").resolve()))}
    with pytest.raises(SourceError, match="-o tag=v1: an option of Icechunk sources"):
        source_values(build_parser().parse_args(["inspect", "refs.json", "-o", "tag=v1"]), "reference")


def test_an_icechunk_tag_is_read_only_however_its_config_is_built(tagged, tmp_path):
    (tmp_path / "mnt").mkdir()
    source = parse_source(f"icechunk://{tagged}")
    for config in (MountConfig.of(source, "", tag="v1"),
                   build_config(build_parser().parse_args(["mount", f"icechunk://{tagged}", str(tmp_path / "mnt"),
                                                           "-o", "tag=v1"]))):
        assert config.read_only and config.effective_metadata_ttl(IcechunkStore.capabilities) == 60.0
    assert not MountConfig.of(source, "", branch="main").read_only
    assert MountConfig.of(source, "", branch="main").effective_metadata_ttl(IcechunkStore.capabilities) == 1.0
    store = nczfs.open_view(f"icechunk://{tagged}", tag="v1")
    try:
        assert store.read_only and store.config.read_only
        assert store.config.effective_metadata_ttl(store._sync_store.capabilities) == 60.0
        with pytest.raises(ValueError, match="read_only=True"):
            store.with_read_only(False)
    finally:
        store.close()
