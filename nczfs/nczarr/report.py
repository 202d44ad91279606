"""What ``nczfs inspect`` and ``nczfs validate`` report of a store (the commands: cli/inspecting.py):
the dataset as a CDL header with its flavor, problems and the .nc files a mount shows; every
problem of every metadata object and of the dataset as a whole."""

from __future__ import annotations

import os

from nczfs.toolbox.errors import NczfsError
from nczfs.nczarr.inspected import as_shown
from nczfs.nczarr.metadata import jsontext
from nczfs.nczarr.metadata.cdl import to_cdl
from nczfs.nczarr.metadata.read import StoreObjects, read_dataset
from nczfs.nczarr.metadata.validate import check_object, is_metadata_key
from nczfs.config.source import Source
from nczfs.store.base import SyncStore
from nczfs.store import optional


def dataset_name(source: Source) -> str:
    base = os.path.basename(source.location.rstrip("/")) or "dataset"
    return base.split(".")[0] or "dataset"


def nc_file_lines(ds, source: Source, objects: StoreObjects) -> list[str]:
    """The .nc files ``-o nc_files`` shows for the dataset (at a mount's root), and what each
    leaves out (variable-length strings' chunks scanned for their width, as the mount does)."""
    import trio

    from nczfs.nczarr.chunks.chunkfacts import ChunkFacts
    from nczfs.nczarr.ncfile.classicfile import file_names, group_file, v3_encodings
    from nczfs.nczarr.ncfile.ncfiles import root_name
    from nczfs.store.threads import ThreadedStore

    out = []
    encodings = v3_encodings(ds, objects.get)
    facts = trio.run(ChunkFacts(ThreadedStore(objects.store)).of, "", ds, False)
    for name, group in file_names(ds, root_name(source)).items():
        gf = group_file(ds, group, "", encodings, facts)
        out.append(f"// nc file: {name} ({gf.format}, {gf.layout.size} bytes)")
        out.extend(f"// nc file {name} leaves out {why}" for why in gf.left_out)
    return out


def nc4_file_lines(source: Source, objects: StoreObjects) -> list[str]:
    """The .nc4 file ``-o nc_files=netcdf4`` shows for the dataset, and what it leaves out."""
    import trio

    from nczfs.nczarr.ncfile.ncfiles import root_name
    from nczfs.nczarr.ncfile.ncversions import build_files
    from nczfs.store.threads import ThreadedStore

    from nczfs.nczarr.chunks.chunkfacts import ChunkFacts

    store = ThreadedStore(objects.store)
    files = trio.run(lambda: build_files(store, "", root_name(source), set(), ChunkFacts(store), classic=False,
                                         netcdf4=True))
    out = []
    for name, v in files.items():
        out.append(f"// nc4 file: {name} (netCDF-4, {v.file.layout.size} bytes)")
        out.extend(f"// nc4 file {name} leaves out {why}" for why in v.file.left_out)
    return out


def inspect_store(store: SyncStore, source: Source) -> str:
    objects = StoreObjects(store)
    ds = read_dataset(objects)
    problems = [*optional.problems(store), *ds.problems]
    lines = [to_cdl(as_shown(ds), dataset_name(source)).rstrip("\n")]
    lines.append(f"// flavor: {ds.flavor}{' (consolidated .zmetadata)' if ds.consolidated else ''}")
    lines.extend(f"// problem: {p}" for p in problems)
    lines.extend(f"// note: {n}" for n in ds.notes)
    lines.extend(nc_file_lines(ds, source, objects))
    lines.extend(nc4_file_lines(source, objects))
    return "\n".join(lines) + "\n"


def store_problems(store: SyncStore, notes: list[str] | None = None) -> list[str]:
    """Every problem of a whole store: each metadata object alone, then the dataset as a whole.

    What is valid but not readable by netCDF-C goes to ``notes``.
    """
    problems: list[str] = optional.problems(store)
    keys = store.list_prefix("")
    for key in keys:
        if is_metadata_key(key):
            problems.extend(f"{key}: {reason}" for reason in check_object(key, store.get(key)))
    try:
        ds = read_dataset(StoreObjects(store))
    except NczfsError as exc:
        return problems + [str(exc)]
    problems.extend(p for p in ds.problems if p not in problems)
    if notes is not None:
        notes.extend(ds.notes)
    if ".zmetadata" in keys:
        problems.extend(stale_consolidated(store, keys))
    return problems


def stale_consolidated(store: SyncStore, keys: list[str]) -> list[str]:
    try:
        meta = jsontext.loads(store.get(".zmetadata")).get("metadata")
    except (ValueError, AttributeError):
        return []
    if not isinstance(meta, dict):
        return []
    out = []
    for key in keys:
        name = key.rpartition("/")[2]
        if name not in (".zgroup", ".zarray", ".zattrs"):
            continue
        try:
            stored = jsontext.loads(store.get(key))
        except ValueError:
            continue
        if key not in meta:
            out.append(f".zmetadata: has no entry for {key}")
        elif meta[key] != stored:
            out.append(f".zmetadata: the entry for {key} differs from the stored object (stale)")
    out.extend(f".zmetadata: entry {k} names no stored object" for k in meta if k not in keys)
    return out
