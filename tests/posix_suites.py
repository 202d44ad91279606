"""pjdfstest, fsx and fsstress: built from the upstream sources in ``../shared/posix-suites/``
(its README says how; nothing is downloaded) and run against a directory, as tests and
``bench/bench_posix.py`` do.

The programs are built once per source version into a cache directory
(``$NCZFS_POSIX_SUITES_BUILD``, else ``~/.cache/nczfs-posix-suites``) and reused; a build
needs gcc, make, autoconf/automake and xfslibs-dev (``scripts/install.sh --test``).
pjdfstest is run file by file (``sh tests/GROUP/NN.t``, as ``prove`` does), its TAP output
counted per syscall group: a test file that dies or stops early counts its missing tests as
failures.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SOURCES = Path(__file__).resolve().parents[2] / "shared" / "posix-suites"
PJDFSTEST_TARBALL = "pjdfstest-85a8aea.tar.gz"
XFSTESTS_FILES = ("fsx.c", "fsstress.c", "global.h", "statx.h", "config.h")


@dataclass(frozen=True)
class Suites:
    """The built programs: pjdfstest's tree (the ``pjdfstest`` binary beside ``tests/``), fsx, fsstress."""

    pjdfstest_dir: Path
    fsx: Path
    fsstress: Path

    @property
    def pjdfstest_tests(self) -> Path:
        return self.pjdfstest_dir / "tests"

    def groups(self) -> list[str]:
        """pjdfstest's syscall groups (its test directories), sorted."""
        return sorted(p.name for p in self.pjdfstest_tests.iterdir() if p.is_dir())


def _digest() -> str:
    h = hashlib.sha256()
    for name in (PJDFSTEST_TARBALL, *XFSTESTS_FILES):
        h.update((SOURCES / name).read_bytes())
    return h.hexdigest()[:12]


def build_dir() -> Path:
    base = os.environ.get("NCZFS_POSIX_SUITES_BUILD") or os.path.expanduser("~/.cache/nczfs-posix-suites")
    return Path(base) / _digest()


def _run(cmd: list[str], cwd: Path) -> None:
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed in {cwd} ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")


