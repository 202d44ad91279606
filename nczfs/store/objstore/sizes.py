"""How an object store's writes and copies are cut into parts."""

from __future__ import annotations

from dataclasses import dataclass

#: CopyObject copies up to 5 GiB; larger objects need a multipart copy
MAX_SINGLE_COPY = 5 * 1024**3


@dataclass
class PartSizes:
    """Objects from ``multipart_threshold`` bytes go up in parts of ``part_size`` bytes, up to
    ``max_concurrency`` requests at once (ThreadedStore sizes its limiter from it too); server-side
    copies above ``copy_threshold`` bytes are made in parts (S3's UploadPartCopy). One record,
    shared by a store and its parts: a change (a test's smaller sizes) reaches them all."""

    multipart_threshold: int = 32 * 1024**2
    part_size: int = 8 * 1024**2
    max_concurrency: int = 16
    copy_threshold: int = MAX_SINGLE_COPY
