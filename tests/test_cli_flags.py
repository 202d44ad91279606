"""Each ``nczfs mount`` flag that says what an ``-o`` key says is a spelling of that key: read by the
key's rule (one parse, one check), so a bad value gives the same error either way (naming the key
and the reason), a good one the same config, and the flag wins over ``-o`` whatever their order."""

from __future__ import annotations

import argparse
import re

import pytest

from nczfs.cli.mountargs import build_config, mount_flags
from nczfs.cli.parser import build_parser
from nczfs.cli.usage import UsageError
from nczfs.config import mountconfig
from nczfs.config.mountconfig import source_flags
from tests.helpers import run_nczfs

#: mount's arguments that set nothing an -o key sets (-v and -q: log_level's, their own test)
NOT_OPTIONS = {"help", "source", "mountpoint", "foreground", "systemd", "ready_fd", "options", "verbose", "quiet"}
#: each flag's (good value, another good value, bad value); None: a flag without a value
SAMPLES: dict[str, tuple[str, str, str] | None] = {
    "read_only": None, "debug": None, "no_sign_request": None,
    "log_level": ("debug", "error", "loud"), "log_format": ("json", "text", "JSON"),
    "metrics": ("127.0.0.1:9100", "9200", "here"), "metadata_ttl": ("2.5", "7", "-1"),
    "cache_size": ("1M", "2M", "lots"), "write_memory": ("1M", "2M", "1X"),
    "cache_dir": ("{tmp}/cd", "{tmp}/cd2", ""), "cache_dir_size": ("1G", "2G", "huge"),
    "log_file": ("{tmp}/a.log", "{tmp}/b.log", ""), "validate": ("warn", "off", "maybe"),
    "present": ("xarray", "netcdf-4.9", "cf"), "nc_files": ("both", "netcdf4", "hdf5"),
    "endpoint_url": ("http://e:1", "http://f:2", ""), "profile": ("a", "b", ""), "region": ("r", "s", ""),
    "allow_root": ("/x", "/y", ""),
}
#: what a flag's -o key needs beside it
CONTEXT = {"cache_dir_size": ["-o", "cache_dir={tmp}/cd"]}
#: every flag read by an -o key's rule: mount's own and the backends' source flags
MOUNT_FLAGS = mount_flags()
VALUED = sorted(dest for dest, sample in SAMPLES.items() if sample)


def _actions(command: str = "mount") -> list[argparse.Action]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]._actions


def _flag(dest: str) -> str:
    return max((s for a in _actions() if a.dest == dest for s in a.option_strings), key=len)


class Spot:
    """A reference SOURCE (not opened to build a config) and an empty mount point, in ``tmp``."""

    def __init__(self, tmp) -> None:
        self.tmp = str(tmp)
        (tmp / "mnt").mkdir()

    def config(self, dest: str, *argv: str):
        """The config of ``nczfs mount SOURCE MNT`` with ``argv`` and what ``dest``'s key needs."""
        extra = [arg.format(tmp=self.tmp) for arg in CONTEXT.get(dest, [])]
        args = build_parser().parse_args(["mount", f"{self.tmp}/refs.json", f"{self.tmp}/mnt", *extra, *argv])
        return build_config(args)

    def by_flag(self, dest: str, value: str | None) -> list[str]:
        return [_flag(dest)] if value is None else [f"{_flag(dest)}={value.format(tmp=self.tmp)}"]

    def by_option(self, dest: str, value: str | None) -> list[str]:
        key = MOUNT_FLAGS[dest]
        return ["-o", key if value is None else f"{key}={value.format(tmp=self.tmp)}"]


@pytest.fixture
def spot(tmp_path) -> Spot:
    return Spot(tmp_path)


