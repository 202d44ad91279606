"""nczfs: a FUSE filesystem that shows NCZarr and Zarr stores as a plain directory tree.

The Python API (docs/API.md)::

    with nczfs.mounted("s3://bucket/run.zarr", "/mnt/run", read_only=True) as mnt:
        xarray.open_zarr(mnt.path)

    store = nczfs.open_view("/data/ocean.file", present="xarray")  # no FUSE: a zarr store
"""

from nczfs.toolbox.version import VERSION as __version__

__all__ = ["MountError", "MountWarning", "NczfsError", "UnmountError", "mounted", "open_view"]


def __getattr__(name: str):  # the API loads on first use: `import nczfs` stays cheap for the CLI
    # (never a name of a subpackage: `from nczfs import daemon` must import nczfs/daemon/)
    if name in ("MountError", "MountWarning", "mounted", "open_view"):
        from nczfs import api

        return getattr(api, name)
    if name == "UnmountError":
        from nczfs.daemon.umount import UnmountError

        return UnmountError
    if name == "NczfsError":
        from nczfs.toolbox.errors import NczfsError

        return NczfsError
    raise AttributeError(f"module 'nczfs' has no attribute {name!r}")
