"""POSIX conformance: pjdfstest, fsx and fsstress on nczfs mounts next to a plain directory and s3fs-fuse.

    .venv/bin/python bench/bench_posix.py [--targets plain,directory,zip,s3,s3fs-fuse] [--groups chmod,link]
                                          [--fsx-ops 100000] [--fsstress-ops 1000] [--jobs 2] [--json out.json]

Builds the suites from ``../shared/posix-suites/`` (tests/posix_suites.py; needs the packages of
``scripts/install.sh --test``), runs, as root, the whole unmodified pjdfstest in a directory of
each target, then ``fsx -N`` on a file and ``fsstress -n -p 4`` in a directory of each, and prints
pass/fail per syscall group and target. Targets: ``plain`` (a directory on local disk),
``directory``, ``zip``, ``s3`` (nczfs mounts of a local directory, a new zip archive and a prefix
of a bucket on a SeaweedFS server of the script's own, all with ``-o allow_other`` so that the
suite's other users reach them), and ``s3fs-fuse`` on the same SeaweedFS (``apt-get install
s3fs``; skipped with a note when missing; mounted with ``allow_other,use_path_request_style``
and otherwise its defaults). Nothing here is timed against a target: the numbers are counts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests import posix_suites  # noqa: E402
from tests.s3server import ADMIN, SeaweedS3  # noqa: E402

NCZFS = [sys.executable, "-m", "nczfs"]
TARGETS = ("plain", "directory", "zip", "s3", "s3fs-fuse")


def _wait_mounted(mnt: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.ismount(mnt):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{mnt}: not mounted after {timeout} s")
        time.sleep(0.05)


def _umount(mnt: Path, nczfs: bool) -> None:
    if not os.path.ismount(mnt):
        return
    cmd = [*NCZFS, "umount", str(mnt)] if nczfs else ["fusermount3", "-u", str(mnt)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if res.returncode != 0 or os.path.ismount(mnt):
        print(f"warning: {' '.join(cmd)}: {res.returncode} {res.stderr.strip()}", file=sys.stderr)
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)


class Lab:
    """The targets' mounts, one at a time, under one work directory."""

    def __init__(self, work: Path, extra: list[str]):
        self.work = work
        self.extra = extra
        self.server: SeaweedS3 | None = None
        self.bucket = ""

    def s3(self) -> SeaweedS3:
        if self.server is None:
            self.server = SeaweedS3(self.work / "seaweedfs")
            os.environ.update(self.server.write_aws_files(self.work / "aws"))  # nczfs finds its keys there
            os.environ.pop("AWS_PROFILE", None)
            self.server.start()
            self.bucket = self.server.new_bucket("posix")
        return self.server

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()

    @contextlib.contextmanager
    def target(self, name: str) -> Iterator[Path]:
        """A directory of ``name`` to run the suites in (its mount made and unmade around it)."""
        base = self.work / name
        base.mkdir()
        if name == "plain":
            yield base
            return
        mnt = base / "mnt"
        mnt.mkdir()
        log = base / "nczfs.log"
        if name == "s3fs-fuse":
            server = self.s3()
            passwd = base / "passwd-s3fs"
            passwd.write_text(f"{ADMIN[0]}:{ADMIN[1]}\n")
            passwd.chmod(0o600)
            prefix = f"s3fs-{int(time.time())}"
            server.client().put_object(Bucket=self.bucket, Key=f"{prefix}/", Body=b"")
            subprocess.run(["s3fs", f"{self.bucket}:/{prefix}", str(mnt), "-o", f"passwd_file={passwd}",
                            "-o", f"url={server.endpoint},use_path_request_style,allow_other"], check=True)
            _wait_mounted(mnt)
        else:
            if name == "directory":
                (base / "backing").mkdir()
                source, args = str(base / "backing"), []
            elif name == "zip":
                source, args = str(base / "backing.zip"), []
            elif name == "s3":
                server = self.s3()
                source, args = f"s3://{self.bucket}/nczfs-{int(time.time())}", ["--endpoint-url", server.endpoint]
                args += ["-o", "posix_meta"]  # symlinks (and modes, owners) kept in objects' metadata need it
            else:
                raise ValueError(name)
            subprocess.run([*NCZFS, "mount", source, str(mnt), "--log-file", str(log), "-o", "allow_other",
                            *args, *self.extra], check=True)
        try:
            yield mnt
        finally:
            _umount(mnt, nczfs=name != "s3fs-fuse")


