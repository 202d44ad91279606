"""A kerchunk/fsspec reference set (JSON or parquet) as a read-only store."""
