"""``-o metrics=ADDR:PORT``: every counter ``nczfs stats`` shows, served to Prometheus.

The HTTP server (prometheus-client's, in its own thread) is bound before the mount is made, so
an address in use refuses the mount. A scrape asks the trio thread for the counters (the same
ones the control file shows, fuse/control.py) and names each as Prometheus expects: ``nczfs_``,
``_total`` for counters, the unit (``_bytes``) at the end; FUSE requests are one family, labelled
by operation. The mount's own counters are described here; a backend's, by the module of its
package that counts them (:func:`declare`, called when it is imported), so this module names none.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

from nczfs.toolbox.errors import BadValue, option_error

#: counter name -> (kind, unit, help): the mount's own, and each backend's (:func:`declare`);
#: the counters of a :class:`Family` are described by it instead
HELP: dict[str, tuple[str, str, str]] = {
    "cache.hits": ("counter", "", "Reads served from object data already in the memory cache"),
    "cache.misses": ("counter", "", "Reads that had to fetch a block of object data from the store"),
    "cache.coalesced": ("counter", "", "Reads that joined a fetch of the same block already under way"),
    "cache.failures-repeated": ("counter", "", "Reads that got the failure of a fetch they had joined"),
    "cache.prefetches": ("counter", "", "Blocks fetched ahead of a reader walking a large object"),
    "cache.sibling-prefetches": ("counter", "", "Objects of a directory fetched ahead of a reader walking it (-o prefetch_siblings)"),
    "cache.metadata-prefetches": ("counter", "", "Zarr/NCZarr metadata objects fetched together with one being read"),
    "cache.part-refetches": ("counter", "", "Parts of delivered blocks the kernel dropped, fetched again alone"),
    "cache.lookups-by-get": ("counter", "", "Lookups of small objects confirmed by fetching them instead of listing again"),
    "cache.bytes-fetched": ("counter", "bytes", "Object data fetched from the store"),
    "cache.bytes-served": ("counter", "bytes", "Object data served to readers from the cache or fresh fetches"),
    "cache.bytes-held": ("gauge", "bytes", "Object data the memory cache holds"),
    "cache.bytes-held-delivered": ("gauge", "bytes", "Cached blocks already delivered to the kernel's page cache"),
    "cache.bytes-held-written": ("gauge", "bytes", "Data written through the mount kept for reading back"),
    "cache.bytes-limit": ("gauge", "bytes", "The memory cache's bound (--cache-size)"),
    "meta.hits": ("counter", "", "Attribute, listing and missing-name lookups answered from the metadata cache"),
    "meta.misses": ("counter", "", "Attribute, listing and missing-name lookups that asked the store"),
    "meta.coalesced": ("counter", "", "Metadata lookups that joined one already asking the store"),
    "meta.tree-listings": ("counter", "", "Dataset trees listed in one request (-o list_tree_keys)"),
    "errors": ("counter", "", "Store requests that failed (reads, listings, writes)"),
    "spare-slots-taken": ("counter", "", "Store calls that took a spare worker slot after waiting for one"),
    "store.worker-calls": ("counter", "", "Store calls sent to a worker thread"),
    "ahead.lookups": ("counter", "", "Lookups of a local directory's small files answered from a burst read ahead"),
    "ahead.reads": ("counter", "", "Reads of a local directory's small files answered from a burst read ahead"),
    "ahead.bursts": ("counter", "", "Bursts of a local directory's small files read ahead in one worker call"),
    "ahead.files": ("counter", "", "Small files of a local directory read ahead (entries and bytes)"),
    "ahead.listings": ("counter", "", "Local directories listed for a reader walking their small files"),
    "ahead.errors": ("counter", "", "Listings or bursts read ahead that failed (the reader's own calls report why)"),
    "diskcache.hits": ("counter", "", "Blocks read from the cache directory (--cache-dir)"),
    "diskcache.misses": ("counter", "", "Blocks looked for in the cache directory and not found"),
    "diskcache.writes": ("counter", "", "Blocks written to the cache directory"),
    "diskcache.evictions": ("counter", "", "Entries deleted from the cache directory to stay within its bound"),
    "diskcache.corrupt": ("counter", "", "Cache directory entries whose checksum or length was wrong (deleted)"),
    "diskcache.skipped": ("counter", "", "Blocks not written to the cache directory (too many writes waiting, or too large)"),
    "diskcache.errors": ("counter", "", "Cache directory operations that failed (disk full, I/O error, permissions)"),
    "diskcache.bytes-served": ("counter", "bytes", "Data read from the cache directory"),
    "diskcache.bytes-written": ("counter", "bytes", "Data written to the cache directory"),
    "diskcache.bytes-held": ("gauge", "bytes", "Data the cache directory holds (all mounts sharing it)"),
    "diskcache.bytes-limit": ("gauge", "bytes", "The cache directory's bound (--cache-dir-size)"),
    "write.bytes-in-memory": ("gauge", "bytes", "Pending writes held in memory"),
    "write.bytes-in-memory-peak": ("gauge", "bytes", "The most pending writes held in memory at once"),
    "write.memory-limit": ("gauge", "bytes", "The bound of pending writes in memory (--write-memory)"),
    "write.bytes-pending": ("gauge", "bytes", "Written data not yet stored (memory and temp files)"),
    "write.spilled-files": ("counter", "", "Files whose pending writes moved to a temp file"),
    "write.closes-not-storing": ("counter", "", "Closes that stored nothing (not the writer's descriptor)"),
    "write.conflicts": ("counter", "", "Writes refused because another client changed the object first (ESTALE; data kept beside)"),
    "write.conflicts-not-kept": ("counter", "", "Refused writes whose data could not be written beside either"),
    "write.overwrite-checked": ("gauge", "", "1: a write replaces only the object version it started from; 0: the last writer wins"),
    "write.deletes-checked": ("gauge", "", "1: an unlink removes only the object version the mount saw; 0: whatever is there"),
    "consolidated.merged-again": ("counter", "", "Consolidated metadata updates read and merged again after another writer's"),
    "consolidated.lost": ("counter", "", "Consolidated metadata updates given up after every attempt (the write failed: ESTALE)"),
    "write.early-uploads": ("counter", "", "Multipart uploads started while a file was written"),
    "write.early-uploads-completed": ("counter", "", "Multipart uploads started early that completed"),
    "write.early-uploads-dropped": ("counter", "", "Multipart uploads started early that were aborted"),
    "write.early-parts": ("counter", "", "Parts sent by multipart uploads started early"),
    "fuse.next-request-waiting": ("counter", "", "FUSE requests read without waiting (one was already queued)"),
    "fuse.next-request-waits": ("counter", "", "Times the daemon waited for the next FUSE request"),
    "fuse.read-lock-handovers": ("counter", "", "Waits for the next FUSE request handed to another task (the last one waited on a fetch)"),
    "fuse.pages-stored": ("counter", "", "Small files put whole in the kernel's page cache at their open (no READ follows)"),
    "fuse.pages-store-failed": ("counter", "", "Small files the kernel refused to take in its page cache at their open"),
    "python.gc-frozen": ("gauge", "", "Objects the daemon made at start, left out of the cycle collector's rounds (gc.freeze)"),
}


@dataclass(frozen=True)
class Family:
    """Counters counted by operation, one Prometheus counter family labelled ``operation``:
    ``operation(key)`` is a counter's operation, None for a counter not of this family."""

    name: str
    doc: str
    operation: Callable[[str], str | None]


