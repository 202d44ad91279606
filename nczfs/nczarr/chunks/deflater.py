"""The deflate encoder of the chunks a mount re-encodes as zlib (a view's ``-o transcode=zlib``,
``NAME.nc4``'s chunks HDF5 cannot read as stored): ISA-L (python-isal), a zlib stream any inflater
reads (HDF5's deflate filter, numcodecs' zlib), made in a fifth of the CPU of zlib's level 1 at
about its size (docs/PERFORMANCE.md). Where ``isal`` cannot be imported, the standard library's
zlib makes it, said once in the log (at the first use).

The bytes depend on the encoder and its version: :func:`encoder` names them, and a size kept
across mounts (:mod:`nczfs.nczarr.chunks.sizebook`) is keyed by it. Both release the GIL.
"""

from __future__ import annotations

import functools
import logging
import zlib
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: zlib's level 1 (what the re-encodings ask for) is made at ISA-L's level 2 (its levels are 0-3):
#: as fast as its level 1 and a few per cent smaller; other levels stay zlib's own
FAST_LEVEL = 1
ISAL_LEVEL = 2


@functools.cache
def _pick() -> tuple[str, Callable[[Any], bytes]]:
    """The encoder's name and its level-1 compress, chosen on first use (the log set up by then)."""
    try:
        import isal
        from isal import isal_zlib
    except ImportError as exc:
        log.warning("python-isal cannot be imported (%s): chunks re-encoded as deflate are made by "
                    "zlib, at about five times the CPU", exc)
        return f"zlib {zlib.ZLIB_RUNTIME_VERSION} level {FAST_LEVEL}", lambda data: zlib.compress(data, FAST_LEVEL)
    return f"isal {isal.__version__} level {ISAL_LEVEL}", lambda data: isal_zlib.compress(data, ISAL_LEVEL)


def encoder() -> str:
    """What makes a level-1 zlib stream here, with its version (a key of kept sizes)."""
    return _pick()[0]


def compress(data: Any, level: int) -> bytes:
    """``data`` as a zlib stream at zlib's ``level`` (-1 is its default), level 1 by :func:`encoder`."""
    return _pick()[1](data) if level == FAST_LEVEL else zlib.compress(data, level)
