"""Chunks as views and files show them: shard indexes, recoding, v3 arrays in v2 terms."""
