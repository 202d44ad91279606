"""The deflate encoder of re-encoded chunks (nczfs.nczarr.chunks.deflater): libdeflate's, a zlib
stream that zlib and numcodecs inflate to the same bytes, the same stream for the same input;
levels other than the re-encodings' stay zlib's."""

from __future__ import annotations

import zlib

import deflate
import numcodecs
import numpy as np

from nczfs.nczarr.chunks import deflater
from nczfs.nczarr.chunks.recode import Codecs


def _field() -> bytes:
    rng = np.random.default_rng(0)
    x = np.arange(1 << 18, dtype="f4")
    return np.round(15 + 10 * np.sin(x / 5000) + rng.normal(0, 0.5, x.size).astype("f4"), 2).astype("<f4").tobytes()


def test_level_one_is_made_by_libdeflate_and_inflates_with_zlib_and_numcodecs():
    data = _field()
    out = Codecs({"id": "zlib", "level": 1}).encode(data)
    assert deflater.encoder() == f"libdeflate {deflate.__version__} level 1"
    assert out == deflate.zlib_compress(data, deflater.LIBDEFLATE_LEVEL) != zlib.compress(data, 1)
    assert isinstance(out, bytes) and zlib.decompress(out) == data == numcodecs.Zlib().decode(out)
    assert len(out) < 1.1 * len(zlib.compress(data, 1))


def test_other_levels_are_zlibs_own():
    data = _field()[:100_000]
    assert Codecs({"id": "zlib", "level": 6}).encode(data) == zlib.compress(data, 6)
    assert deflater.compress(memoryview(data), 0) == zlib.compress(data, 0)
