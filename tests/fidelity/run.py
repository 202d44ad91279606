"""Running the matrix over mounts: datasets written once, read directly and through each view on a
directory mount and an S3 (SeaweedFS) mount. Used by the fidelity tests (a subset) and by
``bench/bench_fidelity.py`` (netCDF-C's whole CDL corpus, every view and reader)."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterator

from tests.fidelity.matrix import Job, Matrix
from tests.fidelity.readers import OWN_VIEW, READERS
from tests.fidelity.writers import CDL_DIR, WRITERS, write_cdl, zarr_features
from tests.helpers import mounted

#: reads no reader's data model can express, each named in docs/SEMANTICS.md with the reason:
#: (dataset, reader) -> why
EXCEPTIONS = {
    ("ncdump_cdl_ref_niltest", "xarray"): "a variable with the same dimension twice (xarray refuses it)",
    ("ncdump_ref_tst_group_data", "xarray"): "one name for dimensions of different lengths in a group's variables",
    ("ncdump_ref_tst_group_data", "wheel"): "a variable using same-named dimensions of several groups (4.10.1 resolves them by name)",
    ("ncdump_ref_tst_group_data", "ncdump"): "a variable using same-named dimensions of several groups (4.9.0's ncgen cannot read the print back)",
    ("ncdump_ref_tst_string_data", "ncdump"): "a string holding a newline, shown as chars",
}


def write_corpus(out: Path, cdls: list[str] | None = None, zarr: bool = True,
                 cdl_dir: Path = CDL_DIR) -> dict[str, list[tuple[str, str]]]:
    """Datasets under ``out/stores``: {corpus/writer: [(name, reference)]} (reference: see Job)."""
    stores = out / "stores"
    found: dict[str, list[tuple[str, str]]] = {w: [] for w in WRITERS}
    for cdl in sorted(cdl_dir.glob("*.cdl")):
        if cdls is not None and cdl.stem not in cdls:
            continue
        done = write_cdl(cdl, stores)
        for w in WRITERS:
            if done.get(w, "").startswith("ok"):
                found[w].append((cdl.stem, f"cdl:{stores / 'orig' / (cdl.stem + '.nc')}"))
    if zarr:
        found["zarr"] = [(n, f"zarr:{stores / 'zarr' / (n + '.zarr')}") for n in zarr_features(stores)]
    return found


def _name(writer: str, name: str) -> str:
    return f"{writer}/{name}.zarr" if writer == "zarr" else f"{writer}/{name}.file"


def _together(parts: list[Callable[[], None]], parallel: bool) -> None:
    """Each part, one after another, or all at once (threads: each part waits on a worker
    process or a mount, so two cores serve two parts); the first exception is raised."""
    if not parallel:
        for part in parts:
            part()
        return
    with ThreadPoolExecutor(len(parts)) as pool:
        for done in [pool.submit(part) for part in parts]:
            done.result()


def read_direct(matrix: Matrix, stores: Path, datasets: dict[str, list[tuple[str, str]]],
                readers: tuple[str, ...] = READERS, parallel: bool = False) -> None:
    """Every dataset read without nczfs by each reader (``parallel``: the readers at once)."""
    def by(reader: str) -> Callable[[], None]:
        jobs = [(w, n, reader, Job(f"direct|{w}|{n}|{reader}", reader, str(stores / _name(w, n)), ref))
                for w, items in datasets.items() for n, ref in items]
        return lambda: matrix.add("direct", jobs)

    _together([by(r) for r in readers], parallel)


@contextlib.contextmanager
def view_mount(backend, mnt: Path, view: str) -> Iterator[Path]:
    with mounted(backend, mnt, "--read-only", "--present", view) as m:
        yield m.path


def read_through(matrix: Matrix, column: str, root: Path, datasets: dict[str, list[tuple[str, str]]],
                 readers: tuple[str, ...]) -> None:
    jobs = [(w, n, r, Job(f"{column}|{w}|{n}|{r}", r, str(root / _name(w, n)), ref))
            for w, items in datasets.items() for n, ref in items for r in readers]
    matrix.add(column, jobs)


def own_views(matrix: Matrix, backend, label: str, work: Path, datasets: dict[str, list[tuple[str, str]]],
              views: tuple[str, ...] | None = None, parallel: bool = False) -> None:
    """Every view (default: each reader's own) mounted over ``backend``, read by its readers
    (every reader with ``views`` given); ``parallel``: the views mounted and read at once."""
    def of(view: str) -> Callable[[], None]:
        readers = READERS if views else tuple(r for r in READERS if OWN_VIEW[r] == view)

        def part() -> None:
            with view_mount(backend, work / f"{label}-{view}", view) as root:
                read_through(matrix, f"{label} {view}", root, datasets, readers)
        return part

    _together([of(v) for v in views or tuple(OWN_VIEW[r] for r in READERS)], parallel)
