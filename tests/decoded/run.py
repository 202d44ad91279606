"""Running the decoded judge over mounts: the views mounted once over a backend, each example
written under a fresh name beside the others and judged through every path, the results tallied
per path. Used by tests/mount/test_decoded.py (a fixed-seed handful) and bench/bench_decoded.py
(many examples, and netCDF-C's CDL corpus written by xarray)."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from tests.decoded.judge import PATHS, Where, judge, touches_data
from tests.helpers import mounted

_names = itertools.count()


@contextlib.contextmanager
def mounted_views(backend, base: Path, views: tuple[str, ...]) -> Iterator[dict[str, Path]]:
    """{view: mount root}: ``backend`` mounted read-only once per view, each with -o nc_files."""
    with contextlib.ExitStack() as stack:
        roots = {}
        for v in views:
            m = stack.enter_context(mounted(backend, base / f"mnt-{v}", "--read-only", "--present", v, "--nc-files"))
            roots[v] = m.path
        yield roots
        for v in views:
            text = (base / f"mnt-{v}.log").read_text() if (base / f"mnt-{v}.log").exists() else ""
            assert "Traceback" not in text, f"the {v} mount's log has a traceback:\n{text[-3000:]}"


@dataclass
class Site:
    """Where examples go: a backend mounted as ``roots`` (view -> root); ``staging`` a local
    folder examples are written to first (the expected's source; for S3 then uploaded)."""

    backend: object
    roots: dict[str, Path]
    staging: Path
    endpoint: str = ""

    def put(self, write, stem: str = "e") -> Where:
        """``write(path)`` a dataset under a fresh name (the mounts never saw it: no cached
        listing or missing name is in the way); its Where."""
        name = f"{stem}{os.getpid()}-{next(_names):05d}.zarr"  # fresh across runs over one backend too
        local = self.staging / name
        write(local)
        if getattr(self.backend, "root", None) is not None:
            dest = Path(self.backend.root) / name
            if dest != local:
                shutil.copytree(local, dest)
            source, options = str(dest), {}
        else:
            self.backend.put_many({f"{name}/{p.relative_to(local)}": p.read_bytes()
                                   for p in local.rglob("*") if p.is_file()})
            source, options = f"{self.backend.source}/{name}", {"endpoint_url": self.endpoint}
        nc = self.roots.get("as-stored") or next(iter(self.roots.values()))
        return Where(name, local, dict(self.roots), nc, source, options)


@dataclass
class Tally:
    """Per path: examples decoded equal, differing in metadata only (attributes, _FillValue,
    units), differing in data (values, dtypes, variables, or not opening), not applicable; the
    first few differences with the example that showed them."""

    keep: int = 3
    counts: dict = field(default_factory=dict)
    firsts: dict = field(default_factory=dict)

    def add(self, results: dict[str, list[str] | None], describe: str) -> None:
        for path, diffs in results.items():
            c = self.counts.setdefault(path, {"equal": 0, "metadata": 0, "data": 0, "n/a": 0})
            how = "n/a" if diffs is None else "equal" if not diffs else "data" if touches_data(diffs) else "metadata"
            c[how] += 1
            if diffs and len(self.firsts.setdefault(path, [])) < self.keep:
                self.firsts[path].append((describe, diffs))

    def failures(self, path: str) -> str:
        """The differences of ``path`` as a message ('' when every example decoded equal)."""
        return "\n\n".join(f"{d}\n  -> " + "\n  -> ".join(x) for d, x in self.firsts.get(path, []))

    def table(self) -> str:
        rows = ["| path | equal | metadata only | data | n/a |", "|---|---:|---:|---:|---:|"]
        for p in [p for p in PATHS if p in self.counts]:
            c = self.counts[p]
            rows.append(f"| {p} | {c['equal']} | {c['metadata']} | {c['data']} | {c['n/a']} |")
        return "\n".join(rows)


def run_examples(site: Site, tally: Tally, examples: int, paths: list[str], strategy=None) -> int:
    """``examples`` Hypothesis examples (fixed seed) written at ``site`` and judged through
    ``paths``; returns how many were judged."""
    from hypothesis import HealthCheck, Phase, assume, given, settings

    from tests.decoded.strategies import cases

    done = [0]

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy or cases())
    def one(case):
        try:
            where = site.put(case.write)
        except Exception:  # noqa: BLE001 - a dataset xarray itself refuses to write: not an example
            assume(False)
        tally.add(judge(where, [p for p in paths if where.needs(p)]), case.describe())
        done[0] += 1

    one()
    return done[0]


def staging_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="nczfs-decoded-"))
