"""The SOURCE forms of Icechunk: ``icechunk:///path/repo`` (a local repository) or
``icechunk+s3://bucket/prefix``."""

from __future__ import annotations

from urllib.parse import unquote

from nczfs.toolbox.errors import SourceError
from nczfs.store.opening import Given, Located


def locate_icechunk(given: Given) -> Located:
    """A local repository's absolute path, or ``s3://bucket/prefix``."""
    parts, text = given.parts, given.text
    assert parts is not None
    if given.scheme == "icechunk+s3":
        if not parts.netloc:
            raise SourceError(f"{text}: no bucket in the URL")
        return Located(f"s3://{parts.netloc}/{unquote(parts.path).strip('/')}".rstrip("/"))
    return Located(given.local_path(), local=True)  # icechunk:///abs, icechunk://relative/path
