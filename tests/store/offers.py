"""Which optional operations each backend has (the async forms of :data:`nczfs.store.optional.OPTIONAL`,
and ``ReportsProblems``): one row a backend, asked of the backend and of every layer over it by
``tests/store/test_contract.py`` and by each backend's conformance class (``optional``)."""

from __future__ import annotations

from nczfs.cache.localahead import SmallFilesAhead
from nczfs.cache.store import CachingStore
from nczfs.nczarr.consolidating import ConsolidatingStore
from nczfs.nczarr.ncfile.ncfiles import NcFilesStore
from nczfs.store.directory.store import DirectoryStore
from nczfs.store.icechunk.store import IcechunkStore
from nczfs.store.memory.store import MemoryStore
from nczfs.store.objstore.cloudwrites import CloudStore
from nczfs.store.objstore.store import S3Store
from nczfs.store.objstore.webzarr import WebZarrStore
from nczfs.store.optional import (OPTIONAL, Counts, Describes, ForgetsDirectories, HardLinks, KeepsDirectories, KeepsMeta,
                                  LimitsKeys, MakesNodes, RenamesDirectories, ReportsProblems, ReportsSpace,
                                  ReadsSmallFiles, Refreshes, SendsMetaWithWrites, TellsDirectories, Truncates)
from nczfs.store.reference.store import ReferenceStore
from nczfs.store.threads import ThreadedStore
from nczfs.store.wrapper import WrapperStore
from nczfs.store.zip.store import ZipStore

#: every backend nczfs ships -> the optional operations it has
OFFERS: dict[type, frozenset[type]] = {
    MemoryStore: frozenset({KeepsMeta, MakesNodes, RenamesDirectories, Describes}),
    DirectoryStore: frozenset({KeepsMeta, MakesNodes, HardLinks, Truncates, KeepsDirectories, RenamesDirectories,
                               TellsDirectories, ReportsSpace, Describes, ReadsSmallFiles}),
    ZipStore: frozenset({KeepsMeta, MakesNodes, KeepsDirectories, RenamesDirectories, TellsDirectories, ReportsSpace,
                         Counts, Describes, ReportsProblems}),
    S3Store: frozenset({KeepsMeta, SendsMetaWithWrites, MakesNodes, RenamesDirectories, ForgetsDirectories,
                        TellsDirectories, LimitsKeys, Counts, Describes}),
    CloudStore: frozenset({RenamesDirectories, ForgetsDirectories, TellsDirectories, LimitsKeys, Counts, Describes}),
    WebZarrStore: frozenset({TellsDirectories, Counts, Describes}),
    ReferenceStore: frozenset({RenamesDirectories, TellsDirectories, Describes, ReportsProblems}),
    IcechunkStore: frozenset({RenamesDirectories, TellsDirectories, Counts, Describes}),
}

#: the optional operations a layer has whatever the store below has (it counts, or keeps, itself)
ANSWERED_BY_THE_LAYER: dict[type, frozenset[type]] = {
    ThreadedStore: frozenset({Counts}), CachingStore: frozenset({Counts, Refreshes, ForgetsDirectories}),
    ConsolidatingStore: frozenset({Counts}), NcFilesStore: frozenset({Counts}),
    SmallFilesAhead: frozenset({Counts, Refreshes})}


def assert_each_layer_offers(top: object, row: frozenset[type]) -> None:
    """Each layer of ``top`` (ThreadedStore and the wrappers over it) has exactly the optional
    operations of the layer below (the backend's: ``row``) and those it answers itself."""
    layers = [top]
    while isinstance(layers[-1], (ThreadedStore, WrapperStore)):
        layers.append(layers[-1].below)
    has = set(row)
    for layer in reversed(layers[:-1]):
        has |= next((v for cls, v in ANSWERED_BY_THE_LAYER.items() if isinstance(layer, cls)), frozenset())
        for protocol in OPTIONAL:
            assert isinstance(layer, protocol) is (protocol in has), (type(layer).__name__, protocol.__name__)
