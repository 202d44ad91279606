"""UsageError: what the user asked cannot be done as asked (exit code 2)."""


class UsageError(Exception):
    """A one-line message for the user; exit code 2."""
