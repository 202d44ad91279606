"""Parse a SOURCE: a path, a ``file://`` URL, or another netCDF-C URL, with ``#mode=...``.

Fragment rules follow netCDF-C (NCZARR_FORMATS.md section 6): ``#k=v&k2&...``, keys
matched case-insensitively, the first occurrence wins; the old ``[k=v]url`` prefix form is
accepted too. Unlike netCDF-C, unknown ``mode`` words are an error, not silently ignored, and so
are words that contradict each other or the URL (two storage maps, ``xarray`` with ``noxarray``,
``zip`` on an ``s3://`` URL).
"""

from __future__ import annotations

import dataclasses
import os
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from nczfs.toolbox.errors import SourceError
from nczfs.store.registry import BACKENDS, Backend, Given, by_scheme
from nczfs.toolbox.urlparams import parse_fragment, split_bracket_prefix

#: mode words netCDF-C knows (dinfermodel.c, zarr.c); a backend declares those that choose it
NETCDF_MODES = frozenset({"nczarr", "zarr", "xarray", "noxarray", "file", "zip", "s3", "gs3", "consolidated", "bytes"})
#: mode words that cannot go together (besides two storage maps: see _map_from_modes)
CONTRADICTIONS = (frozenset({"xarray", "noxarray"}),)


def known_modes() -> frozenset[str]:
    return NETCDF_MODES | {m for b in BACKENDS.values() for m in b.modes}


def map_modes() -> dict[str, str]:
    """Which backend each mode word chooses (registry)."""
    return {m: b.name for b in BACKENDS.values() for m in b.modes}


@dataclass(frozen=True)
class Source:
    #: the registered backend that opens it (nczfs.store.registry)
    backend: str
    #: where it is, as its backend located it: an absolute path, a memory store's name,
    #: "bucket/prefix", a web server's URL, ...
    location: str
    modes: frozenset[str] = frozenset()
    params: dict[str, str] = field(default_factory=dict)
    text: str = ""
    #: the backend's own parse of the location (an S3 source's bucket, prefix, endpoint and region), once
    parsed: Any = field(default=None, compare=False, repr=False)
    #: the location is a local path (the mount table shows it absolute)
    local: bool = False


def absolute_text(source: Source) -> str:
    """SOURCE as given, with a local path made absolute (what the mount table shows)."""
    if not source.local:
        return source.text
    body, hash_, fragment = source.text.strip().partition("#")
    prefix = body[: body.rfind("]") + 1] if body.startswith("[") else ""
    scheme, sep, _ = body[len(prefix):].partition("://")
    return prefix + (f"{scheme}://{source.location}" if sep else source.location) + hash_ + fragment


