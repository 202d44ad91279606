"""The daemon's malloc tuning (nczfs.daemon.mount.reuse_freed_blocks), measured in page faults.

A cache turning over 8 MiB blocks (fetched by worker threads, dropped oldest first by the
main thread) should fault each page of its few live blocks once, not most pages of every
block. Page-fault counts do not depend on the machine's speed: this is no timing test.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from nczfs.fuse.control import read_control
from tests.helpers import DirectoryBackend, mounted

TURNOVER = r"""
import sys
from nczfs.daemon.mount import reuse_freed_blocks

if sys.argv[1] == "on":
    reuse_freed_blocks()

def faults():
    return int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[7])

from concurrent.futures import ThreadPoolExecutor

ring = []
before = faults()
with ThreadPoolExecutor(8) as pool:  # fetched in worker threads, dropped by the main thread
    for i in range(0, 64, 4):  # 512 MiB through a ring of 8 blocks
        ring.extend(pool.map(lambda j: bytes([j % 256]) * (8 << 20), range(i, i + 4)))  # every page touched
        del ring[:-8]
print(faults() - before)
"""

PAGES = 64 * (8 << 20) // 4096


def _faults(mode: str) -> int:
    res = subprocess.run([sys.executable, "-c", TURNOVER, mode], capture_output=True, text=True, check=True)
    return int(res.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_blocks_are_reused_not_faulted_in_again():
    # seen: 74,000-94,000 faults untuned (fresh mappings, an arena per thread), 24,590 tuned:
    # the 12 blocks live at most (8 kept, 4 being fetched), each page once
    assert _faults("off") > PAGES // 2
    assert _faults("on") < PAGES // 4


def test_what_the_daemon_made_at_start_is_left_out_of_the_cycle_collectors_rounds(tmp_path):
    """The mounted daemon froze what it made at start (its modules, the store stack): the
    collector's full rounds go through what it makes since only."""
    backing = DirectoryBackend(tmp_path / "backing")
    backing.put("a", b"a")
    with mounted(backing, tmp_path / "mnt") as m:
        assert (m.path / "a").read_bytes() == b"a"
        frozen = read_control(str(m.path))["counters"]["python.gc-frozen"]
    assert frozen > 10_000  # nczfs's modules and the store stack; 0 when the daemon froze nothing
