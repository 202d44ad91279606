"""The scheme registry: every SOURCE parse_source accepts names a registered backend, which
open_store opens with the options the mount's config gives it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import pytest

from nczfs.cli.usage import UsageError
from nczfs.config.mountconfig import MountConfig, parse_options
from nczfs.toolbox.errors import SourceError
from nczfs.config.source import Source, parse_source
from nczfs.store.options import OptionRow, given, to, valued
from nczfs.store.opening import Given, Located, Opening
from nczfs.store.directory.store import DirectoryStore
from nczfs.store.memory.store import MemoryStore
from nczfs.store.registry import BACKENDS, Backend, backend_of, open_store
from nczfs.store.objstore.options import CloudOptions, S3Options
from nczfs.store.objstore.transport import Bounds
from nczfs.store.zip.store import ZipStore
from nczfs.store.options import Flag

SOURCES = {
    "/some/dir": "directory",
    "file:///some/dir#mode=nczarr,file": "directory",
    "/some/archive.zip": "zip",
    "file:///some/x#mode=nczarr,zip": "zip",
    "/some/refs.json": "reference",
    "reference:///some/refs.parq": "reference",
    "s3://bucket/prefix": "s3",
    "gs3://bucket/prefix": "s3",
    "https://s3.eu-west-1.amazonaws.com/bucket/prefix#mode=nczarr,s3": "s3",
    "gs://bucket/prefix": "gcs",
    "az://container/prefix": "azure",
    "abfs://container@account.dfs.core.windows.net/prefix": "azure",
    "https://example.org/data/x.zarr": "http",
    "memory://name": "memory",
    "icechunk:///some/repo": "icechunk",
    "icechunk+s3://bucket/repo": "icechunk",
}


@pytest.mark.parametrize("text", SOURCES)
def test_every_source_names_a_registered_backend(text):
    source = parse_source(text, cwd="/")
    assert source.backend == SOURCES[text]
    assert backend_of(MountConfig(source=source, mountpoint="/mnt")).name == source.backend


def test_every_registered_backend_is_named_by_some_source():
    assert set(BACKENDS) == set(SOURCES.values())


def test_local_backends_are_those_that_locate_nothing_themselves(monkeypatch):
    """A backend with no ``locate`` of its own opens local paths: ``local`` is derived, not declared."""
    assert {b.name for b in BACKENDS.values() if b.local} == {"directory", "zip", "reference"}
    monkeypatch.setitem(BACKENDS, "tape", Backend("tape", lambda opening: MemoryStore(), modes=("tape",)))
    assert parse_source("/dev/st0#mode=tape", cwd="/").backend == "tape"


def test_one_file_backends_name_a_root_datasets_files_after_the_file(monkeypatch):
    """The registry's capability, not the backend's name, decides (a toy backend alike)."""
    from nczfs.nczarr.ncfile.ncfiles import root_name

    assert {b.name for b in BACKENDS.values() if b.one_file} == {"zip", "reference"}
    assert root_name(parse_source("/data/run.zip")) == "run"
    assert root_name(parse_source("/data/run.zarr")) == "run.zarr"
    monkeypatch.setitem(BACKENDS, "tape", Backend("tape", lambda opening: MemoryStore(), schemes=("tape",), one_file=True))
    assert root_name(Source("tape", "/dev/st0.tar", text="tape:///dev/st0.tar")) == "st0"
    assert root_name(Source("other", "/dev/st0.tar", text="other:///dev/st0.tar")) == "st0.tar"


@pytest.mark.parametrize("text, location", [("gs://bkt/p/q", "bkt/p/q"), ("az://cont/p", "cont/p"),
                                            ("abfs://cont@acct.dfs.core.windows.net/p/q", "cont/p/q")])
def test_cloud_schemes_are_parsed_by_their_registry_entry(text, location):
    assert parse_source(text).location == location and BACKENDS[parse_source(text).backend].locate is not None
    with pytest.raises(SourceError, match=f"mode zip does not fit a {text.partition(':')[0]}:// URL"):
        parse_source(text + "#mode=zip")


class ToyStore(MemoryStore):
    """A toy backend's store: what a new backend's package would hold; it declares what it can
    do, its default metadata TTL and that it is remote among them."""

    capabilities = replace(MemoryStore.capabilities, remote=True, metadata_ttl=5.0)


TOYS: dict[str, ToyStore] = {}


@dataclass(frozen=True)
class ToyOptions:
    """The toy backend's options dataclass: its -o rows and what they set."""

    shelf: str
    #: -o toy_drawer=N: which drawer of the shelf (the toy's own option)
    drawer: int = 0

    rows: ClassVar[tuple[OptionRow, ...]] = (
        OptionRow("toy_drawer=N", "toy: the drawer of the shelf (default 0)",
                  {"toy_drawer": (valued, to("drawer", lambda key, value: int(value)))}, own=True,
                  flags=(Flag("--toy-drawer", "toy: the drawer of the shelf", metavar="N"),)),
    )

    @classmethod
    def of(cls, opening) -> ToyOptions:
        return given(cls, opening.options, shelf=opening.source.location)


