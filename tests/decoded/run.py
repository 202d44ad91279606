"""Running the decoded judge over mounts: the views mounted once over a backend, each example
written under a fresh name beside the others and judged through every path, the results tallied
per path. Used by tests/mount/test_decoded.py (a fixed-seed handful) and bench/bench_decoded.py
(many examples, and netCDF-C's CDL corpus written by xarray)."""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

from tests.decoded.judge import PATHS, Where, judge, stop_worker, touches_data, undocumented
from tests.helpers import DirectoryBackend, mounted

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


@pytest.fixture(scope="module", autouse=True)
def reader_worker():
    """The judge's worker process (netCDF-C reads) ends with the module that imports this."""
    yield
    stop_worker()


@contextlib.contextmanager
def directory_site(base: Path, views: tuple[str, ...]) -> Iterator["Site"]:
    """A Site over an empty local directory ``base/backing`` mounted once per view."""
    backend = DirectoryBackend(base / "backing")
    backend.root.mkdir()
    with mounted_views(backend, base, views) as roots:
        yield Site(backend, roots, backend.root)


@dataclass
class Site:
    """Where examples go: a backend mounted as ``roots`` (view -> root); ``staging`` a local
    folder examples are written to first (the expected's source; for S3 then uploaded)."""

    backend: object
    roots: dict[str, Path]
    staging: Path
    endpoint: str = ""

    def put(self, write, stem: str = "e") -> str:
        """``write(path)`` a dataset under a fresh name (one the mounts never saw: no cached
        listing or missing name is in the way on a directory mount); returns the name."""
        name = f"{stem}{os.getpid()}-{next(_names):05d}.zarr"  # fresh across runs over one backend too
        local = self.staging / name
        write(local)
        if self.is_directory:
            if self.staging != Path(self.backend.root):
                shutil.copytree(local, Path(self.backend.root) / name)
        else:
            self.backend.put_many({f"{name}/{p.relative_to(local)}": p.read_bytes()
                                   for p in local.rglob("*") if p.is_file()})
        return name

    @property
    def is_directory(self) -> bool:
        return getattr(self.backend, "root", None) is not None

    def where(self, name: str) -> Where:
        """How each path reaches dataset ``name`` (the mounts in ``roots`` now)."""
        if self.is_directory:
            source, options = str(Path(self.backend.root) / name), {}
        else:
            source, options = f"{self.backend.source}/{name}", {"endpoint_url": self.endpoint}
        nc = self.roots.get("as-stored") or next(iter(self.roots.values()), None)
        return Where(name, self.staging / name, dict(self.roots), nc, source, options)


@dataclass
class Tally:
    """Per path: examples decoded equal, equal but for differences docs/SEMANTICS.md documents,
    differing in metadata only (attributes, _FillValue, units), differing in data (values,
    dtypes, variables, or not opening), not applicable; the first few differences (documented
    ones left out) with the example that showed them."""

    keep: int = 3
    counts: dict = field(default_factory=dict)
    firsts: dict = field(default_factory=dict)
    kinds: dict = field(default_factory=dict)  # path -> Counter of signature() -> examples
    unreadable: list = field(default_factory=list)  # (example, error): xarray cannot read the store itself

    def add(self, results: dict[str, list[str] | None], describe: str) -> None:
        for path, diffs in results.items():
            c = self.counts.setdefault(path, {"equal": 0, "documented": 0, "metadata": 0, "data": 0, "n/a": 0})
            left = undocumented(path, diffs or [])
            how = ("n/a" if diffs is None else "equal" if not diffs else "documented" if not left
                   else "data" if touches_data(left) else "metadata")
            c[how] += 1
            self.kinds.setdefault(path, collections.Counter()).update({signature(d) for d in left})
            if left and len(self.firsts.setdefault(path, [])) < self.keep:
                self.firsts[path].append((describe, left))

    def failed(self, path: str) -> int:
        """Examples ``path`` decoded otherwise than documented."""
        return self.counts[path]["metadata"] + self.counts[path]["data"]

    def failures(self, path: str) -> str:
        """The differences of ``path`` as a message ('' when every example decoded equal)."""
        return "\n\n".join(f"{d}\n  -> " + "\n  -> ".join(x) for d, x in self.firsts.get(path, []))

    def common(self, path: str, n: int = 8) -> str:
        """The ``n`` most common kinds of difference of ``path``, with how many examples show each."""
        return "\n".join(f"  {k:4d} x {sig}" for sig, k in self.kinds.get(path, collections.Counter()).most_common(n))

    def table(self) -> str:
        rows = ["| path | equal | documented only | metadata only | data | n/a |", "|---|---:|---:|---:|---:|---:|"]
        for p in [p for p in PATHS if p in self.counts]:
            c = self.counts[p]
            rows.append(f"| {p} | {c['equal']} | {c['documented']} | {c['metadata']} | {c['data']} | {c['n/a']} |")
        return "\n".join(rows)


def signature(difference: str) -> str:
    """A difference without its particulars: the generated variable's kind (from its name,
    ``v0_int8`` -> ``int8``), the kind of difference, dtypes; values, sizes and paths dropped."""
    m = re.match(r"^(/[^:]*): (.*)$", difference)
    if not m:
        return re.sub(r"'[^']*'|/tmp/\S+", "#", difference)[:140]
    name, rest = m.groups()
    var = re.sub(r"^/(?:g/)?(?:[vw]\d+_)?", "", name) or "/"
    rest = re.sub(r"^(values|units|calendar|_FillValue (?:lost|added)|attr \S+ \w+).*", r"\1", rest)
    rest = re.sub(r"^_FillValue [^ ]+ -> .*", "_FillValue changed", rest)
    rest = re.sub(r"\{[^}]*\}", "{..}", rest)
    return f"{var}: {rest}"[:140]


def write_examples(site: Site, examples: int, strategy=None) -> list[tuple[str, str]]:
    """``examples`` Hypothesis examples (fixed seed) written at ``site``: [(name, description)].
    On S3 write them before mounting: a read-only S3 mount's cached listing of the root does
    not show names written after it (for -o metadata_ttl, 60 s by default)."""
    from hypothesis import HealthCheck, Phase, assume, given, settings

    from tests.decoded.strategies import cases

    written: list[tuple[str, str]] = []

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy or cases())
    def one(case):
        try:
            name = site.put(case.write)
        except Exception:  # noqa: BLE001 - a dataset xarray itself refuses to write: not an example
            assume(False)
        written.append((name, case.describe()))

    one()
    return written


def judge_examples(site: Site, written: list[tuple[str, str]], paths: list[str], tally: Tally) -> None:
    """Every written example judged through each of ``paths`` its site can reach."""
    for name, describe in written:
        where = site.where(name)
        try:
            results = judge(where, [p for p in paths if where.needs(p)])
        except Exception as exc:  # noqa: BLE001 - the expected itself: xarray cannot read what it wrote
            tally.unreadable.append((describe, f"{type(exc).__name__}: {str(exc)[:200]}"))
            continue
        tally.add(results, describe)


def run_examples(site: Site, tally: Tally, examples: int, paths: list[str], strategy=None) -> int:
    """Write ``examples`` examples at a mounted directory ``site`` and judge them; how many."""
    written = write_examples(site, examples, strategy)
    judge_examples(site, written, paths, tally)
    return len(written)
