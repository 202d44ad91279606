"""Names that mean something to the filesystem.

Temp names that clients write and then rename onto the real name: their upload waits for the
rename (one PUT under the final key), and where the name tells the final one, their data is sent
ahead under it (staging.py). And the name in the root that the FUSE adapter serves itself (the
control file, fuse/control.py): never listed.
"""

from __future__ import annotations

import re

from nczfs.store.keys import join

#: the control file's name in the mount root: shadows a store object of that name, never listed
CONTROL_NAME = ".nczfs"

#: zarr-python's ``<key>.<uuid>.partial`` and rsync's ``.<name>.XXXXXX``
TEMP_NAME = re.compile(r"(\.partial$)|(^\.[^/]+\.[A-Za-z0-9]{6}$)")

#: temp names that tell the final one: zarr-python's ``<name>.<uuid4 hex>.partial``, rsync's ``.<name>.XXXXXX``
FINAL_NAME = re.compile(r"(?:(.+)\.[0-9a-f]{32}\.partial)|(?:\.(.+)\.[A-Za-z0-9]{6})")


def is_temp_name(path: str) -> bool:
    return TEMP_NAME.search(path.rpartition("/")[2]) is not None


def final_name(path: str) -> str | None:
    """The key a temp file will be renamed to, where its name says (else None)."""
    parent, _, name = path.rpartition("/")
    m = FINAL_NAME.fullmatch(name)
    if m is None:
        return None
    return join(parent, m[1] or m[2])
