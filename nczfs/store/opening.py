"""What a backend is given by the scheme registry (:mod:`nczfs.store.registry`): a SOURCE split
by netCDF-C's rules to locate (:class:`Given`, answered with a :class:`Located`), and a mount to
open (:class:`Opening`: the SOURCE, the mount point, read-only, the values of its ``-o`` rows)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol
from urllib.parse import SplitResult, unquote

from nczfs.toolbox.errors import SourceError


class Named(Protocol):
    """What a backend reads of a parsed SOURCE (nczfs.config.source.Source)."""

    @property
    def backend(self) -> str: ...

    @property
    def location(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def params(self) -> dict[str, str]: ...

    @property
    def parsed(self) -> Any:
        """The backend's own parse of its location (S3: an S3Location), or None."""


@dataclass(frozen=True)
class Opening:
    """What a backend is opened with: the SOURCE, the mount point, whether the mount is read-only
    and the values its ``-o`` rows (and the flags alike) gave, by name."""

    source: Named
    mountpoint: str = ""
    read_only: bool = False
    #: each checked by its row's rule as it was parsed
    options: Mapping[str, Any] = field(default_factory=dict)


class Opens(Protocol):
    """A mount's description that says what to open (nczfs.config.mountconfig.MountConfig)."""

    @property
    def source(self) -> Named: ...

    def opening(self) -> Opening: ...


@dataclass(frozen=True)
class Given:
    """A SOURCE as nczfs/config/source.py split it by netCDF-C's rules, for a backend to locate."""

    #: SOURCE as given
    text: str
    #: its URL scheme, lower case ("" for a path)
    scheme: str
    #: urlsplit's parts of a URL (None for a path)
    parts: SplitResult | None
    #: a local path made absolute (a path, file:// or a local backend's own scheme), else ""
    path: str
    modes: frozenset[str]
    #: the backend the ``#mode=`` words chose (they may not fit: the backend may say so), the words
    chosen: str | None
    words: str
    cwd: str

    def local_path(self, body: str = "") -> str:
        """The local path the URL names (``file:///abs``, ``SCHEME://relative/path``; the host
        ``localhost`` is none), else the path ``body``, made absolute against :attr:`cwd` (``~``
        expanded, normalised); SourceError if there is none."""
        parts = self.parts
        path = body
        if parts is not None:
            path = unquote(parts.path)
            if parts.netloc and parts.netloc != "localhost":
                path = parts.netloc + path  # SCHEME://relative/path
        if not path:
            raise SourceError(f"{self.text}: no path")
        return os.path.normpath(os.path.join(self.cwd, os.path.expanduser(path)))


@dataclass(frozen=True)
class Located:
    """Where a backend's SOURCE is: its location, its own parse of it, whether it is a local path."""

    location: str
    parsed: Any = None
    local: bool = False
