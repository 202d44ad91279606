"""Conditional writes of the GCS and Azure stores (nczfs/store/objstore/cloudwrites.py) against
fake-gcs-server (behind tests/gcsserver.py's adapter) and Azurite: the probe at mount time, and a
write that got no answer told from a refused one (tests/faultproxy.py in front of the emulator)."""

from __future__ import annotations

from dataclasses import replace

import io
import logging
import time
import uuid

import pytest

from nczfs.toolbox.errors import Conflict, NczfsError, OutcomeUnknown
from nczfs.store.objstore.cloud import CloudOptions, open_azure, open_gcs
from nczfs.store.objstore.cloudsdk import GcsSdk
from nczfs.store.objstore.cloudwrites import CloudStore
from nczfs.store.objstore.transport import obstore_client_options, retry_config
from nczfs.store.values import ABSENT
from tests.azurite import ACCOUNT, KEY
from tests.gcsserver import service_account_file


@pytest.fixture(params=["gcs", "azure"])
def cloud(request, tmp_path, monkeypatch):
    """(server, bucket or container, the store's opener given an endpoint and options)."""
    if request.param == "gcs":
        server = request.getfixturevalue("gcs_server")
        bucket = server.new_bucket("cw")
        key = service_account_file(tmp_path / "sa.json")
        return server, bucket, lambda endpoint, **kw: open_gcs(CloudOptions(
            f"gs://{bucket}/p", endpoint_url=endpoint, google_application_credentials=str(key), **kw))
    server = request.getfixturevalue("azurite")
    container = server.new_container("cw")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", KEY)
    return server, container, lambda endpoint, **kw: open_azure(CloudOptions(
        f"az://{container}/p", endpoint_url=endpoint, azure_storage_account=ACCOUNT, **kw))


def test_a_mount_finds_out_once_whether_the_server_takes_conditions(cloud, monkeypatch, caplog):
    """The opener probes whether a PUT where no object may be, over an object, is refused: both
    emulators refuse it (writes are then conditional); a server that ignores conditions (here:
    obstore's PUTs sent without them) makes the mount fall back to last-writer-wins, said once;
    ``-o overwrite=last_writer_wins`` and read-only mounts send no probe."""
    import obstore

    server, bucket, open_store = cloud
    store = open_store(server.endpoint)
    assert store.capabilities.checks_writes and store.counters().get("PUT") == 2
    assert store.list_prefix("") == []  # the probe object is gone
    for quiet in (open_store(server.endpoint, overwrite="last_writer_wins"), open_store(server.endpoint, read_only=True)):
        assert not quiet.capabilities.checks_writes and "PUT" not in quiet.counters()
    real_put = obstore.put
    monkeypatch.setattr(obstore, "put", lambda *args, mode=None, **kw: real_put(*args, **kw))
    with caplog.at_level(logging.WARNING, logger="nczfs"):
        ignoring = open_store(server.endpoint)
    assert not ignoring.capabilities.checks_writes and ignoring.list_prefix("") == []
    warned = [r.getMessage() for r in caplog.records if "ignores conditional writes" in r.getMessage()]
    assert len(warned) == 1 and "the last writer wins" in warned[0], warned


def _proxied(server, bucket: str, proxy, prefix: str) -> CloudStore:
    """The store through ``proxy``: one attempt a request, 1 s without an answer is none."""
    return _store(server, bucket, proxy.endpoint, prefix, read_timeout=1, request_timeout=3, retries=0)


def _store(server, bucket: str, endpoint: str, prefix: str, read_timeout: float = 15, request_timeout: float = 300,
           retries: int = 2, **kw) -> CloudStore:
    """The store of the emulator (at ``endpoint``: its own, or a proxy's), writes checked (probed)."""
    from obstore.store import AzureStore, GCSStore

    bounds = {"client_options": obstore_client_options(endpoint, read_timeout=read_timeout, request_timeout=request_timeout),
              "retry_config": retry_config(retries=retries, retry_timeout=request_timeout)}
    if hasattr(server, "honour_conditions"):  # fake-gcs-server
        key = service_account_file(server.workdir / f"sa-{uuid.uuid4().hex[:6]}.json")
        store = GCSStore(bucket, base_url=endpoint, service_account_path=str(key), **bounds)
        backend = CloudStore(store, prefix, url=f"gs://{bucket}/{prefix}", service="GCS", **kw)
    else:
        store = AzureStore(bucket, account_name=ACCOUNT, account_key=KEY, endpoint=f"{endpoint}/{ACCOUNT}", **bounds)
        backend = CloudStore(store, prefix, url=f"az://{bucket}/{prefix}", service="Azure", **kw)
    checked = backend.probe_conditions()  # sets checks_deletes itself: the record is read after it
    backend.capabilities = replace(backend.capabilities, checks_writes=checked)
    assert backend.capabilities.checks_writes
    return backend


