"""A dict-backed store (``memory://NAME``): the reference implementation and the tests' double."""
