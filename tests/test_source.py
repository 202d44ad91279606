import pytest

from nczfs.errors import SourceError
from nczfs.source import parse_source


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