def _raw(server, bucket: str, key: str) -> bytes | None:
    return server.get(bucket, key)


def test_a_write_that_got_no_answer_is_told_from_a_refused_one(cloud):
    """A conditional PUT whose answer is lost but which was carried out is found stored (the
    object holds what was sent); one that got no answer at all, nor did the look for it, is of
    unknown outcome (EIO), not refused: the server takes it once it runs again. A PUT on a
    version another write replaced is refused (Conflict: ESTALE) and changes nothing."""
    from tests.faultproxy import FaultProxy

    server, bucket, _ = cloud
    target = server.adapter.server_address[1] if hasattr(server, "adapter") else server.port
    with FaultProxy(target) as proxy:
        store = _proxied(server, bucket, proxy, "nr")
        v0 = store.set("k", b"v0", if_version=ABSENT)
        proxy.drop_answers = lambda line: line.startswith("PUT ")
        v1 = store.set("k", b"v1!", if_version=v0.etag)  # carried out, its answer lost: found
        assert proxy.dropped and _raw(server, bucket, "nr/k") == b"v1!" and v1.etag != v0.etag
        proxy.drop_answers = None
        proxy.freeze()
        try:
            with pytest.raises(OutcomeUnknown, match="got no answer"):
                store.set("k", b"v2!!", if_version=v1.etag)
        finally:
            proxy.thaw()
        deadline = time.monotonic() + 10
        while _raw(server, bucket, "nr/k") != b"v2!!" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _raw(server, bucket, "nr/k") == b"v2!!"  # it was carried out after all, later
        with pytest.raises(Conflict) as refused:
            store.set("k", b"stale", if_version=v1.etag)
        assert refused.value.found == store.stat("k").etag != v1.etag
        assert _raw(server, bucket, "nr/k") == b"v2!!"


def _gcs_fresh(gcs_server, bucket: str, key) -> CloudStore:
    """A new GCS store of ``bucket``'s prefix ``p`` (nothing remembered), writes and deletes checked."""
    from obstore.store import GCSStore

    store = GCSStore(bucket, base_url=gcs_server.endpoint, service_account_path=str(key),
                     client_options=obstore_client_options(gcs_server.endpoint), retry_config=retry_config())
    backend = CloudStore(store, "p", url=f"gs://{bucket}/p", service="GCS",
                         sdk=GcsSdk(bucket, gcs_server.endpoint, credentials_file=str(key)))
    backend.capabilities = replace(backend.capabilities, checks_writes=True, checks_deletes=True)
    return backend


def test_gcs_learns_a_listed_versions_generation_with_one_head(gcs_server, tmp_path):
    """A version known from a listing only (GCS listings give ETags, not generations): the write
    on it costs one HEAD first; another version found there refuses it before any PUT."""
    bucket = gcs_server.new_bucket("gen")
    key = service_account_file(tmp_path / "sa.json")
    gcs_server.put(bucket, "p/k", b"v0")
    listed = _gcs_fresh(gcs_server, bucket, key)
    (entry,) = listed.list_dir("")
    before = listed.counters()
    stored = listed.set("k", b"v1", if_version=entry.info.etag)
    spent = {k: v - before.get(k, 0) for k, v in listed.counters().items() if v != before.get(k, 0)}
    assert spent == {"HEAD": 1, "PUT": 1} and gcs_server.get(bucket, "p/k") == b"v1"
    listed.set("k", b"v2", if_version=stored.etag)  # its own PUT's generation: no HEAD
    assert listed.counters()["HEAD"] == before.get("HEAD", 0) + 1
    stale = _gcs_fresh(gcs_server, bucket, key)
    (entry,) = stale.list_dir("")
    gcs_server.put(bucket, "p/k", b"other")
    with pytest.raises(Conflict):
        stale.set("k", b"stale", if_version=entry.info.etag)
    assert "PUT" not in stale.counters() and gcs_server.get(bucket, "p/k") == b"other"


