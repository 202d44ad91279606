"""The inflate of stored zlib chunks the daemon decodes (``NAME.nc``'s values, a view's decoded
chunks): libdeflate (PyPI ``deflate``), about twice zlib's speed, where the decoded size is known
beforehand (libdeflate writes into a buffer of that size). It answers None where it cannot
(``deflate`` missing, a stream it refuses, or one longer than said): the caller then inflates with
numcodecs' zlib, whose bytes, or error, are the answer. Releases the GIL.
"""

from __future__ import annotations

from typing import Any

from nczfs.nczarr.chunks.deflater import libdeflate


def inflate(data: Any, size: int) -> bytes | None:
    """The zlib stream ``data`` inflated, if it holds at most ``size`` bytes (None: see above)."""
    lib = libdeflate()
    if lib is None or size <= 0:
        return None
    try:
        return bytes(lib.zlib_decompress(data, size))
    except lib.DeflateError:
        return None
