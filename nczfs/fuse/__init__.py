"""The FUSE side of a mount: the only package (with ``nczfs/daemon/mount.py``) that imports pyfuse3.

``ops.py`` is the thin adapter (kernel requests to :class:`nczfs.fs.Filesystem` calls, errors
to errno in one place), ``control.py`` the control file ``MOUNTPOINT/.nczfs`` it serves (and
reads, for ``nczfs stats``/``umount``: that module imports no pyfuse3), ``notifier.py`` what
tells the kernel that an inode changed without a request, ``trio_loop.py`` the trio pyfuse3's
request loop runs on. This ``__init__`` imports nothing, so that clients of the control file do
not load pyfuse3.
"""