def run_target(lab: Lab, suites: posix_suites.Suites, name: str, files: list[str], args) -> dict:
    out: dict = {"pjdfstest": {}, "fsx": None, "fsstress": None}
    with lab.target(name) as root:
        if files:
            start = time.monotonic()

            def one(test: str):
                cwd = root / f"pjd-{test.replace('/', '-')}"
                cwd.mkdir()
                r = posix_suites.run_pjdfstest_file(suites, test, cwd, timeout=args.timeout)
                mark = "ok" if not r.failures else f"{r.failed} failed"
                print(f"  {name} {test}: {mark} ({r.seconds:.1f} s)", file=sys.stderr, flush=True)
                return r

            with ThreadPoolExecutor(args.jobs) as pool:
                for r in pool.map(one, files):
                    group = r.name.split("/")[0]
                    g = out["pjdfstest"].setdefault(group, {"planned": 0, "passed": 0, "failures": [], "files": {}})
                    g["planned"] += r.planned
                    g["passed"] += r.passed
                    g["files"][r.name] = [r.passed, r.planned]
                    g["failures"] += [f"{r.name}: {line}" for line in r.failures]
            out["pjdfstest_seconds"] = time.monotonic() - start
        if args.fsx_ops:
            r = posix_suites.run_fsx(suites, root / "fsx.file", args.fsx_ops, timeout=args.timeout * 6)
            out["fsx"] = {"ok": r.ok, "ops": args.fsx_ops, "seconds": r.seconds, "tail": r.output[-1500:]}
            print(f"  {name} fsx -N {args.fsx_ops}: {'ok' if r.ok else 'FAILED'} ({r.seconds:.0f} s)", file=sys.stderr)
        if args.fsstress_ops:
            d = root / "fsstress"
            d.mkdir()
            r = posix_suites.run_fsstress(suites, d, args.fsstress_ops, timeout=args.timeout * 6)
            out["fsstress"] = {"ok": r.ok, "ops": args.fsstress_ops, "seconds": r.seconds, "tail": r.output[-1500:]}
            print(f"  {name} fsstress -n {args.fsstress_ops} -p 4: {'ok' if r.ok else 'FAILED'} ({r.seconds:.0f} s)",
                  file=sys.stderr)
    return out


def table(results: dict[str, dict], groups: list[str]) -> str:
    names = list(results)
    lines = ["| group | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    totals = {n: [0, 0] for n in names}
    for g in groups:
        cells = []
        for n in names:
            r = results[n]["pjdfstest"].get(g)
            if r is None:
                cells.append("-")
                continue
            totals[n][0] += r["passed"]
            totals[n][1] += r["planned"]
            cells.append(f"{r['passed']}/{r['planned']}")
        lines.append(f"| {g} | " + " | ".join(cells) + " |")
    cells = [f"**{p}/{t} ({100 * p / t:.1f}%)**" if t else "-" for p, t in totals.values()]
    lines.append("| **all** | " + " | ".join(cells) + " |")
    for prog in ("fsx", "fsstress"):
        cells = []
        for n in names:
            r = results[n].get(prog)
            cells.append("-" if r is None else f"{'pass' if r['ok'] else 'FAIL'} ({r['ops']} ops, {r['seconds']:.0f} s)")
        lines.append(f"| {prog} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--groups", default="", help="pjdfstest groups (default: all); 'none' runs no pjdfstest")
    ap.add_argument("--fsx-ops", type=int, default=100_000)
    ap.add_argument("--fsstress-ops", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=2, help="pjdfstest files run at once (each in its own directory)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds one pjdfstest file may take")
    ap.add_argument("--json", help="write every result (with the failing lines) here")
    ap.add_argument("--work", help="work directory (default: a temp dir, removed)")
    ap.add_argument("--mount-opt", action="append", default=[], help="more nczfs mount arguments")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("pjdfstest needs root", file=sys.stderr)
        return 2
    suites = posix_suites.build()
    targets = [t for t in args.targets.split(",") if t]
    if "s3fs-fuse" in targets and not shutil.which("s3fs"):
        print("note: s3fs (s3fs-fuse) not installed: its column is skipped", file=sys.stderr)
        targets.remove("s3fs-fuse")
    groups = [] if args.groups == "none" else ([g for g in args.groups.split(",") if g] or suites.groups())
    files = posix_suites.pjdfstest_files(suites, groups) if groups else []
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench-posix-"))
    work.mkdir(parents=True, exist_ok=True)
    os.chmod(work, 0o755)
    lab = Lab(work, args.mount_opt)
    results: dict[str, dict] = {}
    try:
        for t in targets:
            print(f"{t}:", file=sys.stderr, flush=True)
            try:
                results[t] = run_target(lab, suites, t, files, args)
            except (subprocess.CalledProcessError, RuntimeError, OSError) as exc:
                print(f"  {t}: not run: {exc}", file=sys.stderr)
                continue
            if args.json:  # as each target ends: a later failure loses nothing
                Path(args.json).write_text(json.dumps(results, indent=1))
    finally:
        lab.close()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(table(results, groups))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
