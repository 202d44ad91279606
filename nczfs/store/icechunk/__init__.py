"""Icechunk repositories: a branch, tag or snapshot as a store, its history under ``.icechunk/``."""
