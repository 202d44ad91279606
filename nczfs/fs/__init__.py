"""The filesystem logic: POSIX semantics over a Store, as plain async methods (no pyfuse3).

``filesystem.Filesystem`` is what the FUSE adapter (``nczfs/fuse/ops.py``) calls; the other
modules each hold one mechanism of it (docs/DEVELOPMENT.md lists them).
"""
