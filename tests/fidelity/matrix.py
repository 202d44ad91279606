"""The views' fidelity matrix: datasets x (no nczfs, or a view) x readers, each read compared.

A read is ``full`` (nothing differs from the reference), ``partial`` (the differences are listed)
or ``fails`` (the reader raised, or crashed). References: for netCDF-C's CDL corpus, the original
netCDF-4 file read by the same reader; for the Zarr features corpus, zarr-python reading the store.
Reads run in worker processes (``python -m tests.fidelity.matrix``, JSON lines on stdin and
stdout): a reader that crashes (netCDF-C segfaults on some inputs) fails its read and a new worker
takes the rest.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.fidelity.readers import OWN_VIEW, READERS, diff, read, value

STATUS_RANK = {"full": 2, "partial": 1, "fails": 0}


@dataclass
class Job:
    id: str
    reader: str
    target: str
    #: "cdl:<original .nc>" or "zarr:<store folder read by zarr-python>"
    reference: str


def zarr_reference(store: str) -> dict[str, dict[str, np.ndarray]]:
    """{group path: {array: values}} as zarr-python reads them."""
    import zarr

    out: dict[str, dict[str, np.ndarray]] = {}

    def walk(g, path: str) -> None:
        for name, a in g.arrays():
            out.setdefault(path, {})[name] = a[...]
        for name, sub in g.groups():
            walk(sub, f"{path.rstrip('/')}/{name}")

    walk(zarr.open_group(store, mode="r"), "/")
    return out


def _shown_values(var: dict, ref: np.ndarray) -> tuple[list, list]:
    """(reference values, shown values) in the same terms: times in the unit the view shows, text
    as str, char arrays (netCDF-C 4.9.0's strings) joined along their last axis."""
    data = var["data"]
    if ref.dtype.kind == "M" and data.dtype.kind != "M":
        units = str(dict(var["attrs"]).get("units", (None, ""))[1])
        unit = {"microseconds": "us", "nanoseconds": "ns", "seconds": "s"}.get(units.split(" ")[0])
        if unit:
            ints = ref.astype("<i8")
            ref = np.where(ints == np.iinfo("i8").min, ints, ref.astype(f"M8[{unit}]").astype("<i8"))
    if data.dtype.kind == "S" and data.ndim == ref.ndim + 1 and data.dtype.itemsize == 1:
        data = np.array([b"".join(row) for row in data.reshape(-1, data.shape[-1]).tolist()]).reshape(data.shape[:-1])
    return value(ref), value(data)


def values_diff(ref: dict[str, dict[str, np.ndarray]], got: dict) -> list[str]:
    out = []
    for g, arrays in ref.items():
        shown = got.get(g, {"vars": {}})["vars"]
        for name, values in arrays.items():
            if name not in shown:
                out.append(f"var-missing {g.rstrip('/')}/{name}")
                continue
            want, have = _shown_values(shown[name], values)
            if want != have and not (len(want) == len(have) and all(
                    a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)
                    for a, b in zip(want, have))):
                out.append(f"data {g.rstrip('/')}/{name}")
    return out


_references: dict[tuple[str, str], object] = {}


def run_job(job: Job) -> dict:
    kind, _, where = job.reference.partition(":")
    key = (job.reader, job.reference)
    try:
        if key not in _references:
            _references[key] = read(job.reader, where, original=True) if kind == "cdl" else zarr_reference(where)
        got = read(job.reader, job.target)
        ref = _references[key]
        d = diff(ref, got) if kind == "cdl" else values_diff(ref, got)  # type: ignore[arg-type]
        return {"id": job.id, "status": "partial" if d else "full", "diffs": d}
    except Exception as exc:  # noqa: BLE001 - a reader that refuses the dataset: the read fails
        return {"id": job.id, "status": "fails", "diffs": [], "err": f"{type(exc).__name__}: {str(exc)[:240]}"}


