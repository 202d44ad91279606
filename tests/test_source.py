import pytest

from nczfs.toolbox.errors import SourceError
from nczfs.config.source import parse_source


def test_plain_path_is_a_directory_source(tmp_path):
    s = parse_source(str(tmp_path))
    assert (s.backend, s.location, s.modes) == ("directory", str(tmp_path), frozenset())


def test_relative_path_is_made_absolute(tmp_path):
    assert parse_source("data/x.file", cwd=str(tmp_path)).location == str(tmp_path / "data" / "x.file")


def test_file_url_with_mode_fragment():
    s = parse_source("file:///data/x.file#mode=nczarr,file")
    assert (s.backend, s.location, s.modes) == ("directory", "/data/x.file", frozenset({"nczarr", "file"}))


def test_fragment_keys_case_insensitive_first_wins():
    s = parse_source("file:///d#MODE=zarr,file&mode=nczarr&log")
    assert s.modes == frozenset({"zarr", "file"})
    assert "log" in s.params


def test_old_bracket_prefix_form():
    s = parse_source("[mode=nczarr,file]file:///data/x.file")
    assert s.modes == frozenset({"nczarr", "file"})
    assert s.location == "/data/x.file"


def test_percent_encoding_and_localhost():
    assert parse_source("file://localhost/data/a%20b").location == "/data/a b"


def test_unknown_mode_word_is_an_error_naming_it():
    with pytest.raises(SourceError, match="bogus"):
        parse_source("file:///data/x#mode=nczarr,bogus")


def test_two_storage_maps_conflict():
    with pytest.raises(SourceError, match="more than one storage map"):
        parse_source("file:///data/x#mode=file,zip")


def test_zip_detected_by_suffix_or_mode():
    assert parse_source("/data/x.zarr.zip").backend == "zip"
    assert parse_source("file:///data/x#mode=nczarr,zip").backend == "zip"


def test_s3_urls():
    s = parse_source("s3://bucket/some/prefix#mode=zarr,s3")
    assert (s.backend, s.location) == ("s3", "bucket/some/prefix")
    assert parse_source("https://s3.us-east-1.amazonaws.com/bucket/p").backend == "s3"


def test_s3_mode_on_a_local_path_is_refused():
    with pytest.raises(SourceError, match="s3"):
        parse_source("file:///data/x#mode=nczarr,s3")


def test_unsupported_scheme():
    with pytest.raises(SourceError, match="unsupported URL scheme"):
        parse_source("ftp://host/x")


def test_path_with_fragment_when_path_does_not_exist(tmp_path):
    s = parse_source(f"{tmp_path}/x.file#mode=nczarr,file")
    assert s.location == f"{tmp_path}/x.file" and "nczarr" in s.modes


def test_memory_source():
    assert parse_source("memory://scratch").backend == "memory"


def test_empty_source():
    with pytest.raises(SourceError):
        parse_source("  ")


def test_a_control_character_in_source_is_refused_naming_it_escaped():
    with pytest.raises(SourceError, match=r"^SOURCE 's3://bkt/p\\n#mode=s3' holds a control character \(\\n\)"):
        parse_source("s3://bkt/p\n#mode=s3")
    with pytest.raises(SourceError, match=r"\\x00"):
        parse_source("/data/x\x00y")
    assert parse_source("s3://bkt/p\u00e9t\u00e9").backend == "s3"  # non-ASCII letters are no control characters


def test_the_daemon_reports_a_message_with_a_line_break_as_one_line():
    """The ready pipe is line based: a message holding a newline would read as a warning and
    no answer ('the daemon exited before the mount was ready')."""
    import os

    from nczfs.cli.daemon import _reporter

    r, w = os.pipe()
    ready, warn = _reporter(w)
    warn("a\nb")
    ready("c\r\nd")
    with os.fdopen(r, "rb") as f:
        assert f.read() == b"warning a\\nb\nerror c\\r\\nd\n"


@pytest.mark.parametrize("text, shown", [
    ("rel/run.zarr", "/w/rel/run.zarr"),
    ("file://rel/run.zarr#mode=nczarr,file", "file:///w/rel/run.zarr#mode=nczarr,file"),
    ("icechunk://rel/repo", "icechunk:///w/rel/repo"),
    ("https://example.org/data/x.zarr#mode=zarr", "https://example.org/data/x.zarr#mode=zarr"),
    ("icechunk+s3://bucket/repo", "icechunk+s3://bucket/repo"),
    ("abfs://cont@acct.dfs.core.windows.net/p", "abfs://cont@acct.dfs.core.windows.net/p"),
    ("s3://bucket/p", "s3://bucket/p"),
    ("memory://name", "memory://name"),
])
def test_the_mount_table_shows_a_local_path_absolute_and_a_url_as_given(text, shown):
    """Whether a location is a local path is what its backend's parser says (Located.local)."""
    from nczfs.config.source import absolute_text

    assert absolute_text(parse_source(text, cwd="/w")) == shown
