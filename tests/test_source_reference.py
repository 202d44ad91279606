"""SOURCE spellings of a reference set, and the --allow-root / -o allow_root= options."""

import os

import pytest

from nczfs.cli.mountargs import build_config
from nczfs.cli.parser import build_parser
from nczfs.config.mountconfig import parse_options
from nczfs.toolbox.errors import SourceError
from nczfs.config.source import parse_source


@pytest.mark.parametrize(
    "text",
    [
        "/data/refs.json",
        "/data/REFS.JSON",
        "reference:///data/refs.json",
        "file:///data/refs.json",
        "file:///data/refs.json#mode=zarr",
        "file:///data/refs.txt#mode=zarr,refs",
        "reference:///data/refs.txt#mode=nczarr",
        "/data/refs.parq",
        "/data/refs.parquet",
    ],
)
def test_reference_source_spellings(text):
    s = parse_source(text)
    assert s.backend == "reference"
    assert s.location.lower() in ("/data/refs.json", "/data/refs.txt", "/data/refs.parq", "/data/refs.parquet")


def test_relative_reference_paths(tmp_path):
    assert parse_source("r/x.json", cwd=str(tmp_path)).location == str(tmp_path / "r" / "x.json")
    assert parse_source("reference://r/x.json", cwd=str(tmp_path)).location == str(tmp_path / "r" / "x.json")


def test_reference_url_with_another_map_is_refused():
    with pytest.raises(SourceError, match="reference set"):
        parse_source("reference:///data/x.json#mode=zip")


def test_allow_root_options_accumulate(tmp_path):
    assert parse_options(["allow_root=/a,allow_root=b"])["allow_roots"] == ("/a", os.path.abspath("b"))
    (tmp_path / "mnt").mkdir()
    args = build_parser().parse_args(
        ["mount", "/data/x.json", str(tmp_path / "mnt"), "-o", "allow_root=/o", "--allow-root", "/c1", "--allow-root", "/c2"]
    )
    assert build_config(args).backend_options["allow_roots"] == ("/o", "/c1", "/c2")