def _toy_location(given_: Given) -> Located:
    assert given_.parts is not None
    return Located(given_.parts.netloc + given_.parts.path)


def test_a_backend_is_its_package_and_one_register_call(tmp_path):
    """A backend registered with its scheme, location parser, -o rows and store (declaring its
    capabilities: remote, its default TTL) is parsed, opened with its own option, listed in the
    help and served (through the whole stack, as open_view builds it) with no code elsewhere; its
    option is refused on other sources."""
    import json

    import numpy as np
    import zarr

    import nczfs
    from nczfs.cli.mountargs import build_config
    from nczfs.cli.parser import build_parser
    from nczfs.config.mountconfig import option_help, source_values
    from nczfs.daemon.stack import cached
    from nczfs.store.capabilities import LONG_TTL
    from nczfs.store.registry import register
    from nczfs.store.threads import ThreadedStore

    for drawer, values in ((0, [1, 2, 3]), (2, [7, 8, 9])):
        toy = ToyStore("shelf")
        toy.set(".zgroup", json.dumps({"zarr_format": 2}).encode())
        toy.set("t/.zarray", json.dumps({"zarr_format": 2, "shape": [3], "chunks": [3], "dtype": "<i4", "order": "C",
                                         "compressor": None, "filters": None, "fill_value": 0}).encode())
        toy.set("t/0", np.array(values, "<i4").tobytes())
        TOYS[f"shelf/ds/{drawer}"] = toy
    register(Backend("toy", lambda opening: TOYS[f"{(o := ToyOptions.of(opening)).shelf}/{o.drawer}"],
                     schemes=("toy",), locate=_toy_location, rows=ToyOptions.rows,
                     forms="toy://SHELF/BOX (a toy's shelf)"))
    try:
        source = parse_source("toy://shelf/ds")
        assert (source.backend, source.location) == ("toy", "shelf/ds")
        config = MountConfig.of(source, "/mnt")
        assert open_store(config) is TOYS["shelf/ds/0"]
        assert config.effective_metadata_ttl(TOYS["shelf/ds/0"].capabilities) == 5.0
        assert MountConfig.of(source, "/mnt", read_only=True).effective_metadata_ttl(ToyStore.capabilities) == LONG_TTL
        assert cached(ThreadedStore(TOYS["shelf/ds/0"]), config).cache_bytes  # remote: its bytes are kept
        assert ("toy_drawer=N", "toy: the drawer of the shelf (default 0)") in option_help()
        (tmp_path / "mnt").mkdir()
        config = build_config(build_parser().parse_args(["mount", "toy://shelf/ds", str(tmp_path / "mnt"),
                                                         "-o", "toy_drawer=2"]))
        assert config.backend_options == {"drawer": 2} and open_store(config) is TOYS["shelf/ds/2"]
        # its row's flag too: mount, inspect and validate take it, read by its -o key's rule
        by_flag = build_config(build_parser().parse_args(["mount", "toy://shelf/ds", str(tmp_path / "mnt"),
                                                          "--toy-drawer", "2"]))
        assert by_flag == config
        for command in ("mount", "inspect", "validate"):
            shown = " ".join(_command_help(command).split())
            assert "--toy-drawer N toy: the drawer of the shelf" in shown
            assert "toy://SHELF/BOX (a toy's shelf)" in shown  # SOURCE's help: the forms it declares
        for command in ("inspect", "validate"):
            args = build_parser().parse_args([command, "toy://shelf/ds", "--toy-drawer=2"])
            assert source_values(args, "toy") == {"drawer": 2}
        for argv in (["-o", "toy_drawer=1"], ["--toy-drawer", "1"]):
            with pytest.raises(UsageError, match="-o toy_drawer=1: an option of toy sources"):
                build_config(build_parser().parse_args(["mount", "memory://x", str(tmp_path / "mnt"), *argv]))
        with pytest.raises(SourceError, match="mode zip does not fit a toy:// URL"):
            parse_source("toy://shelf/ds#mode=zip")
        for drawer, values in ((0, [1, 2, 3]), (2, [7, 8, 9])):
            store = nczfs.open_view("toy://shelf/ds", read_only=True, toy_drawer=drawer)
            try:
                np.testing.assert_array_equal(zarr.open_group(store, mode="r")["t"][:], values)
            finally:
                store.close()
    finally:
        del BACKENDS["toy"], TOYS["shelf/ds/0"], TOYS["shelf/ds/2"]
    with pytest.raises(SourceError, match="unsupported URL scheme 'toy'"):
        parse_source("toy://shelf/ds")
    with pytest.raises(SourceError, match="toy_drawer=1: unknown mount option"):
        parse_options(["toy_drawer=1"])
    with pytest.raises(SystemExit):  # argparse: unrecognized arguments
        build_parser().parse_args(["mount", "memory://x", str(tmp_path / "mnt"), "--toy-drawer", "1"])