def run_jobs(jobs: list[Job], env: dict | None = None) -> dict[str, dict]:
    """Every job's result, by id, read in worker processes (a crash fails the read it was on)."""
    results: dict[str, dict] = {}
    todo = list(jobs)
    root = str(Path(__file__).resolve().parents[2])
    while todo:
        p = subprocess.Popen([sys.executable, "-m", "tests.fidelity.matrix"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=root,
                             env={**os.environ, **(env or {})})
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write("".join(json.dumps(j.__dict__) + "\n" for j in todo))
        p.stdin.close()
        for line in p.stdout:
            r = json.loads(line)
            results[r["id"]] = r
        p.wait()
        left = [j for j in todo if j.id not in results]
        if left:
            results[left[0].id] = {"id": left[0].id, "status": "fails", "diffs": [],
                                   "err": f"the reader crashed (exit {p.returncode})"}
        todo = left[1:]
    return results


def _subject(d: str) -> str:
    """What a difference is about: ``/g/var``, ``/g/var@attr``, ``/g/dim``."""
    return d.split(" ")[1] if " " in d else d


def _covers(wrong: str, subject: str) -> bool:
    """Is ``subject`` part of something the direct read already got wrong (itself, an attribute
    of a variable it missed, anything in a group it missed)?"""
    return subject == wrong or subject.startswith(wrong + "@") or subject.startswith(wrong.rstrip("/") + "/")


@dataclass
class Matrix:
    """Results keyed ``(column, corpus/writer, dataset, reader)``; column ``direct`` (no nczfs) or
    ``<backend> <view>``."""

    results: dict[tuple[str, str, str, str], dict] = field(default_factory=dict)

    def add(self, column: str, jobs: list[tuple[str, str, str, Job]], env: dict | None = None) -> None:
        found = run_jobs([j for *_, j in jobs], env)
        for writer, name, reader, job in jobs:
            self.results[(column, writer, name, reader)] = found[job.id]

    def columns(self) -> list[str]:
        return sorted({c for c, *_ in self.results}, key=lambda c: (c != "direct", c))

    def cell(self, column: str, writer: str, reader: str) -> collections.Counter:
        return collections.Counter(r["status"] for (c, w, _, rd), r in self.results.items()
                                   if c == column and w == writer and rd == reader)

    def worse_than_direct(self, column_of: dict[str, str]) -> list[str]:
        """Reads through a view that come out worse than the same reader's read without nczfs: a
        lower status, or a loss (a group, dimension, variable or attribute missing or changed) of
        something the direct read got right."""
        out = []
        for (c, w, n, rd), r in self.results.items():
            if c != column_of.get(rd):
                continue
            d = self.results.get(("direct", w, n, rd))
            if d is None:
                continue
            wrong = {_subject(x) for x in d["diffs"]}
            lost = [x for x in r["diffs"] if not x.split(" ")[0].endswith("-extra")
                    and not any(_covers(s, _subject(x)) for s in wrong)] if d["status"] != "fails" else []
            if STATUS_RANK[r["status"]] < STATUS_RANK[d["status"]] or lost:
                out.append(f"{c} {w}/{n} {rd}: {r['status']} {r.get('err', '')} {lost[:4]} (direct: {d['status']})")
        return out

    def table(self, backend: str = "dir") -> str:
        """Markdown: one row per stored corpus/writer and reader; full/partial/fails per column."""
        writers = sorted({w for _, w, _, _ in self.results})
        lines = ["| stored | reader | no nczfs | through its view |", "|---|---|---|---|"]
        for w in writers:
            for rd in READERS:
                cells = []
                for c in ("direct", f"{backend} {OWN_VIEW[rd]}"):
                    n = self.cell(c, w, rd)
                    cells.append(f"{n['full']}/{n['partial']}/{n['fails']}" if sum(n.values()) else "-")
                lines.append(f"| {w} | {rd} ({OWN_VIEW[rd]}) | {cells[0]} | {cells[1]} |")
        return "\n".join(lines)


def main() -> None:
    for line in sys.stdin:
        job = Job(**json.loads(line))
        print(json.dumps(run_job(job)), flush=True)


if __name__ == "__main__":
    main()
