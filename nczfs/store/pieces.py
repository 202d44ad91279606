"""The data of ``set_file``: a file's bytes read in bounded pieces."""

from __future__ import annotations

from typing import BinaryIO, Iterator

from nczfs.errors import BackendError


def file_pieces(key: str, f: BinaryIO, size: int, piece: int = 8 * 1024 * 1024) -> Iterator[bytes]:
    """``size`` bytes of ``f`` from its position, at most ``piece`` bytes at a time (set_file of
    the zip and directory backends); BackendError naming ``key`` if ``f`` ends sooner."""
    left = size
    while left > 0:
        data = f.read(min(piece, left))
        if not data:
            raise BackendError(f"{key!r}: the data to store ends after {size - left} of {size} bytes")
        left -= len(data)
        yield data

