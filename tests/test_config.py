import pytest

from nczfs.config.mountconfig import parse_options
from nczfs.toolbox.errors import SourceError


def test_every_known_option_maps_to_a_config_field():
    opts = parse_options(["ro,allow_other,debug", "uid=12,gid=34,umask=027",
                          "metadata_ttl=2.5,read_ahead_kb=512,log_file=/tmp/x.log"])
    assert opts == {"read_only": True, "allow_other": True, "log_level": "trace", "uid": 12, "gid": 34,
                    "umask": 0o027, "metadata_ttl": 2.5, "read_ahead_kb": 512, "log_file": "/tmp/x.log"}


def test_mount8_generic_options_are_ignored():
    assert parse_options(["rw,nofail,_netdev,noauto,x-systemd.automount,defaults,nosuid,nodev"]) == {}


@pytest.mark.parametrize("bad", ["frobnicate", "uid=abc", "metadata_ttl=-1", "umask=9", "uid"])
def test_bad_options_are_refused_naming_them(bad):
    with pytest.raises(SourceError, match=bad.split("=")[0]):
        parse_options([bad])


def test_fuse_options_follow_the_config(tmp_path):
    from nczfs.config.mountconfig import MountConfig
    from nczfs.daemon.mount import fuse_options
    from nczfs.config.source import parse_source

    src = parse_source(str(tmp_path))
    plain = fuse_options(MountConfig(source=src, mountpoint="/mnt"))
    assert "allow_other" not in plain and "ro" not in plain and f"fsname={tmp_path}" in plain
    both = fuse_options(MountConfig(source=src, mountpoint="/mnt", allow_other=True, read_only=True))
    assert {"allow_other", "ro", "default_permissions"} <= both


def test_write_memory_reaches_the_config(tmp_path):
    from nczfs.cli.mountargs import build_config
    from nczfs.cli.parser import build_parser

    (tmp_path / "src").mkdir()
    (tmp_path / "mnt").mkdir()

    def config(*argv: str):
        return build_config(build_parser().parse_args(["mount", str(tmp_path / "src"), str(tmp_path / "mnt"), *argv]))

    assert config().write_memory is None  # the default: an eighth of RAM, between 64 MiB and 1 GiB
    assert config("--write-memory", "256M").write_memory == 256 * 1024**2
    assert config("-o", "write_memory=1G").write_memory == 1024**3
    with pytest.raises(SourceError, match="write_memory=lots"):
        parse_options(["write_memory=lots"])


def test_object_store_options_users_of_the_peers_expect():
    from nczfs.config.mountconfig import parse_options

    got = parse_options(["retries=5,connect_timeout=2.5,read_timeout=30,requester_pays",
                         "sse=kms,sse_kms_key_id=alias/climate,storage_class=standard_ia,anon"])
    assert got == {"retries": 5, "connect_timeout": 2.5, "read_timeout": 30.0, "requester_pays": True,
                   "sse": "aws:kms", "sse_kms_key_id": "alias/climate", "storage_class": "STANDARD_IA",
                   "no_sign_request": True}
    assert parse_options(["sse_kms_key_id=k"]) == {"sse_kms_key_id": "k", "sse": "aws:kms"}
    assert parse_options(["sse=AES256"]) == {"sse": "AES256"}
    for bad, reason in (("retries=-1", "negative"), ("read_timeout=0", "more than 0"), ("sse=rot13", "AES256"),
                        ("storage_class=cheap", "storage class"), ("connect_timeout=soon", "not a number")):
        with pytest.raises(SourceError, match=reason):
            parse_options([bad])


def test_nc_files_chooses_classic_netcdf4_or_both():
    assert parse_options(["nc_files"]) == {"nc_files": True, "nc4_files": False}
    assert parse_options(["nc_files=classic"]) == {"nc_files": True, "nc4_files": False}
    assert parse_options(["nc_files=netcdf4"]) == {"nc_files": False, "nc4_files": True}
    assert parse_options(["nc_files=both"]) == {"nc_files": True, "nc4_files": True}
    with pytest.raises(SourceError, match="nc_files=hdf5: must be one of classic, netcdf4, both"):
        parse_options(["nc_files=hdf5"])


@pytest.mark.parametrize("item, message", [
    # MountConfig fields no row reads: not options, whatever their value
    ("backend_options=1", "-o backend_options=1: unknown mount option"),
    ("nc4_files=1", "-o nc4_files=1: unknown mount option"),
    ("foreground", "-o foreground: unknown mount option"),
    # a row's key with a value its rule refuses, or without the value it needs
    ("nonempty=1", "-o nonempty=1: takes no value"),
    ("uid", "-o uid: needs a value"),
])
def test_a_refused_option_is_told_by_its_row(item, message):
    with pytest.raises(SourceError) as err:
        parse_options([item])
    assert str(err.value) == message


def test_the_option_rules_are_gathered_once_a_parse(monkeypatch):
    from nczfs.config import mountconfig

    calls = []
    rules = mountconfig.option_rules
    monkeypatch.setattr(mountconfig, "option_rules", lambda: calls.append(1) or rules())
    assert parse_options(["uid=1,gid=2", "umask=027,ro"]) == {"uid": 1, "gid": 2, "umask": 0o27, "read_only": True}
    assert len(calls) == 1


def test_each_row_is_listed_once_in_the_order_first_declared():
    from nczfs.config.mountconfig import MOUNT_ROWS, option_rows
    from nczfs.store.registry import BACKENDS

    rows = option_rows()
    assert len({id(row) for row in rows}) == len(rows) == len({row.form for row in rows})
    expected = list(MOUNT_ROWS)
    for backend in BACKENDS.values():
        expected += [row for row in backend.rows if row not in expected]
    assert rows[:-1] == expected
