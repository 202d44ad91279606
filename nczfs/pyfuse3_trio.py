"""The ``trio`` that pyfuse3's request loop runs on: trio itself, but for its ``Lock``.

pyfuse3 looks trio up as its module attribute ``pyfuse3.trio`` (``pyfuse3.asyncio`` swaps in an
asyncio shim the same way). Before each wait for the next FUSE request, its loop takes a
``trio.Lock``, which yields to the scheduler even when it is free: one more pass of trio's run
loop for every request. With :class:`nczfs.locks.Lock` it yields only when it has to wait; the
wait for the request itself still yields, so other tasks run between two requests as before.
"""

from __future__ import annotations

import types

import pyfuse3
import trio

from nczfs.locks import Lock


def trio_for_pyfuse3() -> types.ModuleType:
    """A module that is ``trio`` but for ``Lock``."""
    shim = types.ModuleType("nczfs.pyfuse3_trio.trio")
    shim.__dict__.update({k: v for k, v in vars(trio).items() if not k.startswith("__")})
    shim.Lock = Lock  # type: ignore[attr-defined]
    return shim


def install() -> None:
    """Make pyfuse3's loop use :func:`trio_for_pyfuse3` (before ``pyfuse3.main``)."""
    pyfuse3.trio = trio_for_pyfuse3()  # type: ignore[attr-defined]
