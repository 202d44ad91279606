"""A writer of HDF5 files (netCDF-4 files are HDF5): their metadata computed from a description
of groups and chunked datasets, their chunks left where the caller's bytes are. Pure computation.
"""
