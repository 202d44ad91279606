"""Help, the -o option list, s3fs's option names, and the source options of inspect/validate."""

from __future__ import annotations

import json

import pytest

from nczfs.cli.parser import build_parser
from nczfs.config.mountconfig import IGNORED_OPTIONS, MountConfig, option_help, parse_options
from tests.helpers import S3Backend, mounted, run_nczfs

#: MountConfig fields that no -o option sets
NOT_OPTIONS = {"source", "mountpoint", "foreground", "spill_threshold", "backend_options"}


def _documented_keys() -> list[str]:
    keys = []
    for form, _ in option_help():
        for part in form.split(", "):
            keys.append(part.split("=")[0])
    return keys


def test_every_o_option_is_listed_by_mount_help_with_a_line_of_help():
    res = run_nczfs("mount", "--help")
    assert res.returncode == 0
    listed = res.stdout.split("mount options (-o):", 1)[1]
    for form, text in option_help():
        assert f"  {form}" in listed and text in listed
    reached: set[str] = set()
    samples = {"uid": "1", "gid": "1", "umask": "022", "metadata_ttl": "1", "cache_size": "1M", "cache_dir": "/tmp/x",
               "cache_dir_size": "1G", "write_memory": "1M", "prefetch_siblings": "1", "list_tree_keys": "1",
               "read_ahead_kb": "1", "decode_threads": "2", "log_file": "/tmp/l", "log_level": "info", "log_format": "json",
               "metrics": "9100", "endpoint_url": "http://h", "url": "http://h", "profile": "p", "region": "r",
               "zip_layout": "flat", "validate": "warn", "present": "xarray", "allow_root": "/tmp",
               "transcode": "zlib", "retries": "2", "connect_timeout": "5", "read_timeout": "60", "sse": "AES256",
               "sse_kms_key_id": "k", "storage_class": "STANDARD_IA", "google_application_credentials": "/tmp/c.json",
               "azure_storage_account": "acct", "branch": "dev", "tag": "v1", "snapshot": "ID",
               "commit_message": "m", "virtual_chunk_container": "file:///d/", "overwrite": "last_writer_wins"}
    for key in _documented_keys():
        if key in IGNORED_OPTIONS or key in ("x-*", "..."):
            continue
        opt = f"{key}={samples[key]}" if key in samples else key
        reached |= set(parse_options([opt]))
    fields = {f for f in MountConfig.__dataclass_fields__} - NOT_OPTIONS
    assert fields - reached == set(), "options nczfs mount --help does not list"


def test_s3fs_option_names_are_aliases():
    assert parse_options(["url=https://s3.example.org,use_path_request_style"]) == {
        "endpoint_url": "https://s3.example.org", "path_style": True}


def test_path_style_reaches_the_s3_client():
    from nczfs.config.source import parse_source
    from nczfs.store.objstore.client import make_client
    from nczfs.store.objstore.options import S3Options

    source = parse_source("s3://bucket/prefix")
    plain = make_client(S3Options.of(MountConfig.of(source, "", region="eu-west-1").opening()), source.parsed)
    path = make_client(S3Options.of(MountConfig.of(source, "", region="eu-west-1", path_style=True).opening()),
                       source.parsed)
    assert plain.meta.config.s3["addressing_style"] == "auto"
    assert path.meta.config.s3["addressing_style"] == "path"


@pytest.mark.fuse
def test_s3fs_style_mount_options_mount(s3_server, tmp_path):
    class ByUrl(S3Backend):
        mount_args: list[str] = []  # the endpoint comes as s3fs's url= instead

    backend = ByUrl(s3_server, s3_server.shared_bucket, s3_server.new_prefix())
    backend.put("a", b"abc")
    with mounted(backend, tmp_path / "mnt", "-o", f"url={s3_server.endpoint},use_path_request_style") as m:
        assert (m.path / "a").read_bytes() == b"abc"


def test_help_command():
    top = run_nczfs("help")
    assert top.returncode == 0 and "log-level" in top.stdout and "mount" in top.stdout
    mount = run_nczfs("help", "mount")
    assert mount.returncode == 0 and mount.stdout == run_nczfs("mount", "--help").stdout
    bad = run_nczfs("help", "frobnicate")
    assert bad.returncode == 2 and "help frobnicate: no such command" in bad.stderr


def test_inspect_and_validate_take_the_source_options_of_mount():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")

    def flags(cmd: str) -> set[str]:
        return {o for a in sub.choices[cmd]._actions for o in a.option_strings}

    source_flags = {"--endpoint-url", "--profile", "--region", "--no-sign-request", "--allow-root", "-o"}
    assert source_flags <= flags("mount")
    assert source_flags <= flags("inspect") and source_flags <= flags("validate")


