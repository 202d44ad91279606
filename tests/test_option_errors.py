"""Every ``-o`` option refuses a bad value in one form, whichever rule refuses it and whichever
way it is given: ``-o KEY=VALUE: reason`` (the command line says ``nczfs: `` before it; the Python
API's MountError says the same; ``-o KEY: reason`` where no value was given)."""

from __future__ import annotations

import re

import pytest

import nczfs
from nczfs.cli import main
from nczfs.config.mountconfig import MOUNT_ROWS, option_rules, parse_options
from nczfs.config.source import parse_source
from nczfs.store.options import flag, nonempty
from nczfs.store.registry import BACKENDS
from nczfs.toolbox.errors import SourceError

#: a bad value of each option whose rule checks more than that it has one (a flag: any value; a
#: name or a path: the empty one)
BAD = {
    "uid": "me", "gid": "us", "umask": "9", "metadata_ttl": "-1", "cache_size": "lots", "cache_dir_size": "huge",
    "write_memory": "1X", "prefetch_siblings": "-2", "list_tree_keys": "many", "read_ahead_kb": "4M",
    "decode_threads": "-1", "log_level": "loud", "log_format": "JSON", "metrics": "here", "validate": "maybe",
    "present": "cf", "transcode": "gzip", "nc_files": "hdf5", "retries": "-1", "connect_timeout": "0",
    "read_timeout": "soon", "overwrite": "sometimes", "sse": "des", "storage_class": "cheap", "zip_layout": "tree",
    "virtual_chunk_container": "ftp://host/x",
}
#: options that take any value or none: mount(8) and fstab pass them as they come
ANY_VALUE = {"ro", "read_only", "allow_other"}
#: a SOURCE of each backend (parsed, never opened: every option is refused before that)
SOURCES = {"directory": "{tmp}", "zip": "{tmp}/a.zip", "reference": "{tmp}/refs.json", "s3": "s3://bucket/p",
           "gcs": "gs://bucket/p", "azure": "az://container/p", "http": "http://127.0.0.1:1/a.zarr",
           "icechunk": "icechunk://{tmp}/repo"}


def _bad(key: str) -> str:
    applies = option_rules()[key][0]
    if key in BAD:
        return BAD[key]
    assert applies in (flag, nonempty), f"-o {key}: give it a bad value in BAD"
    return "1" if applies is flag else ""


def _source(key: str, tmp) -> str:
    """A SOURCE of a backend that takes ``key`` (the mount's own options: a directory)."""
    if any(key in row.rules for row in MOUNT_ROWS):
        backend = "directory"
    else:
        backend = next(name for name, b in BACKENDS.items() if any(key in row.rules for row in b.rows))
    return SOURCES[backend].format(tmp=tmp)


KEYS = sorted(set(option_rules()) - ANY_VALUE)


def test_every_option_has_a_bad_value_or_takes_any():
    assert not ANY_VALUE - set(option_rules()) and not set(BAD) - set(KEYS)
    for key in KEYS:
        _bad(key)


@pytest.mark.parametrize("key", KEYS)
def test_a_bad_value_is_refused_in_one_form_everywhere(key, tmp_path, capsys):
    value, source = _bad(key), _source(key, tmp_path)
    with pytest.raises(SourceError) as parsed:
        parse_options([f"{key}={value}"], parse_source(source).backend)
    said = str(parsed.value)
    assert re.fullmatch(rf"-o {re.escape(key)}={re.escape(value)}: [a-z(][^\n]*", said), said
    # the command line: one line, the same words (the mount point is not there: nothing mounts)
    assert main(["mount", source, str(tmp_path / "nowhere"), "-o", f"{key}={value}"]) == 2
    assert capsys.readouterr().err == f"nczfs: {said}\n"
    assert main(["inspect", source, "-o", f"{key}={value}"]) == 2
    assert capsys.readouterr().err == f"nczfs: {said}\n"
    # the Python API
    with pytest.raises(nczfs.MountError) as api:
        nczfs.open_view(source, **{key: value})
    assert str(api.value) == said


def test_an_option_of_another_backend_names_the_value_too():
    with pytest.raises(SourceError) as info:
        parse_options(["tag=v1"], "directory")
    assert str(info.value) == "-o tag=v1: an option of Icechunk sources (icechunk:// or icechunk+s3://)"
