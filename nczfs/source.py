"""Parse a SOURCE: a path, a ``file://`` URL, or another netCDF-C URL, with ``#mode=...``.

Fragment rules follow netCDF-C (NCZARR_FORMATS.md section 6): ``#k=v&k2&...``, keys
matched case-insensitively, the first occurrence wins; the old ``[k=v]url`` prefix form is
accepted too. Unlike netCDF-C, unknown ``mode`` words are an error, not silently ignored, and so
are words that contradict each other or the URL (two storage maps, ``xarray`` with ``noxarray``,
``zip`` on an ``s3://`` URL).
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from nczfs.errors import SourceError
from nczfs.store.registry import by_scheme
from nczfs.store.s3.cloudurl import azure_https_location
from nczfs.store.s3.s3url import S3Location, parse_s3_url
from nczfs.urlparams import parse_fragment, split_bracket_prefix

#: mode words netCDF-C knows (dinfermodel.c, zarr.c)
KNOWN_MODES = frozenset(
    {"nczarr", "zarr", "xarray", "noxarray", "file", "zip", "s3", "gs3", "consolidated", "bytes"}
) | {"refs"}  # nczfs's own word: the file is a kerchunk reference set
#: which backend a mode word selects
MAP_MODES = {"file": "directory", "zip": "zip", "s3": "s3", "gs3": "s3", "refs": "reference"}
#: mode words that cannot go together (besides two storage maps: see _map_from_modes)
CONTRADICTIONS = (frozenset({"xarray", "noxarray"}),)


@dataclass(frozen=True)
class Source:
    backend: str  # "directory", "memory", "zip", "s3", "gcs", "azure", "http", "reference" or "icechunk"
    #: an absolute path, a memory store name, "bucket/prefix" (S3, GCS), "container/prefix"
    #: (Azure) the URL of a Zarr on a web server (http),
    #: or (icechunk) an absolute path or "s3://bucket/prefix"
    location: str
    modes: frozenset[str] = frozenset()
    params: dict[str, str] = field(default_factory=dict)
    text: str = ""
    #: an S3 source's bucket, prefix, endpoint and region, as its URL says them (parsed here, once)
    s3: S3Location | None = field(default=None, compare=False, repr=False)


def absolute_text(source: Source) -> str:
    """SOURCE as given, with a local path made absolute (what the mount table shows)."""
    if source.backend in ("s3", "memory"):
        return source.text
    body, hash_, fragment = source.text.strip().partition("#")
    prefix = body[: body.rfind("]") + 1] if body.startswith("[") else ""
    scheme, sep, _ = body[len(prefix):].partition("://")
    return prefix + (f"{scheme}://{source.location}" if sep else source.location) + hash_ + fragment


def _modes(params: dict[str, str], text: str) -> frozenset[str]:
    words = [w.strip().lower() for w in params.get("mode", "").split(",") if w.strip()]
    unknown = sorted(set(words) - KNOWN_MODES)
    if unknown:
        raise SourceError(
            f"{text}: unknown mode word(s) {', '.join(unknown)}; known: {', '.join(sorted(KNOWN_MODES))}"
        )
    for pair in CONTRADICTIONS:
        if pair <= set(words):
            raise SourceError(f"{text}: the mode words {' and '.join(sorted(pair))} contradict each other")
    return frozenset(words)


def _map_from_modes(modes: frozenset[str], text: str) -> str | None:
    maps = {MAP_MODES[m] for m in modes if m in MAP_MODES}
    if len(maps) > 1:
        raise SourceError(f"{text}: mode names more than one storage map ({', '.join(sorted(maps))})")
    return maps.pop() if maps else None


def _is_s3_http(host: str, modes: frozenset[str]) -> bool:
    """Is an http(s) URL an S3 source? As netCDF-C decides (NCZARR_FORMATS.md section 6): its
    mode says s3 or gs3, or its host is AWS's or Google's S3 endpoint; otherwise it names a
    Zarr on a web server."""
    host = host.lower()
    return bool(modes & {"s3", "gs3"}) or host.endswith(".amazonaws.com") or host == "storage.googleapis.com"


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
    cwd = cwd or os.getcwd()
    body, params, scheme, parts = _split(text)
    modes = _modes(params, text)
    chosen = _map_from_modes(modes, text)
    if scheme and scheme not in ("file", "reference"):
        return _url_source(scheme, parts, modes, chosen, params, text, cwd)
    if scheme == "reference":  # reference://path/refs.json
        if chosen not in (None, "reference"):
            raise SourceError(f"{text}: reference:// URLs name a reference set; mode names {chosen}")
        chosen = "reference"
    return _local_source(scheme, parts, body, chosen, modes, params, text, cwd)


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


def _url_source(scheme: str, parts, modes: frozenset[str], chosen: str | None,
                params: dict[str, str], text: str, cwd: str) -> Source:
    """A source named by a URL other than file:// and reference://."""
    if scheme == "memory":
        if chosen not in (None,):
            raise SourceError(f"{text}: mode {', '.join(sorted(modes & set(MAP_MODES)))} does not fit memory://")
        return Source("memory", parts.netloc + parts.path, modes, params, text)
    if scheme in ("http", "https") and not _is_s3_http(parts.hostname or "", modes):
        return _web_source(chosen, modes, params, text)
    if scheme in ("s3", "gs3", "http", "https"):
        if chosen not in (None, "s3"):
            word = ",".join(sorted(m for m in modes if MAP_MODES.get(m) == chosen))
            raise SourceError(f"{text}: mode {word} contradicts the URL: {scheme}:// URLs are S3 sources")
        loc = parse_s3_url(text)
        return Source("s3", f"{loc.bucket}/{loc.prefix}".rstrip("/"), modes, params, text, loc)
    if scheme.startswith("icechunk"):
        return _icechunk_source(scheme, parts, modes, params, text, cwd)
    if (backend := by_scheme(scheme)) is not None and backend.location is not None:  # gs://, az://, ...
        if chosen is not None:
            raise SourceError(f"{text}: mode {chosen} does not fit a {scheme}:// URL")
        return Source(backend.name, backend.location(text, parts), modes, params, text)
    raise SourceError(f"{text}: unsupported URL scheme {scheme!r} "
                      "(use a path, file://, s3://, gs://, az://, abfs:// or https://)")