def test_the_source_flags_are_those_the_backends_rows_declare_each_shown_once():
    """mount, inspect and validate take exactly the flags the registered backends' option rows
    declare, as declared (spelling, help, kind); a flag several backends share is one declaration
    (a row of the package they share) and one line of help."""
    import argparse

    from nczfs.store.registry import BACKENDS

    declared: dict[str, set[int]] = {}
    flags = {}
    for backend in BACKENDS.values():
        for row in backend.rows:
            for f in row.flags:
                declared.setdefault(f.spelling, set()).add(id(f))
                flags[f.spelling] = f
    assert {s for s, ids in declared.items() if len(ids) > 1} == set()
    assert {"--endpoint-url", "--profile", "--region", "--no-sign-request", "--allow-root"} <= set(flags)
    kinds = {argparse._StoreTrueAction: "switch", argparse._AppendAction: "repeat", argparse._StoreAction: "value"}
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("mount", "inspect", "validate"):
        parser = sub.choices[command]
        actions = [a for a in parser._actions if set(a.option_strings) & set(flags)]
        assert sorted(o for a in actions for o in a.option_strings) == sorted(flags), command
        for a in actions:
            f = flags[a.option_strings[0]]
            assert (a.dest, a.help, kinds[type(a)]) == (f.key, f.help, f.kind), a.option_strings
        text = parser.format_help()
        assert all(text.count(f"\n  {s}") == 1 for s in flags), text


def test_a_flag_spells_a_key_of_its_row():
    from nczfs.store.options import Flag, OptionRow, to, valued

    with pytest.raises(ValueError, match="--depth: its key depth is not one of the row's"):
        OptionRow("level=N", "a level", {"level": (valued, to("level"))}, flags=(Flag("--depth", "a depth"),))
    with pytest.raises(ValueError, match="-l: a flag is --NAME"):
        Flag("-l", "a level")


def test_inspect_and_validate_reach_s3_through_endpoint_url(s3_server):
    backend = S3Backend(s3_server, s3_server.shared_bucket, s3_server.new_prefix())
    backend.put_many({
        ".zgroup": json.dumps({"zarr_format": 2}).encode(),
        "t/.zarray": json.dumps({"zarr_format": 2, "shape": [3], "chunks": [3], "dtype": "<i2", "compressor": None,
                                 "fill_value": 0, "filters": None, "order": "C"}).encode(),
        "t/.zattrs": json.dumps({"_ARRAY_DIMENSIONS": ["x"]}).encode(),
        "t/0": b"\x01\x00\x02\x00\x03\x00",
    })
    res = run_nczfs("inspect", backend.source, "--endpoint-url", s3_server.endpoint)
    assert res.returncode == 0, res.stderr
    assert "short t(x) ;" in res.stdout
    res = run_nczfs("validate", backend.source, "-o", f"endpoint_url={s3_server.endpoint}")
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_readme_option_table_is_the_rows_and_nothing_else():
    """Every row is in the README's table, and the table has no other line (it is made from the
    rows: docs/ARCHITECTURE.md)."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme.split("| `-o` option | meaning |", 1)[1].split("\n\n", 1)[0]
    lines = [line for line in table.splitlines() if line.strip() and line.strip() != "|---|---|"]
    rows = option_help()
    made = []
    for form, text in rows:
        cell = form.replace(", ", "`, `").replace("|", "\\|")  # a | in a table cell is written \|
        made.append(f"| `{cell}` | {text.replace('|', '/')} |")
        assert made[-1] in lines, form
    assert len(lines) == len(rows), f"lines no row makes: {[line for line in lines if line not in made]}"


def test_the_metadata_ttl_flag_and_row_say_the_same_default_naming_no_backend():
    """The default is the opened store's (Capabilities.metadata_ttl): --metadata-ttl's help and the
    -o row say so in the same words, with the values the stores declare, and list no backend (a
    new one's default would make a list of them untrue)."""
    import argparse
    import re

    from nczfs.config.mountconfig import TTL_DEFAULT
    from nczfs.store.capabilities import LONG_TTL, SHORT_TTL
    from nczfs.store.registry import BACKENDS

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flag = next(a.help for a in sub.choices["mount"]._actions if "--metadata-ttl" in a.option_strings)
    row = dict(option_help())["metadata_ttl=SECONDS"]
    assert flag.endswith(f"({TTL_DEFAULT})") and row.endswith(f"({TTL_DEFAULT})")
    assert f"{SHORT_TTL:g} for a writable mount" in TTL_DEFAULT and TTL_DEFAULT.endswith(f"else {LONG_TTL:g}")
    names = {n.lower() for b in BACKENDS.values() for n in (b.name, *b.schemes)}
    for text in (flag, row):
        assert set(re.findall(r"[a-z0-9+]+", text.lower())) & names == set(), text
