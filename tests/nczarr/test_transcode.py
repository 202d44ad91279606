"""Recode: the chunks a view or a .nc file is made of, from stored chunks."""

import numcodecs
import numpy as np

from nczfs.nczarr.chunks.recode import Codecs, Recode


def test_shuffle_written_by_netcdf_c_with_elementsize_0_unshuffles_by_the_type_size():
    # netCDF-C writes {"id": "shuffle", "elementsize": 0}: the variable's type size is meant
    values = np.arange(24, dtype="<i2")
    stored = numcodecs.Zlib(4).encode(numcodecs.Shuffle(2).encode(values.tobytes()))
    codecs = Codecs({"id": "zlib", "level": 4}, ({"id": "shuffle", "elementsize": 0},))
    plan = Recode("<i2", (4, 6), "C", codecs, ">i2", (4, 6))
    assert np.array_equal(np.frombuffer(plan.apply(stored), ">i2"), values)


def test_a_layout_only_recode_keeps_the_shuffle_readable():
    values = np.arange(24, dtype="<i4").reshape(4, 6)
    codecs = Codecs({"id": "zlib", "level": 1}, ({"id": "shuffle", "elementsize": 0},))
    stored = numcodecs.Zlib(1).encode(numcodecs.Shuffle(4).encode(np.asfortranarray(values).tobytes(order="F")))
    plan = Recode("<i4", (4, 6), "F", codecs, "<i4", (4, 6), codecs)
    shown = plan.apply(stored)
    raw = numcodecs.Shuffle(4).decode(numcodecs.Zlib(1).decode(shown))
    assert np.array_equal(np.frombuffer(raw, "<i4").reshape(4, 6), values)


def test_a_zero_rank_variable_length_string_chunk_is_recoded():
    """A scalar of xarray's vlen strings (found by the decoded judge: a traceback, EIO)."""
    stored = numcodecs.VLenUTF8().encode(np.array("γάμμα", dtype=object).reshape(()))
    plan = Recode("|O", (), "C", Codecs(None, ({"id": "vlen-utf8"},)), "|S10", ())
    assert plan.apply(stored) == "γάμμα".encode()
