"""A local directory tree as a store (netCDF-C's ``file`` map): one file per key, atomic
replacing writes, real attributes, links and special files, paths of any length."""