def test_source_help_lists_each_backends_forms_in_the_order_registered():
    """SOURCE's help (mount, inspect, validate) is what the backends declare, each once, in the
    order a SOURCE tries them: no list of backends elsewhere to keep up to date."""
    assert [name for name, b in BACKENDS.items() if not b.forms] == []
    for command in ("mount", "inspect", "validate"):
        assert _source_help(command) == ", ".join(b.forms for b in BACKENDS.values())


def _source_help(command: str) -> str:
    import argparse

    from nczfs.cli.parser import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return next(a.help for a in sub.choices[command]._actions if a.dest == "source")


def _command_help(command: str) -> str:
    import argparse

    from nczfs.cli.parser import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command].format_help()


def test_local_backends_open_with_the_options_the_config_gives(tmp_path):
    def opened(text: str, **options):
        return open_store(MountConfig(source=parse_source(text), mountpoint="/mnt", **options))

    store = opened(str(tmp_path), read_only=True)
    assert isinstance(store, DirectoryStore) and store.capabilities.read_only
    assert opened(str(tmp_path)).capabilities.checks_writes
    lax = opened(str(tmp_path), backend_options={"overwrite": "last_writer_wins"}).capabilities
    assert not lax.checks_writes and not lax.checks_deletes and not lax.read_only
    store = opened(str(tmp_path / "new.zip"), backend_options={"zip_layout": "flat"})
    assert isinstance(store, ZipStore) and store.layout == "flat" and not store.capabilities.read_only
    store.close()
    assert isinstance(opened("memory://registry"), MemoryStore)


def test_a_backend_nobody_registered_is_a_source_error():
    config = MountConfig(source=Source("tape", "/dev/st0", text="tape:///dev/st0"), mountpoint="/mnt")
    with pytest.raises(SourceError, match="tape:///dev/st0: the tape backend is not available"):
        open_store(config)


def test_an_s3_url_is_parsed_once_into_the_source():
    source = parse_source("https://s3.eu-west-1.amazonaws.com/bucket/a/b#mode=nczarr,s3")
    assert (source.parsed.bucket, source.parsed.prefix, source.parsed.region) == ("bucket", "a/b", "eu-west-1")