def test_gcs_deletes_a_version_on_its_generation_learned_as_a_writes_is(gcs_server, tmp_path):
    """A delete conditioned on a version known from a listing only costs one HEAD first (its
    generation); on a version this mount wrote, none; the same bytes written again by another
    client (same ETag, new generation) are removed, sent once more on the new generation; a
    version replaced meanwhile is refused (Conflict), one gone already is no error."""
    bucket = gcs_server.new_bucket("del")
    key = service_account_file(tmp_path / "sa.json")
    gcs_server.put(bucket, "p/a", b"a")
    listed = _gcs_fresh(gcs_server, bucket, key)
    (entry,) = listed.list_dir("")
    listed.delete("a", if_version=entry.info.etag)
    assert listed.counters() == {"LIST": 1, "HEAD": 1, "DELETE": 1} and gcs_server.get(bucket, "p/a") is None
    own = listed.set("b", b"b", if_version=ABSENT)  # as a mount's write
    listed.delete("b", if_version=own.etag)
    assert listed.counters()["HEAD"] == 1 and gcs_server.get(bucket, "p/b") is None
    again = listed.set("c", b"same", if_version=ABSENT)
    gcs_server.put(bucket, "p/c", b"same")  # another generation of the same bytes
    listed.delete("c", if_version=again.etag)
    assert gcs_server.get(bucket, "p/c") is None and listed.counters()["DELETE"] == 4
    mine = listed.set("d", b"mine", if_version=ABSENT)
    gcs_server.put(bucket, "p/d", b"other")
    with pytest.raises(Conflict) as refused:
        listed.delete("d", if_version=mine.etag)
    assert refused.value.found == listed.stat("d").etag and gcs_server.get(bucket, "p/d") == b"other"
    listed.delete("a", if_version=entry.info.etag)  # gone already


class _ChangedWhileRead(io.BytesIO):
    """The data of a write; once more than its first MiB is read, ``change()`` runs (once)."""

    def __init__(self, data: bytes, change):
        super().__init__(data)
        self.change = change

    def _after(self, got):
        if self.change is not None and self.tell() > 1024 * 1024:
            change, self.change = self.change, None
            change()
        return got

    def read(self, n=-1):
        return self._after(super().read(n))

    def readinto(self, buffer):
        return self._after(super().readinto(buffer))


def test_a_write_too_big_for_one_conditional_put_is_conditional_at_the_server(cloud, monkeypatch):
    """Above CONDITIONAL_MAX (here 1 MiB) a write goes up in parts of 1 MiB through the cloud's
    SDK (GCS: a resumable upload with ifGenerationMatch; Azure: blocks, then Put Block List with
    If-Match or If-None-Match: *): another client's write during the upload refuses it when it is
    finished (Conflict naming that version) and stays; unchanged, it is stored, and the version
    returned is the one the store then reads (a later write on it is not refused)."""
    import nczfs.store.objstore.cloudwrites as cloudwrites

    monkeypatch.setattr(cloudwrites, "CONDITIONAL_MAX", 1024 * 1024)
    server, bucket, open_store = cloud
    store = open_store(server.endpoint)
    assert store.capabilities.checks_writes and store.capabilities.checks_deletes
    store.sizes.part_size = store.sizes.multipart_threshold = 1024 * 1024
    big = bytes(range(256)) * (12 * 1024)  # 3 MiB: three parts
    v0 = store.set("k", b"v0", if_version=ABSENT)
    f = _ChangedWhileRead(big, lambda: server.put(bucket, "p/k", b"meanwhile"))
    with pytest.raises(Conflict) as refused:
        store.set_file("k", f, len(big), if_version=v0.etag)
    assert f.change is None and server.get(bucket, "p/k") == b"meanwhile"
    assert refused.value.found == store.stat("k").etag != v0.etag
    stored = store.set_file("k", io.BytesIO(big), len(big), if_version=refused.value.found)
    assert server.get(bucket, "p/k") == big and stored.etag == store.stat("k").etag
    again = store.set("k", big[::-1], if_version=stored.etag)  # bytes, not a file: the same path
    assert server.get(bucket, "p/k") == big[::-1] and again.etag == store.stat("k").etag
    store.set_file("new", io.BytesIO(big), len(big), if_version=ABSENT)
    with pytest.raises(Conflict):
        store.set_file("new", io.BytesIO(big[::-1]), len(big), if_version=ABSENT)
    assert server.get(bucket, "p/new") == big and store.counters()["MultipartUpload"] == 5