def _modes(params: dict[str, str], text: str) -> frozenset[str]:
    words = [w.strip().lower() for w in params.get("mode", "").split(",") if w.strip()]
    known = known_modes()
    unknown = sorted(set(words) - known)
    if unknown:
        raise SourceError(
            f"{text}: unknown mode word(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    for pair in CONTRADICTIONS:
        if pair <= set(words):
            raise SourceError(f"{text}: the mode words {' and '.join(sorted(pair))} contradict each other")
    return frozenset(words)


def _map_from_modes(modes: frozenset[str], text: str) -> tuple[str | None, str]:
    """The backend the mode words choose (None: none does) and those words."""
    chooses = map_modes()
    maps = {chooses[m] for m in modes if m in chooses}
    if len(maps) > 1:
        raise SourceError(f"{text}: mode names more than one storage map ({', '.join(sorted(maps))})")
    return (maps.pop() if maps else None), ",".join(sorted(m for m in modes if m in chooses))


def escaped(text: str) -> str:
    """``text`` with its control characters as Python escapes (``\\n``, ``\\x00``), quoted."""
    return "'" + "".join(repr(c)[1:-1] if unicodedata.category(c) == "Cc" else c for c in text) + "'"


def check_no_control_characters(what: str, text: str) -> None:
    """A SOURCE or MOUNTPOINT holding a control character (a newline pasted with it) is refused:
    no URL holds one, and a path that does is a mistake far more often than a name."""
    bad = sorted({repr(c)[1:-1] for c in text if unicodedata.category(c) == "Cc"})
    if bad:
        raise SourceError(f"{what} {escaped(text)} holds a control character ({', '.join(bad)}); "
                          f"give it without")


def parse_source(text: str, cwd: str | None = None) -> Source:
    """Turn the SOURCE argument into a :class:`Source`, or raise SourceError with a one-line reason."""
    if not text or not text.strip():
        raise SourceError("empty SOURCE")
    check_no_control_characters("SOURCE", text)
    body, params, scheme, parts = _split(text)
    modes = _modes(params, text)
    chosen, words = _map_from_modes(modes, text)
    given = Given(text, scheme, parts, "", modes, chosen, words, cwd or os.getcwd())
    backend = _url_backend(given) if scheme else None
    if backend is None or backend.local:
        backend, given = _local(given, body, backend)
    located = backend.locate(given) if backend.locate is not None else None
    if given.chosen not in (None, backend.name):
        where = f"a {scheme}:// URL" if scheme else "a local path"
        raise SourceError(f"{text}: mode {chosen} does not fit {where}")
    if located is None:
        return Source(backend.name, given.path, modes, params, text, local=True)
    return Source(backend.name, located.location, modes, params, text, located.parsed, located.local)


def _split(text: str):
    """(the SOURCE without its [k=v] prefix and #fragment, the parameters of both, the URL's
    scheme or "", the URL's parts or None)."""
    body, params = split_bracket_prefix(text.strip())
    scheme = body.split(":", 1)[0].lower() if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", body) else ""
    parts = None
    if scheme:
        try:
            parts = urlsplit(body)
            parts.port  # noqa: B018 - a port out of range, or not a number, raises ValueError here
        except ValueError as exc:
            raise SourceError(f"{text}: not a valid URL ({exc})") from None
        for k, v in parse_fragment(parts.fragment).items():
            params.setdefault(k, v)
    elif "#" in body and not os.path.exists(body):
        body, _, frag = body.partition("#")
        for k, v in parse_fragment(frag).items():
            params.setdefault(k, v)
    return body, params, scheme, parts


def _url_backend(given: Given) -> Backend:
    """The backend of a URL: of those registered for its scheme, the one its mode words chose,
    else the first that claims it, else the one that claims what no other does."""
    found = by_scheme(given.scheme)
    if not found:
        schemes = sorted({f"{s}://" for b in BACKENDS.values() for s in b.schemes})
        raise SourceError(f"{given.text}: unsupported URL scheme {given.scheme!r} "
                          f"(use a path or {', '.join(schemes)})")
    chosen = [b for b in found if b.name == given.chosen]
    claimed = [b for b in found if b.claims is not None and b.claims(given)]
    return (chosen or claimed or [b for b in found if b.claims is None] or found)[0]


def _local(given: Given, body: str, backend: Backend | None) -> tuple[Backend, Given]:
    """A path, a file:// URL or a local backend's own (reference://): the backend its scheme,
    mode words or extension choose, else the one for any path; ``given`` with the path."""
    path = given.local_path(body)
    if given.scheme == "file":
        backend = None  # netCDF-C's: a path, any local backend's
    if backend is not None and given.chosen not in (None, backend.name):
        raise SourceError(f"{given.text}: {given.scheme}:// URLs name {backend.noun or backend.name + ' sources'}; "
                          f"mode names {given.chosen}")
    ext = os.path.splitext(path)[1].lower()
    backend = (backend or BACKENDS.get(given.chosen or "")
               or next((b for b in BACKENDS.values() if ext in b.suffixes), None)
               or next(b for b in BACKENDS.values() if b.paths))
    if not backend.local:
        schemes = ", ".join(s + "://" for s in backend.schemes)
        raise SourceError(f"{given.text}: mode {given.words} needs a URL ({schemes}), not a local path")
    return backend, dataclasses.replace(given, path=path)