def test_one_retry_policy_for_every_client(monkeypatch):
    """obstore's retries, botocore's and the attempts nczfs makes itself: as many, paused alike."""
    from nczfs.store.objstore import transport

    bounds = Bounds(retries=3, connect_timeout=2, read_timeout=7)
    assert bounds.botocore() == {"mode": "standard", "total_max_attempts": 4}
    obstore = bounds.obstore("http://127.0.0.1:1", None)
    assert obstore["retry_config"]["max_retries"] == 3
    assert obstore["client_options"]["read_timeout"].total_seconds() == 7
    assert obstore["client_options"]["connect_timeout"].total_seconds() == 2
    pauses, retried = [], []
    monkeypatch.setattr(transport.time, "sleep", pauses.append)
    assert list(bounds.attempts(lambda: retried.append(1))) == [0, 1, 2, 3]
    assert pauses == [0.05, 0.1, 0.2] and len(retried) == 3
    backoff = obstore["retry_config"]["backoff"]
    assert backoff["init_backoff"].total_seconds() == pauses[0] and backoff["base"] == 2


def icechunk_config(text: str, read_only: bool = False, **options) -> MountConfig:
    return MountConfig(source=parse_source(text, cwd="/"), mountpoint="/mnt", read_only=read_only,
                       backend_options=options)


def test_the_icechunk_opener_builds_its_options_from_the_config(monkeypatch):
    from nczfs.store.icechunk import repository
    from nczfs.store.icechunk.options import IcechunkOptions

    opened = []
    monkeypatch.setattr(repository, "open_icechunk", opened.append)
    open_store(icechunk_config("icechunk+s3://bkt/repo", branch="dev", commit_message="hello",
                               virtual_chunk_containers=("file:///d/",), profile="p", region="r",
                               endpoint_url="http://127.0.0.1:1", no_sign_request=True, read_only=True))
    open_store(icechunk_config("icechunk://some/repo", tag="v1"))
    assert opened == [
        IcechunkOptions("icechunk+s3://bkt/repo", "s3://bkt/repo", branch="dev", read_only=True,
                        commit_message="hello", virtual_chunk_containers=("file:///d/",), profile="p", region="r",
                        endpoint_url="http://127.0.0.1:1", anonymous=True),
        IcechunkOptions("icechunk://some/repo", "/some/repo", tag="v1"),
    ]


def test_the_commit_message_and_branch_the_config_gives_reach_the_icechunk_store(tmp_path):
    import icechunk

    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    repo.create_branch("dev", repo.lookup_branch("main"))
    store = open_store(icechunk_config(f"icechunk://{tmp_path}/repo", branch="dev", commit_message="from -o"))
    try:
        store.set("zarr.json", b'{"zarr_format": 3, "node_type": "group", "attributes": {}}')
        store.sync()
    finally:
        store.close()
    assert [c.message for c in repo.ancestry(branch="dev")][0] == "from -o"
    assert len(list(repo.ancestry(branch="main"))) == 1


@pytest.mark.parametrize("options, text", [(S3Options, "s3://bkt/p#aws.profile=prof"), (CloudOptions, "gs://bkt/p")])
def test_object_store_options_take_every_field_their_values_name(options, text):
    """``of()`` reads its values by its dataclass's fields: a field a new row sets is not dropped
    (a subclass with one more field alike), and the fields ``of()`` computes keep its value."""

    @dataclass(frozen=True)
    class More(options):
        extra: str | None = None

    values = {"extra": "x", "endpoint_url": "http://e", "retries": 7, "overwrite": "last_writer_wins",
              "read_only": "not this", "source": "not this"}
    got = More.of(Opening(parse_source(text), "/mnt", True, values))
    assert (got.extra, got.endpoint_url, got.overwrite, got.read_only, got.source) == (
        "x", "http://e", "last_writer_wins", True, text)
    assert (got.retries if options is S3Options else got.bounds.retries) == 7
    if options is S3Options:
        assert got.profile == "prof" and S3Options.of(Opening(parse_source(text), options={"profile": "p2"})).profile == "p2"
