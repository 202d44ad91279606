import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.helpers import DirectoryBackend, S3Backend, ZipBackend, mounted

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"

# Every nczfs a test starts (python -m nczfs, mount(8) through /usr/local/bin/nczfs, whichever
# checkout's virtualenv that links, nczfs.mounted) runs this checkout's code: scripts/install.sh
# installs a wheel, which is the code as it was at the last install.
_ROOT = str(Path(__file__).resolve().parents[1])
os.environ["PYTHONPATH"] = os.pathsep.join([_ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])


def pytest_collection_modifyitems(config, items):
    if os.path.exists("/dev/fuse") and shutil.which("fusermount3"):
        return
    skip = pytest.mark.skip(reason="needs /dev/fuse and fusermount3")
    for item in items:
        if "fuse" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _default_log_dir(tmp_path_factory):
    """Daemons started without --log-file log into the session's folder, not /var/log/nczfs."""
    os.environ["NCZFS_LOG_DIR"] = str(tmp_path_factory.mktemp("nczfs-logs"))
    yield
    os.environ.pop("NCZFS_LOG_DIR", None)


@pytest.fixture
def other_user():
    """A user made for the test with ``useradd`` (removed in teardown)."""
    name = f"nczfs-t{uuid.uuid4().hex[:8]}"
    res = subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True)


@pytest.fixture
def public_dir():
    """A world-searchable directory in /tmp (mount points other users reach), removed in teardown."""
    d = Path(tempfile.mkdtemp(prefix="nczfs-public-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(f"the shared corpus is missing at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """One SeaweedFS server for the whole session, with AWS CLI style credential files in the environment."""
    from tests.s3server import SeaweedS3

    server = SeaweedS3(tmp_path_factory.mktemp("seaweedfs"), tls=True)  # also https (a private CA)
    saved = {k: os.environ.get(k) for k in ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
                                             "AWS_EC2_METADATA_DISABLED", "AWS_PROFILE")}
    os.environ.update(server.write_aws_files(server.workdir / "aws"))
    os.environ.pop("AWS_PROFILE", None)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _serving(server):
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory):
    """One fake-gcs-server (behind its XML adapter, tests/gcsserver.py) for the whole session."""
    from tests.gcsserver import FakeGCS

    yield from _serving(FakeGCS(tmp_path_factory.mktemp("fake-gcs")))


@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    """One Azurite (Azure Blob emulator) for the whole session."""
    from tests.azurite import Azurite

    yield from _serving(Azurite(tmp_path_factory.mktemp("azurite")))


@pytest.fixture(scope="session")
def web_server(tmp_path_factory):
    """One nginx serving a directory (``web_server.root``) for the whole session."""
    from tests.webserver import Nginx

    yield from _serving(Nginx(tmp_path_factory.mktemp("nginx")))


@pytest.fixture
def s3_bucket(s3_server) -> str:
    """A bucket of the test's own (see SeaweedS3.shared_bucket before using many)."""
    return s3_server.new_bucket()


@pytest.fixture(params=["directory", "zip", "s3"])
def backend(request, tmp_path):
    """Every backend real-mount tests run against (S3 joins later)."""
    if request.param == "directory":
        root = tmp_path / "backing"
        root.mkdir()
        return DirectoryBackend(root)
    if request.param == "s3":
        server = request.getfixturevalue("s3_server")
        return S3Backend(server, server.shared_bucket, server.new_prefix())
    if request.param == "zip":
        return ZipBackend(tmp_path / "backing.zip")
    raise AssertionError(request.param)


@pytest.fixture(params=["directory", "s3"])
def dir_or_s3(request, tmp_path):
    """A directory and an S3 backend (the views' tests: views do not depend on zip's layout)."""
    if request.param == "directory":
        (tmp_path / "backing").mkdir()
        return DirectoryBackend(tmp_path / "backing")
    server = request.getfixturevalue("s3_server")
    return S3Backend(server, server.shared_bucket, server.new_prefix())


@pytest.fixture
def mount(backend, tmp_path):
    """A live read/write mount of ``backend``; unmounted in teardown; fails on ERROR lines in its log."""
    with mounted(backend, tmp_path / "mnt") as m:
        yield m
    text = m.log_text()
    assert "Traceback" not in text and " ERROR " not in text, f"daemon log has errors:\n{text}"