def test_a_write_too_big_for_one_conditional_put_is_checked_before_its_upload(cloud, monkeypatch):
    """Without the cloud's SDK (a store made without it, or whose probe found its conditions not
    honoured), above CONDITIONAL_MAX (here 1 MiB) a write goes up in parts through obstore, and a
    rename over a stored name above it is a server-side copy (with the SDK too), after a HEAD that
    refuses it if the object is no longer the version it names."""
    import nczfs.store.objstore.cloudwrites as cloudwrites

    monkeypatch.setattr(cloudwrites, "CONDITIONAL_MAX", 1024 * 1024)
    server, bucket, _ = cloud
    endpoint = server.endpoint if hasattr(server, "honour_conditions") else f"http://127.0.0.1:{server.port}"
    store = _store(server, bucket, endpoint, "big", multipart_threshold=5 * 1024 * 1024, part_size=5 * 1024 * 1024)
    big = b"x" * (6 * 1024 * 1024)
    v0 = store.set("k", b"v0")
    server.put(bucket, "big/k", b"other")
    with pytest.raises(Conflict):
        store.set("k", big, if_version=v0.etag)
    assert "MultipartUpload" not in store.counters() and server.get(bucket, "big/k") == b"other"
    stored = store.set("k", big, if_version=store.stat("k").etag)
    assert store.counters()["MultipartUpload"] == 1 and server.get(bucket, "big/k") == big
    store.set("src", big)
    server.put(bucket, "big/k", b"changed again")
    with pytest.raises(Conflict):
        store.rename("src", "k", if_version=stored.etag)
    assert server.get(bucket, "big/k") == b"changed again" and server.get(bucket, "big/src") == big
    store.rename("src", "k", if_version=store.stat("k").etag)
    assert server.get(bucket, "big/k") == big and server.get(bucket, "big/src") is None
    assert store.counters()["COPY"] == 1


def test_a_rename_over_an_object_too_big_for_one_conditional_put_is_conditional_at_the_server(cloud, monkeypatch):
    """Above CONDITIONAL_MAX (here 1 MiB) a rename over a stored name is a server-side copy
    through the cloud's SDK carrying the condition (GCS: a rewrite with ifGenerationMatch, which
    the adapter checks in front of fake-gcs-server; Azure: Copy Blob with If-Match): another
    client's write to the destination right before the copy refuses it (Conflict naming that
    version), that write and the source stay; unchanged, the copy is made with no HEAD before it."""
    import obstore

    import nczfs.store.objstore.cloudwrites as cloudwrites

    monkeypatch.setattr(cloudwrites, "CONDITIONAL_MAX", 1024 * 1024)
    server, bucket, open_store = cloud
    store = open_store(server.endpoint)
    big = bytes(range(256)) * (12 * 1024)  # 3 MiB
    store.set("src", big)
    v0 = store.set("k", b"v0", if_version=ABSENT)
    meddled = []

    def meddling(copy):  # another client's write between the rename's start and its copy
        def meddle(*args, **kw):
            if not meddled:
                meddled.append(server.put(bucket, "p/k", b"meanwhile"))
            return copy(*args, **kw)
        return meddle

    monkeypatch.setattr(obstore, "copy", meddling(obstore.copy))
    monkeypatch.setattr(store.sdk, "copy", meddling(store.sdk.copy), raising=False)
    with pytest.raises(Conflict) as refused:
        store.rename("src", "k", if_version=v0.etag)
    assert meddled and server.get(bucket, "p/k") == b"meanwhile" and server.get(bucket, "p/src") == big
    assert refused.value.found == store.stat("k").etag != v0.etag
    before = dict(store.counters())
    store.rename("src", "k", if_version=refused.value.found)
    assert server.get(bucket, "p/k") == big and server.get(bucket, "p/src") is None
    spent = {name: n - before.get(name, 0) for name, n in store.counters().items() if n != before.get(name, 0)}
    assert spent == {"HEAD": 2, "COPY": 1, "DELETE": 1}, spent  # the source's size, the version made


