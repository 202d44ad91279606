"""Store keys as an object store's paths below a prefix (``<prefix>/<key>``), checked as the
service takes them: UTF-8, no backslash, at most :data:`MAX_KEY_BYTES` bytes."""

from __future__ import annotations

from nczfs.toolbox.errors import InvalidKey, NameTooLong

MAX_KEY_BYTES = 1024


class ObjectPaths:
    """The paths of ``service`` (a name for messages: S3, GCS, Azure) below ``prefix``."""

    def __init__(self, prefix: str, service: str):
        self.prefix = prefix.strip("/")
        self.service = service

    def full(self, key: str) -> str:
        """The object's path of store key ``key``; InvalidKey or NameTooLong where the service
        would refuse it."""
        full = f"{self.prefix}/{key}" if self.prefix else key
        try:
            raw = full.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidKey(key, f"{self.service} keys are UTF-8; this name is not") from None
        if "\\" in key:  # S3 gateways over a filer (SeaweedFS) turn it into "/"
            raise InvalidKey(key, f"a backslash in an object key is refused (not portable between {self.service} servers)")
        if len(raw) > MAX_KEY_BYTES:
            raise NameTooLong(f"{key!r}: {self.service} keys are at most {MAX_KEY_BYTES} bytes")
        return full

    def dir_path(self, prefix: str) -> str | None:
        """The path whose children are directory ``prefix``'s (None: the bucket's root)."""
        full = f"{self.prefix}/{prefix}" if self.prefix and prefix else (prefix or self.prefix)
        return full or None

    @staticmethod
    def rel(path: str, base: str | None) -> str:
        """``path`` relative to the directory path ``base`` (None: the bucket's root)."""
        return path[len(base) + 1 :] if base else path
