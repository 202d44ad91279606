"""The NCZarr wrappers a mount stacks over its store, as its options ask."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nczfs.nczarr.presenting import PresentingStore
from nczfs.nczarr.validating import ValidatingStore
from nczfs.store.base import Store

if TYPE_CHECKING:
    from nczfs.config import MountConfig


def nczarr_layer(store: Store, config: MountConfig) -> Store:
    """``store`` wrapped for ``-o present=`` (a view) and ``-o validate=`` (checked outermost,
    on what the client wrote): the filesystem's store."""
    if config.present != "as-stored":
        store = PresentingStore(store, config.present, config.metadata_ttl)
    if config.validate != "off" and not config.read_only:
        store = ValidatingStore(store, config.validate)
    return store
