"""GCS conditions a write on the generation of the version it replaces; the generation is looked
up by the version's ETag (nczfs.store.objstore.cloudwrites.CloudStore._generation), kept in a
table other calls fill too. Without a server: the table and the HEAD played by hand."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from nczfs.store.objstore.cloudwrites import CloudStore
from nczfs.store.values import ObjectInfo
from nczfs.toolbox.errors import Conflict


def _store(learned_by_others: list[tuple[str, str]]):
    """A CloudStore's state whose HEAD of "k" finds version "v1" at generation "1", while another
    call (a lookup's HEAD, another write's answer) records each of ``learned_by_others`` after it."""
    store = SimpleNamespace(_gen_lock=threading.Lock(), _generations={}, heads=0)
    later = list(learned_by_others)

    def found(key, if_version):
        store.heads += 1
        store._generations[key] = ("v1", "1")
        if later:
            store._generations[key] = later.pop(0)
        return ObjectInfo(key, 3, 0, "v1")

    store._found = found
    return store


def test_a_generation_another_call_recorded_over_the_heads_is_asked_again_not_written_without_one():
    """A concurrent call recording another version's generation between the HEAD and the look-up
    used to make the write unconditioned (an "overwrite" that replaces a version nobody read)."""
    store = _store([("v2", "2")])
    assert CloudStore._generation(store, "k", "v1") == "1"
    assert store.heads == 2


def test_a_version_others_keep_recording_is_a_conflict():
    store = _store([("v2", "2")] * 3)
    with pytest.raises(Conflict):
        CloudStore._generation(store, "k", "v1")
    assert store.heads == 3


def test_a_server_that_names_no_generations_leaves_the_write_unconditioned():
    store = SimpleNamespace(_gen_lock=threading.Lock(), _generations={},
                            _found=lambda key, v: ObjectInfo(key, 3, 0, v))
    assert CloudStore._generation(store, "k", "v1") is None
