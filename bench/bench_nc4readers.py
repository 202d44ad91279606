"""Every reader of issue 45 on NAME.nc4 of every dataset of both corpora (the generated
decoded-fidelity corpus and the shared netCDF-C corpus), made without a mount, each compared with
what the store decodes (tests/nczarr/nc4readers.py). Prints reader x corpus -> equal /
documented / differs / fails with the datasets behind each, and every undocumented line.

    PYTHONPATH=$PWD .venv/bin/python bench/bench_nc4readers.py [--examples 150] [--shared all|N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.decoded.run import Site, write_examples  # noqa: E402
from tests.helpers import DirectoryBackend  # noqa: E402
from tests.nczarr.nc4readers import READERS, verdict  # noqa: E402
from tests.nczarr.nc4util import write_nc4  # noqa: E402

KINDS = ("equal", "documented", "differs", "fails")


def generated(root: Path, examples: int) -> list[str]:
    """The decoded-fidelity corpus' ``examples`` (fixed seed) written under ``root``."""
    root.mkdir()
    site = Site(DirectoryBackend(root), {}, root)
    return [name for name, _ in write_examples(site, examples)]


def shared(root: Path, limit: int | None) -> list[str]:
    """The shared netCDF-C corpus (tests/nczarr/test_nc4file.py's) under ``root``."""
    from tests.mount.test_nc_files import copy_corpus
    from tests.nczarr.test_nc4file import CORPUS_DATASETS

    root.mkdir()
    copy_corpus(root, CORPUS_DATASETS)
    return sorted(p.name for p in root.iterdir() if p.is_dir())[:limit]


def run(corpora: dict[str, tuple[Path, list[str]]], readers=READERS) -> dict:
    """{(reader, corpus): {kind: [(dataset, lines)]}} over every dataset of ``corpora``."""
    table: dict = defaultdict(lambda: defaultdict(list))
    for corpus, (root, names) in corpora.items():
        for name in names:
            try:
                f, path = write_nc4(root, name, root.parent / f"{corpus}-{name}.nc4")
            except Exception as exc:  # noqa: BLE001 - the file itself cannot be made: every reader fails
                for r in readers:
                    table[r, corpus]["fails"].append((name, [f"write_nc4: {exc}"]))
                continue
            for r in readers:
                kind, lines = verdict(r, root / name, path)
                table[r, corpus][kind].append((name, lines))
    return table


def show(table: dict, corpora, out=print) -> None:
    out("| reader | " + " | ".join(corpora) + " |")
    out("|---|" + "---|" * len(corpora))
    for r in READERS:
        cells = []
        for c in corpora:
            got = table.get((r, c), {})
            cells.append(", ".join(f"{len(got[k])} {k}" + (f" ({' '.join(n for n, _ in got[k])})"
                                                           if k in ("differs", "fails") else "")
                                   for k in KINDS if got.get(k)))
        out(f"| {r} | " + " | ".join(cells) + " |")
    out("")
    for (r, c), kinds in sorted(table.items()):
        for k in ("differs", "fails"):
            for name, lines in kinds.get(k, []):
                out(f"{k}: {r} {c}/{name}: {' | '.join(lines)[:400]}")
        for why in sorted({w for _, lines in kinds.get("documented", []) for w in lines}):
            names = [n for n, lines in kinds["documented"] if why in lines]
            out(f"documented: {r} {c} ({len(names)}: {' '.join(names[:6])}{' ...' if len(names) > 6 else ''}): {why}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--examples", type=int, default=150)
    p.add_argument("--shared", type=int, default=None, help="at most this many shared datasets")
    a = p.parse_args()
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        t = time.monotonic()
        corpora = {"generated": (Path(tmp, "gen"), generated(Path(tmp, "gen"), a.examples)),
                   "shared": (Path(tmp, "shared"), shared(Path(tmp, "shared"), a.shared))}
        table = run(corpora)
        show(table, corpora)
        print(f"\n{sum(len(n) for _, n in corpora.values())} datasets, {len(READERS)} readers,"
              f" {time.monotonic() - t:.0f} s")


if __name__ == "__main__":
    main()
