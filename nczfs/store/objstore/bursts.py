"""Small GETs asked for together (the burst of sibling objects the cache fetches ahead of a
reader), sent at once on the store's asyncio loop thread and awaited from trio in one hand-over.

Sent alone, each small GET costs a trip to a worker thread and back, and wakes trio once; sent
one after another from one worker they reach the server one at a time, which cost SeaweedFS
more CPU than GETs arriving together (docs/PERFORMANCE.md, "Issue 46: small siblings fetched
in one hop"). Here trio hands the burst to the loop once, obstore sends its GETs at once, and
the loop hands every answer back at once. A GET this does not answer (a key obstore cannot
name, an empty range, a range the server found past the end: 416) answers None: the caller
reads it through the blocking path, which handles those.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import obstore as obs

from nczfs.store.keys import check_key
from nczfs.store.values import Ask
from nczfs.store.objstore.errors import other_version, unsatisfiable

if TYPE_CHECKING:
    from nczfs.store.objstore.obprefix import ObjectStoreBackend

#: what is sent for one: obstore's path and GET options (None: not sent here)
Plan = tuple[str, Any] | None


def plan(backend: ObjectStoreBackend, ask: Ask, unnameable: Any) -> Plan | Exception:
    """The GET of ``ask``: its path and options; None where the blocking path must read it; a
    bad key's error."""
    key, rng, etag = ask
    try:
        check_key(key)
        path = backend.paths.full(key)
    except Exception as exc:  # noqa: BLE001 - that read's own error
        return exc
    if (rng is not None and rng.end == rng.start) or unnameable.search(path):
        return None
    return path, backend._get_options(rng, etag)


async def _gather(store: Any, sent: list[tuple[str, str, Any]]) -> list[Any]:
    """On the loop: every GET of ``sent`` (key, path, options) at once; each one's body or its
    exception, in order. A small body arrives with its answer: taken without a second future
    (``bytes()``)."""
    async def one(key: str, path: str, options: Any) -> Any:
        result = await obs.get_async(store, path, options=options)
        if (wrong := other_version(result, options, key)) is not None:
            raise wrong
        return result.bytes()

    return await asyncio.gather(*(one(*s) for s in sent), return_exceptions=True)


async def get_many(backend: ObjectStoreBackend, asks: list[Ask], unnameable: Any,
                   keep_buffer: int) -> list[bytes | Exception | None]:
    """The bodies of ``asks`` (each its bytes, its error, or None: see the module's text), sent
    at once through ``backend``'s loop; bodies from ``keep_buffer`` bytes are views of obstore's
    buffer, as ``get_version`` hands them."""
    plans = [plan(backend, ask, unnameable) for ask in asks]
    sent = [(key, *p) for (key, _, _), p in zip(asks, plans) if isinstance(p, tuple)]
    backend.requests.count("get", len(sent))
    bodies = iter(await backend._loop().trio_run(_gather, backend.store, sent) if sent else ())
    out: list[bytes | Exception | None] = []
    for (key, _, _), p in zip(asks, plans):
        if not isinstance(p, tuple):
            out.append(p)
            continue
        body = next(bodies)
        if not isinstance(body, BaseException):
            out.append(memoryview(body) if len(body) >= keep_buffer else bytes(body))  # type: ignore[arg-type]  # bytes-like, as get_version's
        elif unsatisfiable(body):
            out.append(None)
        else:
            out.append(backend.requests.error(body, key, "get"))
    return out