def _deletes_checked(store: CloudStore, put) -> None:
    """The store's deletes are conditional: one on a version another client (``put``) replaced is
    refused, one on the current version removes it."""
    assert store.capabilities.checks_writes and store.capabilities.checks_deletes
    v0 = store.set("k", b"v0", if_version=ABSENT)
    put(b"another client's")
    with pytest.raises(Conflict):
        store.delete("k", if_version=v0.etag)
    store.delete("k", if_version=store.stat("k").etag)
    assert store.list_prefix("") == []


@pytest.mark.parametrize("how", ["option", "GOOGLE_SERVICE_ACCOUNT_PATH", "GOOGLE_SERVICE_ACCOUNT_KEY",
                                 "GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST"])
def test_gcs_deletes_take_the_credentials_and_endpoint_the_mount_takes(gcs_server, tmp_path, monkeypatch, how):
    """The SDK's client is made from what obstore's is: each way a user names the credentials
    (an option, obstore's variables, Google's) or the endpoint (an option, Google's variable)."""
    bucket = gcs_server.new_bucket("cred")
    key = service_account_file(tmp_path / "sa.json")
    options = {"endpoint_url": gcs_server.endpoint}
    if how == "option":
        options["google_application_credentials"] = str(key)
    elif how == "STORAGE_EMULATOR_HOST":
        monkeypatch.setenv(how, gcs_server.endpoint.removeprefix("http://"))
        options = {"google_application_credentials": str(key)}
    else:
        monkeypatch.setenv(how, key.read_text() if how.endswith("_KEY") else str(key))
    store = open_gcs(CloudOptions(f"gs://{bucket}/p", **options))
    _deletes_checked(store, lambda data: gcs_server.put(bucket, "p/k", data))


@pytest.mark.parametrize("how", ["AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_CONNECTION_STRING", "connection string SAS",
                                 "AZURE_STORAGE_SAS_TOKEN"])
def test_azure_deletes_take_the_credentials_and_endpoint_the_mount_takes(azurite, monkeypatch, how):
    """As on GCS: an account key in the environment (the account and endpoint as options), a
    connection string (account, key or SAS, endpoint), a SAS token in the environment."""
    from datetime import datetime, timedelta, timezone

    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    container = azurite.new_container("cred")
    sas = generate_container_sas(ACCOUNT, container, account_key=KEY, expiry=datetime.now(timezone.utc) + timedelta(hours=1),
                                 permission=ContainerSasPermissions(read=True, write=True, delete=True, list=True,
                                                                    add=True, create=True))
    options = {"endpoint_url": azurite.endpoint, "azure_storage_account": ACCOUNT}
    if how == "AZURE_STORAGE_CONNECTION_STRING":
        monkeypatch.setenv(how, azurite.connection_string)
        options = {}
    elif how == "connection string SAS":
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", f"BlobEndpoint={azurite.endpoint};SharedAccessSignature={sas}")
        options = {"azure_storage_account": ACCOUNT}
    else:
        monkeypatch.setenv(how, KEY if how.endswith("_KEY") else sas)
    store = open_azure(CloudOptions(f"az://{container}/p", **options))
    _deletes_checked(store, lambda data: azurite.put(container, "p/k", data))


def test_a_store_whose_sdk_client_cannot_be_made_says_so_and_deletes_unconditionally(azurite, monkeypatch, caplog):
    """Azure credentials of a kind only azure-identity takes, where it is not installed (here:
    the credential's maker failing so): the probe says once that conditional deletes could not be
    tried, writes stay checked, and an unlink removes whatever version is there."""
    import nczfs.store.objstore.cloud as cloud

    def no_identity(*args):
        def made():
            raise NczfsError("no account key or SAS given, and azure-identity is not installed")
        return made

    container = azurite.new_container("noid")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", KEY)
    monkeypatch.setattr(cloud, "azure_credential", no_identity)
    with caplog.at_level(logging.WARNING, logger="nczfs"):
        store = open_azure(CloudOptions(f"az://{container}/p", endpoint_url=azurite.endpoint, azure_storage_account=ACCOUNT))
    warned = [r.getMessage() for r in caplog.records if "conditional deletes could not be tried" in r.getMessage()]
    assert len(warned) == 1 and "azure-identity" in warned[0], warned
    assert store.capabilities.checks_writes and not store.capabilities.checks_deletes
    v0 = store.set("k", b"v0", if_version=ABSENT)
    azurite.put(container, "p/k", b"another client's")
    store.delete("k", if_version=v0.etag)
    assert azurite.get(container, "p/k") is None
