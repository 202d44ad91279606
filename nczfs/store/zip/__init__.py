"""A zip archive as a store: an in-memory index of its members, writes staged beside it and
committed as a new archive."""
