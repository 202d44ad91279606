import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import DirectoryBackend, ZipBackend, mounted

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


def pytest_collection_modifyitems(config, items):
    if os.path.exists("/dev/fuse") and shutil.which("fusermount3"):
        return
    skip = pytest.mark.skip(reason="needs /dev/fuse and fusermount3")
    for item in items:
        if "fuse" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(f"the shared corpus is missing at {CORPUS}")
    return CORPUS


@pytest.fixture(params=["directory", "zip"])
def backend(request, tmp_path):
    """Every backend real-mount tests run against (S3 joins later)."""
    if request.param == "directory":
        root = tmp_path / "backing"
        root.mkdir()
        return DirectoryBackend(root)
    if request.param == "zip":
        return ZipBackend(tmp_path / "backing.zip")
    raise AssertionError(request.param)


@pytest.fixture
def mount(backend, tmp_path):
    """A live read/write mount of ``backend``; unmounted in teardown; fails on ERROR lines in its log."""
    with mounted(backend, tmp_path / "mnt") as m:
        yield m
    text = m.log_text()
    assert "Traceback" not in text and " ERROR " not in text, f"daemon log has errors:\n{text}"
