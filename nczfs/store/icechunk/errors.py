"""Icechunk's errors read: its message on one line, and whether it is about the key."""

from __future__ import annotations


def reason(exc: BaseException) -> str:
    """Icechunk's error text on one line: its message and the causes it lists."""
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    lines = [ln.strip() for ln in str(exc).splitlines()]
    head = next((ln.removeprefix("x ").strip() for ln in lines if ln), type(exc).__name__)
    causes = [ln.split("-> ", 1)[1].strip() for ln in lines if "-> " in ln and ln[:1] in "|`"]
    return ": ".join(dict.fromkeys([head, *causes]))


def refused_key(exc: BaseException) -> bool:
    """Did Icechunk refuse a write because of the key (not yet or never a Zarr v3 key of a node
    it has), rather than because of the data?"""
    text = str(exc)
    return isinstance(exc, KeyError) or "invalid zarr key" in text or "invalid chunk index" in text or "node not found" in text


def refused_metadata(exc: BaseException) -> bool:
    """Did Icechunk refuse a write because of the metadata written (not valid JSON, Zarr v2, a
    chunk grid it cannot hold such as a chunk length of 0), rather than because it failed?"""
    text = str(exc)
    return "bad metadata" in text or "V2 metadata" in text or "Invalid chunk grid metadata" in text


def missing(exc: BaseException) -> bool:
    return isinstance(exc, KeyError) or "invalid zarr key" in str(exc) or "not found" in str(exc)
