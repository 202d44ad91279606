"""The methods a store standing for another forwards, each made from its name.

:class:`~nczfs.store.threads.ThreadedStore` (a SyncStore's calls in worker threads) and
:class:`~nczfs.store.wrapper.WrapperStore` (an async store over another) forward most Store
methods unchanged. Each lists them in one table in its class body, ``name = forward(...)``,
and the method is made here from the name when the class is made (its signature is the Store
method's of that name): :func:`in_thread`, :func:`awaited`, :func:`at_once`,
:func:`through_write`. An optional operation's is ``_optional_NAME`` (its signature the Protocol's of
:data:`~nczfs.store.optional.OPTIONAL`): it becomes ``NAME`` of a store whose store below has it
(:func:`~nczfs.store.capabilities.offer`).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Awaitable, Callable, TypeVar

from nczfs.store.base import Store
from nczfs.store.optional import OPTIONAL, OPTIONAL_PREFIX

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
        method = self._make(name.removeprefix(OPTIONAL_PREFIX))  # the optional operation NAME
        method.__name__ = name
        method.__qualname__ = f"{owner.__qualname__}.{name}"
        method.__doc__ = f"``{name.removeprefix(OPTIONAL_PREFIX)}`` {self._how}."
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
    """``await self.below.NAME(...)``: a read of the async store below. The method hands back
    the store below's awaitable itself, no coroutine of its own around it: every wrapper of the
    stack would add one to each call (a lookup and a read pass two on a writable mount)."""
    def make(name: str) -> Callable[..., Any]:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return getattr(self.below, name)(*args, **kwargs)
        return method
    return _Forward(make, "of the store below")


def at_once() -> Any:
    """``self.below.NAME(...)``: an answer of the store below that needs no I/O."""
    def make(name: str) -> Callable[..., Any]:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return getattr(self.below, name)(*args, **kwargs)
        return method
    return _Forward(make, "of the store below (no I/O)")


def _binder(name: str) -> Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]:
    """``bind(args, kwargs)``: the Store method ``name``'s arguments by name, in its signature's
    order, defaults filled in (``inspect.Signature.bind`` and ``apply_defaults``, worked out once:
    those cost µs per call); its errors are ``TypeError`` as ``bind`` would."""
    declared = next((p for p, (_, methods) in OPTIONAL.items() if name in methods), Store)
    params = list(inspect.signature(getattr(declared, name)).parameters.values())[1:]  # not self
    assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params), name
    names = tuple(p.name for p in params)
    defaults = tuple(p.default for p in params)
    empty = inspect.Parameter.empty
    by_name = [frozenset(names[given:]) for given in range(len(names) + 1)]  # after ``given`` positions

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(args) > len(names):
            raise TypeError(f"{name}(): too many positional arguments")
        values = dict(zip(names, args))
        if kwargs and not kwargs.keys() <= by_name[len(args)]:
            bad = next(k for k in kwargs if k not in by_name[len(args)])
            how = "multiple values for" if bad in values else "an unexpected keyword"
            raise TypeError(f"{name}(): {how} argument {bad!r}")
        for key, default in zip(names[len(args):], defaults[len(args):]):
            value = kwargs.get(key, default)
            if value is empty:
                raise TypeError(f"{name}(): missing a required argument: {key!r}")
            values[key] = value
        return values
    return bind


def through_write(keys: int) -> Any:
    """A change of the store below made through the wrapper's one write hook: ``self._write(NAME,
    the first ``keys`` arguments, the call below)``; ``if_version`` rides as a keyword the hook
    is told of (``call.given``), where it is not None; a ``set``'s data is the hook's ``data``."""
    def make(name: str) -> Callable[..., Any]:
        bind = _binder(name)

        async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            values = bind(args, kwargs)
            given = {"if_version": values.pop("if_version")} if values.get("if_version") is not None else {}
            values.pop("if_version", None)
            ordered = list(values.values())
            changed = tuple(ordered[:keys])
            call = call_below(getattr(self.below, name), changed, *ordered[keys:], **given)
            return await self._write(name, changed, call, values.get("data"))
        return method
    return _Forward(make, "of the store below, through the write hook")
