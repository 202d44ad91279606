"""Parse a kerchunk/fsspec reference set (JSON, version 0 or 1) into ``{key: bytes | Ref}``.

Version 0 is ``{key: value}``; version 1 is ``{"version": 1, "templates": {...}, "gen":
[...], "refs": {...}}``. A value is inline data (a string, ``base64:``-prefixed for bytes,
or a JSON object stored as its text), ``[url]`` (a whole target) or ``[url, offset,
length]`` (a byte range). ``{{ ... }}`` in URLs and in ``gen`` fields is rendered by
:mod:`nczfs.store.reference.templates` (Jinja2's sandbox, cut down; never ``eval``); a template
whose value holds ``{{`` becomes a callable, as in fsspec (``{{f(c='text')}}``). Unlike
fsspec's default, ``gen`` is expanded, and undefined names are an error, not "".

Everything wrong with a reference set is found here, once, and reported as a
:class:`SourceError` naming the key and the reason, so the mount is refused with one line.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import math
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from nczfs.toolbox.errors import NczfsError, SourceError
from nczfs.store.reference import templates as reftemplates
from nczfs.store.keys import check_key
from nczfs.store.reference.templates import Renderer, has_template, load_templates

#: the most keys a reference set may generate with ``gen`` (a guard against a runaway product):
#: each key costs ~10 us of CPU at mount (a template rendered per key) and ~330 bytes while
#: mounted (docs/PERFORMANCE.md: 2,000,000 took minutes and 650 MB); more chunks than this go in
#: kerchunk's parquet form
MAX_GENERATED_KEYS = 500_000
#: the most keys a reference set's parquet form may hold (refparquet.py)
MAX_KEYS = 2_000_000

#: joins a gen entry's fields into one template (a control character no key or URL holds)
GEN_FIELD_SEP = "\x1f"

#: URL schemes a reference may point at; anything else is refused at mount time
TARGET_SCHEMES = frozenset({"", "file", "http", "https", "s3"})


@dataclass(frozen=True, slots=True)
class Ref:
    """Bytes ``offset`` .. ``offset + length`` of ``url``; ``length`` None means the whole target.

    ``url`` is an absolute local path, or a URL with a scheme (``http(s)://``, ``s3://``).
    """

    url: str
    offset: int = 0
    length: int | None = None


Value = bytes | Ref


def load_references(path: str) -> dict[str, Value]:
    """Read and parse the reference JSON at ``path`` (an absolute path)."""
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as exc:
        raise SourceError(f"{path}: cannot read the reference set ({exc.strerror})") from exc
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise SourceError(f"{path}: not valid JSON ({exc})") from None
    try:
        return parse_references(doc, os.path.dirname(path))
    except SourceError as exc:
        raise SourceError(f"{path}: {exc}") from exc


def parse_references(doc: Any, base_dir: str) -> dict[str, Value]:
    """``doc`` (parsed JSON) to ``{key: bytes | Ref}``; relative local URLs resolve against ``base_dir``."""
    if not isinstance(doc, dict):
        raise SourceError(f"a reference set is a JSON object, not {type(doc).__name__}")
    version = doc.get("version")
    urls = UrlResolver(base_dir)
    gens: Any = []
    if version is None:
        raw = doc
        render = None  # version 0 has no templates: URLs are taken as they are
    elif version == 1 and not isinstance(version, bool):
        raw = doc.get("refs", {})
        if not isinstance(raw, dict):
            raise SourceError("'refs' must be a JSON object")
        render = Renderer(load_templates(doc.get("templates", {})))
        gens = doc.get("gen", [])
        if not isinstance(gens, list):
            raise SourceError("'gen' must be a list")
    else:
        raise SourceError(f"unknown reference version {version!r} (nczfs reads versions 0 and 1)")
    refs: dict[str, Value] = {}
    for key, value in raw.items():
        refs[checked_key(key)] = parse_value(key, value, render, urls)
    budget = [MAX_GENERATED_KEYS]
    for i, gen in enumerate(gens):  # generated keys win over "refs" (into the same dict: no copy)
        _expand_gen(i, gen, render, urls, budget, refs)  # type: ignore[arg-type]  # version 1 (gens non-empty) has its renderer
    check_tree(refs)
    return refs


# ---------------------------------------------------------------------- values


def checked_key(key: str) -> str:
    try:
        return check_key(key)
    except NczfsError as exc:
        raise SourceError(f"key {key!r}: not a usable key ({exc})") from None


def parse_value(key: str, value: Any, render: Renderer | None, urls: "UrlResolver") -> Value:
    if isinstance(value, str):
        if value.startswith("base64:"):
            try:
                return base64.b64decode(value[7:], validate=True)
            except binascii.Error as exc:
                raise SourceError(f"key {key!r}: bad base64 data ({exc})") from None
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, dict):
        return json.dumps(value).encode()
    if isinstance(value, list) and len(value) in (1, 3):
        url = value[0]
        if not isinstance(url, str) or not url:
            raise SourceError(f"key {key!r}: the target URL must be a non-empty string, not {url!r}")
        url = urls(key, render(f"key {key!r}", url) if render and has_template(url) else url)
        if len(value) == 1:
            return Ref(url)
        return Ref(url, _count(key, "offset", value[1]), _count(key, "length", value[2]))
    raise SourceError(f"key {key!r}: a value is a string, [url] or [url, offset, length], not {json.dumps(value)[:80]}")


def _count(key: str, what: str, n: Any) -> int:
    if type(n) is int and n >= 0:
        return n
    if isinstance(n, str):  # gen renders offsets and lengths as text
        try:
            n = int(n.strip())
        except ValueError:
            raise SourceError(f"key {key!r}: {what} {n!r} is not a whole number") from None
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise SourceError(f"key {key!r}: {what} must be a whole number >= 0, not {n!r}")
    return n


class UrlResolver:
    """:func:`resolve_url`, once per distinct URL (a reference set names few targets, many times)."""

    def __init__(self, base_dir: str):
        self.base_dir = base_dir
        self._seen: dict[str, str] = {}

    def __call__(self, key: str, url: str) -> str:
        resolved = self._seen.get(url)
        if resolved is None:
            resolved = self._seen[url] = resolve_url(key, url, self.base_dir)
        return resolved


def resolve_url(key: str, url: str, base_dir: str) -> str:
    """A target URL as the readers want it: an absolute local path, or a URL with a scheme."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower() if len(parts.scheme) > 1 else ""  # "C:" is no scheme
    if scheme not in TARGET_SCHEMES:
        raise SourceError(f"key {key!r}: target {url!r} has an unsupported scheme {scheme!r} (use a path, file://, http(s):// or s3://)")
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise SourceError(f"key {key!r}: target {url!r} names a remote host")
        url = unquote(parts.path)
    elif scheme:
        return url
    if "\x00" in url:
        raise SourceError(f"key {key!r}: NUL in target path")
    return os.path.normpath(os.path.join(base_dir, url))


# ---------------------------------------------------------------------- templates and gen

def _dimension(where: str, name: str, spec: Any) -> list[Any] | range:
    if isinstance(spec, list):
        return spec
    if isinstance(spec, dict) and "stop" in spec:
        try:
            args = [spec.get("start", 0), spec["stop"], spec.get("step", 1)]
            if not all(isinstance(a, int) and not isinstance(a, bool) for a in args):
                raise TypeError("start, stop and step must be integers")
            return range(*args)
        except (TypeError, ValueError) as exc:
            raise SourceError(f"{where}: dimension {name!r}: {exc}") from None
    raise SourceError(f"{where}: dimension {name!r} must be a list or {{\"start\", \"stop\", \"step\"}}")


def _gen_fields(where: str, gen: Any) -> list[str]:
    """The fields of gen entry ``gen`` made into each key's reference, checked: ``key``, ``url``
    and (together) ``offset`` and ``length``; ``dimensions`` must be there too."""
    if not isinstance(gen, dict):
        raise SourceError(f"{where}: must be a JSON object")
    for field in ("key", "url", "dimensions"):
        if field not in gen:
            raise SourceError(f"{where}: '{field}' is missing")
    if ("offset" in gen) != ("length" in gen):
        raise SourceError(f"{where}: 'offset' and 'length' go together")
    fields = ["key", "url"] + (["offset", "length"] if "offset" in gen else [])
    for field in fields:
        if not isinstance(gen[field], (str, int)) or isinstance(gen[field], bool):
            raise SourceError(f"{where}: '{field}' must be a string")
    return fields


def _gen_dimensions(where: str, gen: dict, fields: list[str], budget: list[int]) -> dict[str, list | range]:
    """The dimensions of gen entry ``gen``, their product taken from what ``budget`` has left."""
    if not isinstance(gen["dimensions"], dict) or not gen["dimensions"]:
        raise SourceError(f"{where}: 'dimensions' must be a non-empty JSON object")
    dims = {name: _dimension(where, name, spec) for name, spec in gen["dimensions"].items()}
    count = math.prod(len(d) for d in dims.values())
    budget[0] -= count
    if budget[0] < 0:
        raise SourceError(f"{where}: generates {count} keys; at most {MAX_GENERATED_KEYS} in all are allowed")
    if any(GEN_FIELD_SEP in str(gen[f]) for f in fields) or any(
            isinstance(v, str) and GEN_FIELD_SEP in v for d in dims.values() if isinstance(d, list) for v in d):
        raise SourceError(f"{where}: a field holds or renders the character U+001F")
    return dims


def _plain_fields(gen: dict, fields: list[str], dims: dict, names: dict) -> dict[str, list]:
    """The fields of text and names alone (``data/{{i}}.{{j}}``), by field: their pieces, put
    together in Python; the others are rendered as one template."""
    plain: dict[str, list] = {}
    for field in fields:
        pieces = reftemplates.plain_names(str(gen[field]))
        if pieces is not None and all(isinstance(p, str) or p[0] in dims or isinstance(names.get(p[0]), str)
                                      for p in pieces):
            plain[field] = pieces
    return plain


def _expand_gen(i: int, gen: Any, render: Renderer, urls: UrlResolver, budget: list[int], out: dict[str, Value]) -> None:
    """Put the keys ``gen`` entry ``i`` generates into ``out``."""
    where = f"gen[{i}]"
    fields = _gen_fields(where, gen)
    dims = _gen_dimensions(where, gen, fields, budget)
    names = dict(render.templates)
    plain = _plain_fields(gen, fields, dims, names)
    rest = [f for f in fields if f not in plain]
    run = None
    if rest:  # rendered once per combination through one jinja2 context
        template = render.compiled(where, GEN_FIELD_SEP.join(str(gen[f]) for f in rest))
        run = reftemplates.renderer_over(where, template, names)
    values: dict[str, str] = {}
    for combo in itertools.product(*dims.values()):
        names.update(zip(dims, combo))
        if run is not None:
            parts = run().split(GEN_FIELD_SEP)
            if len(parts) != len(rest):
                raise SourceError(f"{where}: a field holds or renders the character U+001F")
            values.update(zip(rest, parts))
        for field, pieces in plain.items():
            values[field] = "".join(p if p.__class__ is str else str(names[p[0]]) for p in pieces)
        key = checked_key(values["key"])
        url = urls(key, values["url"])
        if "offset" in values:
            out[key] = Ref(url, _count(key, "offset", values["offset"]), _count(key, "length", values["length"]))
        else:
            out[key] = Ref(url)


# ---------------------------------------------------------------------- shape


def check_tree(refs: dict[str, Value]) -> None:
    """No key may also be a directory (``a`` and ``a/b``): a tree cannot show both."""
    for key in refs:
        parent = key
        while "/" in parent:
            parent = parent.rpartition("/")[0]
            if parent in refs:
                raise SourceError(f"key {parent!r} is both an object and the directory of {key!r}")
