"""Command line: ``nczfs mount SOURCE MOUNTPOINT``, ``nczfs umount MOUNTPOINT``, ... (dispatch.py).

Exit codes: 0 success, 1 failure at run time, 2 bad arguments (SOURCE, MOUNTPOINT, options).
No FS logic lives here.
"""

from nczfs.cli.dispatch import main

__all__ = ["main"]
