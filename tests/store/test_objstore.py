"""The obstore backend's own decisions, on obstore's in-process MemoryStore."""

from __future__ import annotations

import pytest
from obstore.store import MemoryStore

from nczfs.toolbox.errors import BackendError, Stale
from nczfs.store.values import ByteRange
from nczfs.store.objstore.obprefix import ObjectStoreBackend


def test_a_416_inside_the_object_is_stale_once_its_version_changed():
    """A GET pinned to a version answered 416 (range not satisfiable) for a range inside the
    object: Stale when the object is no longer that version (SeaweedFS answers 416 to a GET sent
    while a new version is being written), an error otherwise; past the end: no bytes."""
    store = ObjectStoreBackend(MemoryStore(), "", url="memory://", service="S3")
    info = store.set("k", b"x" * 100)
    with pytest.raises(Stale):
        store._past_the_end("k", ByteRange(10, 20), '"another-version"')
    with pytest.raises(BackendError, match="answered 416"):
        store._past_the_end("k", ByteRange(10, 20), info.etag)
    with pytest.raises(BackendError, match="answered 416"):
        store._past_the_end("k", ByteRange(10, 20), None)
    assert store._past_the_end("k", ByteRange(100, 120), info.etag) == b""