def build() -> Suites:
    """The suites, built now unless a build of these sources is there already."""
    if not SOURCES.is_dir():
        raise RuntimeError(f"the POSIX suites' sources are missing at {SOURCES}")
    dest = build_dir()
    suites = Suites(dest / "pjdfstest", dest / "fsx" / "fsx", dest / "fsx" / "fsstress")
    if (dest / "done").exists():
        return suites
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=dest.parent))
    try:
        _run(["tar", "-xzf", str(SOURCES / PJDFSTEST_TARBALL), "-C", str(work)], work)
        (top,) = [p for p in work.iterdir() if p.is_dir()]
        top.rename(work / "pjdfstest")
        pjd = work / "pjdfstest"
        _run(["autoreconf", "-ifs"], pjd)
        _run(["./configure"], pjd)
        _run(["make", "pjdfstest"], pjd)
        fsx = work / "fsx"
        fsx.mkdir()
        for name in XFSTESTS_FILES:
            shutil.copy(SOURCES / name, fsx / name)
        flags = ["-O2", "-D_GNU_SOURCE", "-D_FILE_OFFSET_BITS=64", "-I.", "-include", "getopt.h", "-include", "time.h"]
        for prog in ("fsx", "fsstress"):
            _run(["gcc", *flags, "-o", prog, f"{prog}.c"], fsx)
        (work / "done").write_text("")
        try:
            work.rename(dest)
        except OSError:  # built meanwhile by another process: use that one
            shutil.rmtree(work, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return suites


# ---------------------------------------------------------------------------- pjdfstest

_PLAN = re.compile(r"^1\.\.(\d+)", re.M)
_RESULT = re.compile(r"^(ok|not ok) (\d+)(.*)$", re.M)


@dataclass
class FileResult:
    name: str  # "chmod/00.t"
    planned: int
    passed: int
    #: the "not ok" lines, and a line for tests that never ran
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        return self.planned - self.passed


@dataclass
class GroupResult:
    group: str
    files: list[FileResult] = field(default_factory=list)

    @property
    def planned(self) -> int:
        return sum(f.planned for f in self.files)

    @property
    def passed(self) -> int:
        return sum(f.passed for f in self.files)


def run_pjdfstest_file(suites: Suites, test: str, cwd: Path, timeout: float = 600) -> FileResult:
    """Run one test file (``GROUP/NN.t``) with ``cwd`` (a directory on the file system under test)
    as its working directory; its TAP output counted."""
    script = suites.pjdfstest_tests / test
    start = time.monotonic()
    try:
        res = subprocess.run(["sh", str(script)], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                             errors="replace")
        out = res.stdout
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        out += f"\nnot ok 0 - timed out after {timeout} s\n"
    plan = _PLAN.search(out)
    planned = int(plan[1]) if plan else 0
    passed, failures, seen = 0, [], set()
    for m in _RESULT.finditer(out):
        seen.add(int(m[2]))
        # as prove counts them: a skip passes, and so does a failure marked TODO (a known
        # difference of the OS, e.g. Linux keeping a directory's SGID bit at chown)
        if m[1] == "ok" or "# TODO" in m[3]:
            passed += 1
        else:
            failures.append(m[0])
    if planned and len(seen) < planned:
        failures.append(f"{planned - len(seen)} tests never ran (the script stopped)")
    planned = max(planned, len(seen))
    return FileResult(test, planned, min(passed, planned), failures, time.monotonic() - start)


def pjdfstest_files(suites: Suites, groups: list[str] | None = None) -> list[str]:
    out = []
    for group in groups or suites.groups():
        out.extend(f"{group}/{p.name}" for p in sorted((suites.pjdfstest_tests / group).glob("*.t")))
    return out


def run_pjdfstest(suites: Suites, cwd: Path, files: list[str] | None = None, timeout: float = 600,
                  progress=None, parallel: int = 1) -> dict[str, GroupResult]:
    """Run test files (default: all) in ``cwd``; results by syscall group. ``parallel`` > 1:
    that many files at once, each in a directory of its own under ``cwd`` (a file checks the
    times of its working directory; most of its time is its ``sleep 1`` between them)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(test: str) -> FileResult:
        where = cwd
        if parallel > 1:
            where = cwd / test.replace("/", "_")
            where.mkdir()
        return run_pjdfstest_file(suites, test, where, timeout)

    results: dict[str, GroupResult] = {}
    with ThreadPoolExecutor(parallel) as pool:
        for test, r in zip(files or pjdfstest_files(suites), pool.map(one, files or pjdfstest_files(suites))):
            results.setdefault(test.split("/")[0], GroupResult(test.split("/")[0])).files.append(r)
            if progress is not None:
                progress(r)
    return results


# ---------------------------------------------------------------------------- fsx, fsstress

@dataclass
class ProgramResult:
    ok: bool
    returncode: int
    seconds: float
    output: str


def run_fsx(suites: Suites, path: Path, ops: int, seed: int = 1, timeout: float = 3600, extra: tuple[str, ...] = ()) -> ProgramResult:
    """``fsx -N ops -S seed [extra] path``: random reads, writes, truncates, mmaps of one file,
    each read checked against fsx's own copy. ok: it ran every operation without a mismatch."""
    start = time.monotonic()
    args = [str(suites.fsx), "-N", str(ops), "-S", str(seed), *extra, str(path)]
    try:
        res = subprocess.run(args, capture_output=True, text=True, timeout=timeout, errors="replace",
                             cwd=path.parent)
        out, rc = res.stdout + res.stderr, res.returncode
    except subprocess.TimeoutExpired as exc:
        out, rc = f"timed out after {timeout} s: {exc.stdout!r}", -1
    return ProgramResult(rc == 0, rc, time.monotonic() - start, out)


def run_fsstress(suites: Suites, path: Path, ops: int, procs: int = 4, seed: int = 1, timeout: float = 3600) -> ProgramResult:
    """``fsstress -d path -n ops -p procs -s seed``: random namespace and data operations from
    ``procs`` processes at once. ok: it exited 0 (it stops at an unexpected error)."""
    start = time.monotonic()
    args = [str(suites.fsstress), "-d", str(path), "-n", str(ops), "-p", str(procs), "-s", str(seed)]
    try:
        res = subprocess.run(args, capture_output=True, text=True, timeout=timeout, errors="replace")
        out, rc = res.stdout + res.stderr, res.returncode
    except subprocess.TimeoutExpired as exc:
        out, rc = f"timed out after {timeout} s: {exc.stdout!r}", -1
    return ProgramResult(rc == 0, rc, time.monotonic() - start, out)
