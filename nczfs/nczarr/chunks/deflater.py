"""The deflate encoder of the chunks a mount re-encodes as zlib (a view's ``-o transcode=zlib``,
``NAME.nc4``'s chunks HDF5 cannot read as stored): libdeflate (PyPI ``deflate``) at its level 1, a
zlib stream any inflater reads (HDF5's deflate filter, numcodecs' zlib), made in a third to a half
of the CPU of zlib's level 1 at about its size (docs/PERFORMANCE.md). Where ``deflate`` cannot be
imported, the standard library's zlib makes it, said once in the log (at the first use).

A made chunk's bytes must be a function of the stored chunk alone: a file's size is summed from
sizes made once (kept across mounts in :mod:`nczfs.nczarr.chunks.sizebook`), and a chunk evicted
is made again for a later read of its range. Both encoders here are (the same bytes for the same
input and version); ISA-L's (python-isal) is not (docs/PERFORMANCE.md). The bytes depend on the
encoder and its version: :func:`encoder` names them, and a size kept across mounts is keyed by
it. Both release the GIL.
"""

from __future__ import annotations

import functools
import logging
import zlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

#: zlib's level 1 (what the re-encodings ask for) is made at libdeflate's level 1; other levels
#: stay zlib's own
FAST_LEVEL = 1
LIBDEFLATE_LEVEL = 1


@functools.cache
def libdeflate() -> ModuleType | None:
    """PyPI ``deflate`` (libdeflate's binding), or None where it cannot be imported (said once in
    the log, at the first use: the log is set up by then)."""
    try:
        import deflate
    except ImportError as exc:
        log.warning("deflate (libdeflate) cannot be imported (%s): chunks re-encoded as deflate are "
                    "made by zlib, at two to three times the CPU, and zlib chunks inflated by it", exc)
        return None
    return deflate


@functools.cache
def _pick() -> tuple[str, Callable[[Any], bytes]]:
    """The encoder's name and its level-1 compress."""
    lib = libdeflate()
    if lib is None:
        return f"zlib {zlib.ZLIB_RUNTIME_VERSION} level {FAST_LEVEL}", lambda data: zlib.compress(data, FAST_LEVEL)
    # deflate gives a bytearray: bytes, as made chunks are kept and served (the copy numcodecs'
    # ensure_bytes would make after it otherwise)
    return (f"libdeflate {lib.__version__} level {LIBDEFLATE_LEVEL}",
            lambda data: bytes(lib.zlib_compress(data, LIBDEFLATE_LEVEL)))


def encoder() -> str:
    """What makes a level-1 zlib stream here, with its version (a key of kept sizes)."""
    return _pick()[0]


def compress(data: Any, level: int) -> bytes:
    """``data`` as a zlib stream at zlib's ``level`` (-1 is its default), level 1 by :func:`encoder`."""
    return _pick()[1](data) if level == FAST_LEVEL else zlib.compress(data, level)
