"""The inflate of stored zlib chunks (nczfs.nczarr.chunks.inflater, through Recode): libdeflate
where the chunk's size is known and its filters keep the size, numcodecs' zlib otherwise; the same
values either way, and the same errors for chunks that do not inflate."""

from __future__ import annotations

import zlib

import numcodecs
import numpy as np
import pytest

from nczfs.nczarr.chunks import inflater
from nczfs.nczarr.chunks.recode import Codecs, Recode, UndecodableChunk

VALUES = (np.arange(64 * 32, dtype="<f4").reshape(64, 32) % 97) / 7


def _recode(codecs: Codecs, dtype: str = "<f4") -> Recode:
    return Recode(dtype, (64, 32), "C", codecs, dtype, (64, 32))


@pytest.fixture
def calls(monkeypatch):
    """The sizes inflater.inflate was asked for, and what it answered (None: it could not)."""
    seen: list[tuple[int, bool]] = []
    real = inflater.inflate

    def spy(data, size):
        out = real(data, size)
        seen.append((size, out is not None))
        return out

    monkeypatch.setattr(inflater, "inflate", spy)
    return seen


@pytest.mark.parametrize("filters", [(), ({"id": "shuffle", "elementsize": 4},)])
def test_zlib_chunks_are_inflated_by_libdeflate_to_the_values(calls, filters):
    codecs = Codecs({"id": "zlib", "level": 6}, filters)
    stored = codecs.encode(VALUES.tobytes()) if not filters else numcodecs.Zlib(6).encode(
        numcodecs.Shuffle(4).encode(VALUES.tobytes()))
    got = _recode(codecs).shown_array(stored, "k")
    assert np.array_equal(got, VALUES) and calls == [(VALUES.nbytes, True)]


def test_a_filter_that_changes_the_size_inflates_with_numcodecs(calls):
    codecs = Codecs({"id": "zlib", "level": 1}, ({"id": "delta", "dtype": "<f4", "astype": "<f8"},))
    stored = numcodecs.Zlib(1).encode(numcodecs.Delta("<f4", "<f8").encode(VALUES))
    assert np.allclose(_recode(codecs).shown_array(stored, "k"), VALUES) and calls == []


@pytest.mark.parametrize("bad", ["truncated", "check", "longer"])
def test_chunks_that_do_not_inflate_fail_as_with_zlib(calls, bad):
    raw = VALUES.tobytes() + (b"\0" * 4 if bad == "longer" else b"")
    stored = zlib.compress(raw, 1)
    stored = {"truncated": stored[:-9], "check": stored[:-1] + bytes([stored[-1] ^ 1]), "longer": stored}[bad]
    with pytest.raises(UndecodableChunk) as info:
        _recode(Codecs({"id": "zlib", "level": 1})).shown_array(stored, "g/v/0.0")
    assert "'g/v/0.0'" in str(info.value)
    want = {"truncated": "truncated", "check": "incorrect data check", "longer": f"{len(raw)} bytes"}[bad]
    assert want in str(info.value) and calls == [(VALUES.nbytes, False)]