def test_every_mount_flag_setting_what_an_option_sets_is_read_by_its_rule():
    """A new flag fails here until MOUNT_FLAGS names its -o key (and SAMPLES gives it values)."""
    keys = mountconfig.option_rules()
    for action in _actions():
        if action.dest in NOT_OPTIONS:
            assert action.dest not in keys, f"{action.option_strings}: the -o key {action.dest} says it: MOUNT_FLAGS"
            continue
        assert action.dest in MOUNT_FLAGS, f"{action.option_strings}: read it by its -o key's rule (MOUNT_FLAGS)"
        assert MOUNT_FLAGS[action.dest] in keys and action.dest in SAMPLES
    assert set(MOUNT_FLAGS) == set(SAMPLES) == {a.dest for a in _actions()} - NOT_OPTIONS
    for command in ("inspect", "validate"):  # their flags: source_values reads source_flags()
        assert {a.dest for a in _actions(command)} - {"help", "source", "options"} == set(source_flags())


@pytest.mark.parametrize("dest", sorted(MOUNT_FLAGS))
def test_a_flag_goes_through_its_options_rule_and_sets_what_it_sets(dest, spot, monkeypatch):
    rules, seen = mountconfig.option_rules(), []

    def spied(key, apply):
        def run(out: dict, k: str, value: str) -> None:
            seen.append(k)
            apply(out, k, value)
        return run

    monkeypatch.setattr(mountconfig, "option_rules",
                        lambda: {key: (applies, spied(key, apply)) for key, (applies, apply) in rules.items()})
    good = SAMPLES[dest] and SAMPLES[dest][0]  # type: ignore[index]
    by_flag = spot.config(dest, *spot.by_flag(dest, good))
    assert MOUNT_FLAGS[dest] in seen
    assert by_flag == spot.config(dest, *spot.by_option(dest, good)) != spot.config(dest)


@pytest.mark.parametrize("dest", VALUED)
def test_a_bad_value_gives_the_same_error_by_flag_or_by_option(dest, spot):
    bad = SAMPLES[dest][2]  # type: ignore[index]
    with pytest.raises(UsageError) as by_flag:
        spot.config(dest, *spot.by_flag(dest, bad))
    with pytest.raises(UsageError) as by_option:
        spot.config(dest, *spot.by_option(dest, bad))
    said = str(by_flag.value)
    assert said == str(by_option.value)
    # the key, then the reason
    assert re.search(rf"\b{MOUNT_FLAGS[dest]}\b[^:]*: \w", said), said


@pytest.mark.parametrize("dest", VALUED)
def test_a_flag_wins_over_its_option_in_either_order(dest, spot):
    good, other, _ = SAMPLES[dest]  # type: ignore[misc]
    flag, option = spot.by_flag(dest, good), spot.by_option(dest, other)
    first, second = spot.config(dest, *option, *flag), spot.config(dest, *flag, *option)
    assert first == second
    if dest == "allow_root":  # repeatable: the -o roots, then the flag's
        assert first.backend_options["allow_roots"] == ("/y", "/x")
    else:
        assert first == spot.config(dest, *flag) != spot.config(dest, *spot.by_option(dest, other))


def test_quiet_and_verbose_are_log_levels_below_debug_and_log_level(spot):
    def level(*argv: str) -> str:
        return spot.config("", *argv).log_level

    assert spot.config("", "-q") == spot.config("", "-o", "log_level=warning")
    assert spot.config("", "-v") == spot.config("", "-o", "log_level=debug")
    assert spot.config("", "-vv") == spot.config("", "-o", "log_level=trace")
    assert level("-v", "-q", "-o", "log_level=error") == "debug"
    assert level("-d", "-q") == level("-vv", "-q") == "trace"
    assert level("--log-level", "error", "-d", "-vv") == "error"


def test_the_command_line_says_one_line_naming_the_key_either_way(spot):
    lines = set()
    for argv in (["--metadata-ttl", "soon"], ["-o", "metadata_ttl=soon"]):
        res = run_nczfs("mount", f"{spot.tmp}/refs.json", f"{spot.tmp}/mnt", *argv)
        assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
        lines.add(res.stderr)
    assert lines == {"nczfs: -o metadata_ttl=soon: not a number\n"}
