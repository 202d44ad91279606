"""The NCZarr wrappers a mount stacks over its store, as its options ask."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from nczfs.nczarr.chunks.madechunks import MadeChunks
from nczfs.nczarr.chunks.sizebook import SizeBook
from nczfs.nczarr.consolidating import ConsolidatingStore
from nczfs.nczarr.ncfile.ncfiles import NcFilesStore, decoded_cache_bytes, made_bytes, root_name
from nczfs.nczarr.validating import ValidatingStore
from nczfs.nczarr.views.presenting import PresentingStore
from nczfs.store.base import Store

if TYPE_CHECKING:
    from nczfs.config.mountconfig import MountConfig

#: told the key of every object the NCZarr layer changes on its own (consolidated metadata, the
#: .nc files of a dataset written to), so whoever caches its size (the mount: the kernel) drops it
Notify = Callable[[str], None]


def nczarr_layer(store: Store, config: MountConfig, notify: Notify | None = None, identity: str = "") -> Store:
    """``store`` wrapped, innermost first: every dataset shown as .nc files too (``-o nc_files``),
    consolidated metadata kept in step with writes,
    ``-o present=`` (a view), then (outermost) metadata as its writer meant it, checked as
    ``-o validate=`` says. ``notify`` is told of every key the layer changes on its own. The view's
    recoded chunks and ``NAME.nc4``'s decoded ones are one cache of made chunks, their sizes kept
    in ``--cache-dir`` where there is one (``identity`` names the source there)."""
    made = _made_chunks(config, identity)
    ttl = config.effective_metadata_ttl(store.capabilities)
    if config.nc_files or config.nc4_files:
        store = NcFilesStore(store, ttl, root_name(config.source),
                             decoded_cache_bytes(config.cache_size), on_change=notify,
                             classic=config.nc_files, netcdf4=config.nc4_files, plugins=config.nc4_plugins,
                             transcode=config.transcode, made=made)
    if not config.read_only:
        store = ConsolidatingStore(store, on_change=notify)
    if config.present != "as-stored":
        store = PresentingStore(store, config.present, ttl, config.transcode, made=made)
    if not config.read_only:
        store = ValidatingStore(store, config.validate)
    return store


def _made_chunks(config: MountConfig, identity: str) -> MadeChunks | None:
    """The mount's one cache of made chunks, where a view or ``NAME.nc4`` makes chunks (None:
    neither does), the sizes also in ``--cache-dir``: with ``NAME.nc4``, the decoded chunks'
    quarter of ``--cache-size`` (half of it beside the classic files' decoded chunks); a view's
    alone, a quarter of what ``--cache-size`` gives stored blocks, at least 16 MiB."""
    if config.present == "as-stored" and not config.nc4_files:
        return None
    if config.nc4_files:
        limit = made_bytes(decoded_cache_bytes(config.cache_size), config.nc_files)
    else:
        from nczfs.toolbox.budgets import default_cache_size

        cache = default_cache_size() if config.cache_size is None else config.cache_size
        limit = max(16 * 1024 * 1024, cache // 4)
    return MadeChunks(limit, SizeBook(config.cache_dir, identity) if config.cache_dir else None)
