"""The default bounds on what a mount holds: memory from the machine's RAM (the read cache, the
write memory, the decoded and recoded chunks a quarter of it), and a cache directory's bytes.

A toolbox module every layer may read (tests/test_layers.py): the cache, the NCZarr layer and the
filesystem each size their part from here, and the CLI checks a bound against the RAM.
"""

from __future__ import annotations

import os

MiB = 1024 * 1024

#: --cache-dir-size when none is given
DEFAULT_CACHE_DIR_SIZE = 10 * 1024**3


def physical_memory() -> int:
    """The machine's RAM in bytes (0: unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def default_cache_size() -> int:
    """An eighth of the machine's RAM, between 64 MiB and 1 GiB."""
    ram = physical_memory() or 8 * 1024 * MiB
    return max(64 * MiB, min(1024 * MiB, ram // 8))