#: the families by name, tried in this order after HELP: the mount's own, and each backend's (declare())
FAMILIES: dict[str, Family] = {
    "nczfs_fuse_requests": Family("nczfs_fuse_requests", "FUSE requests the daemon received, by operation",
                                  lambda key: key.removeprefix("fuse.") if key.startswith("fuse.") else None),
}


def declare(counters: Mapping[str, tuple[str, str, str]], *families: Family) -> None:
    """A backend's own counters (name -> (kind, unit, help), as in HELP) and families: called by
    the module of its package that counts them, when it is imported (before it counts any)."""
    HELP.update(counters)
    for family in families:
        FAMILIES.setdefault(family.name, family)


def describe(key: str) -> tuple[str, dict[str, str], str, str, str]:
    """``(family name, labels, kind, unit, help)`` of one counter."""
    if key in HELP:
        kind, unit, doc = HELP[key]
        words = [w for w in re.split(r"[.\-]", key) if w != unit]
        return "nczfs_" + "_".join(words) + (f"_{unit}" if unit else ""), {}, kind, unit, doc
    for family in FAMILIES.values():
        operation = family.operation(key)
        if operation is not None:
            return family.name, {"operation": operation}, "counter", "", family.doc
    name = "nczfs_" + re.sub(r"[^a-zA-Z0-9_]", "_", key)
    return name, {}, "gauge", "", f"nczfs counter {key} (no description yet)"


def families(counters: dict[str, int], about: dict[str, str]) -> list:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    out: dict[str, object] = {}
    info = GaugeMetricFamily("nczfs_info", "The mount this daemon serves", labels=sorted(about))
    info.add_metric([about[k] for k in sorted(about)], 1)
    out["nczfs_info"] = info
    for key in sorted(counters):
        name, labels, kind, unit, doc = describe(key)
        fam = out.get(name)
        if fam is None:
            cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            fam = out[name] = cls(name, doc, labels=sorted(labels), unit=unit)
        fam.add_metric([labels[k] for k in sorted(labels)], counters[key])  # type: ignore[attr-defined]  # a Counter- or GaugeMetricFamily
    return list(out.values())


def parse_address(value: str) -> tuple[str, int]:
    """``ADDR:PORT``, ``[V6ADDR]:PORT`` or ``PORT`` (127.0.0.1); ``:PORT`` is every address."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host = "127.0.0.1"
    elif not host:
        host = "0.0.0.0"
    host = host.removeprefix("[").removesuffix("]")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise BadValue("not ADDR:PORT (e.g. 127.0.0.1:9100)")
    return host, int(port)


class Exporter:
    """The metrics HTTP server of one daemon; ``source`` gives the counters (None: not yet)."""

    def __init__(self, address: str, about: dict[str, str]):
        from prometheus_client import CollectorRegistry, start_http_server

        self.source: Callable[[], dict[str, int]] | None = None
        self.about = about
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        host, port = parse_address(address)
        try:
            self.server, self.thread = start_http_server(port, host, registry=registry)
        except OSError as exc:
            raise option_error("metrics", address, f"cannot listen there ({exc.strerror or exc})") from None
        self.address = f"{host}:{self.server.server_port}" if ":" not in host else f"[{host}]:{self.server.server_port}"

    def collect(self) -> Iterator:
        source = self.source
        yield from families(source() if source is not None else {}, self.about)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def trio_counters(fn: Callable[[], dict[str, int]], token) -> Callable[[], dict[str, int]]:
    """``fn`` run on the trio thread (where the counters change) from the server's thread."""
    import trio

    lock = threading.Lock()

    def call() -> dict[str, int]:
        with lock:
            try:
                return trio.from_thread.run_sync(fn, trio_token=token)
            except trio.RunFinishedError:
                return {}

    return call
