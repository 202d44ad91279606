"""The methods a store standing for another forwards, each made from its name.

:class:`~nczfs.store.threads.ThreadedStore` (a SyncStore's calls in worker threads) and
:class:`~nczfs.store.wrapper.WrapperStore` (an async store over another) forward most Store
methods unchanged. Each lists them in one table in its class body, ``name = forward(...)``,
and the method is made here from the name when the class is made (its signature is the Store
method's of that name): :func:`in_thread`, :func:`awaited`, :func:`at_once`,
:func:`through_write`.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Awaitable, Callable, TypeVar

from nczfs.store.base import Store

T = TypeVar("T")


def call_below(method: Callable[..., Awaitable[T]], keys: tuple[str, ...], *rest: object,
               **given: object) -> Callable[..., Awaitable[T]]:
    """The change a write hook makes below: ``method(*keys, *rest, **given)``; called with other
    keys, the same change of those (a view's write goes to the stored key its view key stands
    for). ``given``: the keywords of the call (a write's ``if_version``), kept as ``.given``,
    ride along unless the hook passes others in their place."""
    def call(*other: str, **instead: object) -> Awaitable[T]:
        return method(*(other or keys), *rest, **{**given, **instead})

    call.given = given  # type: ignore[attr-defined]  # what the hook is told of the call's keywords
    return call


class _Forward:
    """A placeholder in a class body that becomes the method ``make(name)`` of that class."""

    def __init__(self, make: Callable[[str], Callable[..., Any]], how: str):
        self._make = make
        self._how = how

    def __set_name__(self, owner: type, name: str) -> None:
        method = self._make(name)
        method.__name__ = name
        method.__qualname__ = f"{owner.__qualname__}.{name}"
        method.__doc__ = f"``{name}`` {self._how}."
        setattr(owner, name, method)


def in_thread() -> Any:
    """``self.impl.NAME(...)`` in a worker thread (``ThreadedStore._call``)."""
    def make(name: str) -> Callable[..., Any]:
        async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            fn = getattr(self.impl, name)
            return await self._call(functools.partial(fn, **kwargs) if kwargs else fn, *args)
        return method
    return _Forward(make, "of the store below, in a worker thread")


def awaited() -> Any:
    """``await self.below.NAME(...)``: a read of the async store below."""
    def make(name: str) -> Callable[..., Any]:
        async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await getattr(self.below, name)(*args, **kwargs)
        return method
    return _Forward(make, "of the store below")


def at_once() -> Any:
    """``self.below.NAME(...)``: an answer of the store below that needs no I/O."""
    def make(name: str) -> Callable[..., Any]:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return getattr(self.below, name)(*args, **kwargs)
        return method
    return _Forward(make, "of the store below (no I/O)")


def through_write(keys: int) -> Any:
    """A change of the store below made through the wrapper's one write hook: ``self._write(NAME,
    the first ``keys`` arguments, the call below)``; ``if_version`` rides as a keyword the hook
    is told of (``call.given``), where it is not None; a ``set``'s data is the hook's ``data``."""
    def make(name: str) -> Callable[..., Any]:
        signature = inspect.signature(getattr(Store, name))

        async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            values = dict(bound.arguments)
            del values["self"]
            given = {"if_version": values.pop("if_version")} if values.get("if_version") is not None else {}
            values.pop("if_version", None)
            ordered = list(values.values())
            changed = tuple(ordered[:keys])
            call = call_below(getattr(self.below, name), changed, *ordered[keys:], **given)
            return await self._write(name, changed, call, values.get("data"))
        return method
    return _Forward(make, "of the store below, through the write hook")
