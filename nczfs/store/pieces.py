"""The data of ``set_file``: a file's bytes read in bounded pieces, copied with its holes kept."""

from __future__ import annotations

import errno
import os
from typing import BinaryIO, Iterator

from nczfs.toolbox.errors import BackendError


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


def copy_sparse(key: str, f: BinaryIO, out: BinaryIO, size: int) -> None:
    """Copy ``size`` bytes of ``f`` (from its position) to ``out``; where ``f`` is a file with
    holes (SEEK_DATA), only its data is copied and the holes stay holes in ``out``."""
    try:
        fd = f.fileno()
        base = f.tell()
        os.lseek(fd, base, os.SEEK_DATA)
    except (OSError, AttributeError, ValueError) as exc:
        if isinstance(exc, OSError) and exc.errno == errno.ENXIO:  # nothing but a hole up to the end
            out.flush()
            os.ftruncate(out.fileno(), size)
            return
        out.writelines(file_pieces(key, f, size))
        return
    pos = 0
    while pos < size:
        try:
            data_at = os.lseek(fd, base + pos, os.SEEK_DATA) - base
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            data_at = size
        data_at = min(data_at, size)
        if data_at >= size:
            break
        try:
            hole_at = min(os.lseek(fd, base + data_at, os.SEEK_HOLE) - base, size)
        except OSError:
            hole_at = size
        f.seek(base + data_at)
        out.seek(data_at)
        out.writelines(file_pieces(key, f, hole_at - data_at))
        pos = hole_at
    out.flush()
    os.ftruncate(out.fileno(), size)
    end = os.fstat(fd).st_size - base
    if end < size:
        raise BackendError(f"{key!r}: the data to store ends after {end} of {size} bytes")
