"""The Azure Blob backend (obstore) against Azurite: the conformance suite, then Azure-only behaviour."""

from __future__ import annotations

from dataclasses import replace

import os
import signal
import uuid

import pytest

from nczfs.toolbox.errors import BackendError, OutcomeUnknown, Stale
from nczfs.store.values import ByteRange
from nczfs.store.objstore.cloudcreds import azure_credential
from nczfs.store.objstore.cloudsdk import AzureSdk
from nczfs.store.objstore.cloudwrites import CloudStore
from nczfs.store.objstore.obprefix import ObjectStoreBackend
from nczfs.store.objstore.transport import obstore_client_options, retry_config
from tests.azurite import ACCOUNT, KEY
from tests.store.conformance import StoreConformance
from tests.store.offers import OFFERS


def azure_backend(server, container: str, prefix: str, **kw) -> CloudStore:
    from obstore.store import AzureStore

    store = AzureStore(container, account_name=ACCOUNT, account_key=KEY, endpoint=server.endpoint,
                       client_options=obstore_client_options(server.endpoint), retry_config=retry_config())
    sdk = AzureSdk(container, server.endpoint, account=ACCOUNT, credential=azure_credential(ACCOUNT, KEY, None))
    return CloudStore(store, prefix, url=f"az://{container}/{prefix}", service="Azure", sdk=sdk, **kw)


class TestAzureStore(StoreConformance):
    optional = OFFERS[CloudStore]
    lists_trees = True
    checks_writes = True
    checks_deletes = True  # azure-storage-blob's If-Match (Azurite honours it)

    @pytest.fixture
    def sync_store(self, azurite) -> ObjectStoreBackend:
        self.server = azurite
        if not hasattr(type(self), "container"):
            type(self).container = azurite.new_container("conf")
        self.prefix = f"p-{uuid.uuid4().hex[:8]}/ds"
        # blocks above 5 MiB, so that the 5 MiB conformance object goes up in two blocks
        store = azure_backend(azurite, self.container, self.prefix, multipart_threshold=5 * 1024 * 1024,
                             part_size=5 * 1024 * 1024)
        checked = store.probe_conditions()  # sets checks_deletes itself: the record is read after it
        store.capabilities = replace(store.capabilities, checks_writes=checked)  # as a mount finds out (deletes too)
        return store

    def read_only_store(self) -> ObjectStoreBackend:
        return azure_backend(self.server, self.container, self.prefix, read_only=True)

    def put_raw(self, key: str, data: bytes) -> None:
        self.server.put(self.container, f"{self.prefix}/{key}", data)

    def get_raw(self, key: str) -> bytes | None:
        return self.server.get(self.container, f"{self.prefix}/{key}")


def test_a_read_pinned_to_an_older_version_is_stale(azurite):
    store = azure_backend(azurite, azurite.new_container("pin"), "p")
    old = store.set("k", b"old contents")
    store.set("k", b"new contents!")
    with pytest.raises(Stale):
        store.get_version("k", ByteRange(0, 4), old.etag)
    assert store.get_version("k", ByteRange(0, 3), store.stat("k").etag) == b"new"


def test_a_put_to_a_frozen_server_is_outcome_unknown_not_failed(azurite):
    """A PUT sent to a server that takes it and never answers (stopped) may still be carried out
    once it runs again: the write's outcome is unknown, never "not stored"."""
    from obstore.store import AzureStore

    container = azurite.new_container("frozen")
    store = AzureStore(container, account_name=ACCOUNT, account_key=KEY, endpoint=azurite.endpoint,
                       client_options=obstore_client_options(azurite.endpoint, read_timeout=1, request_timeout=3),
                       retry_config=retry_config(retries=0, retry_timeout=3))
    backend = ObjectStoreBackend(store, "p", url=f"az://{container}/p", service="Azure")
    backend.set("k", b"old")
    os.kill(azurite.proc.pid, signal.SIGSTOP)
    try:
        with pytest.raises(OutcomeUnknown, match="Azure PUT got no answer"):
            backend.set("k", b"new")
    finally:
        os.kill(azurite.proc.pid, signal.SIGCONT)


def test_a_put_that_never_reached_a_server_is_not_stored_not_unknown():
    from obstore.store import AzureStore
    from tests.ports import free_ports

    endpoint = f"http://127.0.0.1:{free_ports(1)[0]}/{ACCOUNT}"  # nothing listens there
    store = AzureStore("c", account_name=ACCOUNT, account_key=KEY, endpoint=endpoint,
                       client_options=obstore_client_options(endpoint), retry_config=retry_config(retries=0))
    backend = ObjectStoreBackend(store, "p", url="az://c/p", service="Azure")
    with pytest.raises(BackendError) as raised:
        backend.set("k", b"new")
    assert not isinstance(raised.value, OutcomeUnknown)
