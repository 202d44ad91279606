"""The .nc and .nc4 files: classic and netCDF-4 files, their reads, versions, NcFilesStore."""
