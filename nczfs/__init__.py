"""nczfs: a FUSE filesystem that shows NCZarr and Zarr stores as a plain directory tree."""

__version__ = "0.1.0"