def _web_source(chosen: str | None, modes: frozenset[str], params: dict[str, str], text: str) -> Source:
    """An http(s) URL that is no S3 endpoint: Azure's blob host, else a web server's Zarr."""
    if chosen is not None:
        raise SourceError(f"{text}: mode {chosen} does not fit a web server's URL (S3 endpoints need mode=s3)")
    if (azure := azure_https_location(text)) is not None:
        return Source("azure", azure, modes, params, text)
    return Source("http", text.split("#", 1)[0].rstrip("/"), modes, params, text)


def _local_source(scheme: str, parts, body: str, chosen: str | None, modes: frozenset[str],
                  params: dict[str, str], text: str, cwd: str) -> Source:
    """A path, file:// or reference:// URL: a directory, zip archive or reference set."""
    if scheme in ("file", "reference"):
        path = unquote(parts.path)
        if parts.netloc and parts.netloc != "localhost":
            path = parts.netloc + path  # file://relative/path
    else:
        path = body
    if not path:
        raise SourceError(f"{text}: no path")
    path = os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))
    suffix_backend = {".zip": "zip", ".json": "reference", ".parq": "reference", ".parquet": "reference"}.get(
        os.path.splitext(path)[1].lower(), "directory"
    )
    backend = chosen or suffix_backend
    if backend == "s3":
        raise SourceError(f"{text}: mode s3 needs an s3:// or https:// URL, not a local path")
    return Source(backend, path, modes, params, text)


def _icechunk_source(scheme: str, parts, modes: frozenset[str], params: dict[str, str], text: str, cwd: str) -> Source:
    """``icechunk:///path/repo`` (a local repository) or ``icechunk+s3://bucket/prefix``."""
    if scheme == "icechunk+s3":
        if not parts.netloc:
            raise SourceError(f"{text}: no bucket in the URL")
        return Source("icechunk", f"s3://{parts.netloc}/{unquote(parts.path).strip('/')}".rstrip("/"), modes, params, text)
    if scheme != "icechunk":
        raise SourceError(f"{text}: unsupported URL scheme {scheme!r} (use icechunk:///path or icechunk+s3://bucket/prefix)")
    path = unquote(parts.path)
    if parts.netloc and parts.netloc != "localhost":
        path = parts.netloc + path  # icechunk://relative/path
    if not path:
        raise SourceError(f"{text}: no path")
    return Source("icechunk", os.path.normpath(os.path.join(cwd, os.path.expanduser(path))), modes, params, text)
