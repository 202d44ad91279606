"""The decoded judge (issue 43) over many generated datasets and netCDF-C's CDL corpus.

    .venv/bin/python bench/bench_decoded.py [--examples 200] [--s3] [--cdl DIR | --no-cdl] [--keep 3]
                                            [--paths nc/netcdf4,nc/scipy]

Draws ``--examples`` Hypothesis examples (fixed seed; tests/decoded/strategies.py: every dtype,
fill, time encoding, packing, chunking, compressor xarray writes, Zarr v2 and v3, groups), writes
each with xarray onto a directory that is mounted read-only once per view (as-stored, xarray,
netcdf-4.10, netcdf-4.9.1, netcdf-4.9, each with -o nc_files), and judges what xarray decodes
through every path (tests/decoded/judge.py PATHS) against what it decodes from the store itself.
Then netCDF-C's CDL corpus (default ``../shared/corpus/netcdf-c-cdl``), each file written by
``ncgen`` to netCDF-4 and by xarray to Zarr v2 and v3 as tests/fidelity/writers.py does, judged the
same way; with ``--s3`` the generated examples again on a SeaweedFS S3 mount. Prints per corpus a
table per path: examples decoded equal, equal but for documented adaptations, differing in
metadata only, differing in data (values, dtypes, variables, or failing to open), not applicable
(scipy on CDF-5); then the first ``--keep`` differences of each path with the example's
variables and encodings. ``--paths`` judges only the paths named (comma-separated, of
tests/decoded/judge.py PATHS); ``--examples 0`` skips the generated examples.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.decoded.judge import PATHS, stop_worker  # noqa: E402
from tests.decoded.run import Site, Tally, judge_examples, mounted_views, write_examples  # noqa: E402
from tests.fidelity.writers import CDL_DIR, write_cdl  # noqa: E402
from tests.helpers import DirectoryBackend, S3Backend  # noqa: E402

VIEWS = ("as-stored", "xarray", "netcdf-4.10", "netcdf-4.9.1", "netcdf-4.9")


def commit() -> str:
    root = Path(__file__).resolve().parents[1]
    return subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


def cdl_default() -> Path:
    """``shared/corpus/netcdf-c-cdl`` beside the checkout, or beside a folder above it (a git
    worktree under ``wt/``)."""
    for up in Path(__file__).resolve().parents[1].parents:
        if (up / "shared" / "corpus" / "netcdf-c-cdl").is_dir():
            return up / "shared" / "corpus" / "netcdf-c-cdl"
    return CDL_DIR


def generated(work: Path, examples: int, keep: int, paths: list[str]) -> Tally:
    backend = DirectoryBackend(work / "gen")
    backend.root.mkdir()
    site = Site(backend, {}, backend.root)
    written = write_examples(site, examples)
    tally = Tally(keep=keep)
    with mounted_views(backend, work / "gen-mnt", VIEWS) as site.roots:
        judge_examples(site, written, paths, tally)
    print(f"== generated: {len(written)} examples judged", flush=True)
    return tally


def cdl_corpus(work: Path, cdl_dir: Path, keep: int, paths: list[str]) -> Tally:
    """netCDF-C's CDL files through ncgen, then xarray to Zarr v2 and v3 (as the fidelity matrix)."""
    stores = work / "cdl"
    written = []
    if not any(cdl_dir.glob("*.cdl")):
        raise SystemExit(f"bench_decoded: no CDL files in {cdl_dir} (--cdl DIR names the corpus, --no-cdl skips it)")
    for cdl in sorted(cdl_dir.glob("*.cdl")):
        done = write_cdl(cdl, stores, writers=("xz2", "xz3"))
        written += [(f"{w}/{cdl.stem}.file", f"{cdl.name} written by xarray as Zarr v{w[-1]}")
                    for w in ("xz2", "xz3") if done.get(w, "").startswith("ok")]
    print(f"== CDL corpus: {len(written)} stores written", flush=True)
    backend = DirectoryBackend(stores)
    site = Site(backend, {}, stores)
    tally = Tally(keep=keep)
    with mounted_views(backend, work / "cdl-mnt", VIEWS) as site.roots:
        judge_examples(site, written, paths, tally)
    return tally


def on_s3(work: Path, examples: int, keep: int, paths: list[str]) -> Tally:
    from tests.s3server import SeaweedS3

    server = SeaweedS3(work / "seaweed")
    server.start()
    try:
        os.environ.update(server.write_aws_files(work / "aws"))
        backend = S3Backend(server, server.new_bucket(), "gen")
        (work / "s3-staging").mkdir()
        site = Site(backend, {}, work / "s3-staging", server.endpoint)
        written = write_examples(site, examples)  # before the mount: its cached root listing
        tally = Tally(keep=keep)
        with mounted_views(backend, work / "s3-mnt", VIEWS) as site.roots:
            judge_examples(site, written, paths, tally)
        return tally
    finally:
        server.stop()


def report(title: str, tally: Tally) -> None:
    print(f"\n## {title}\n")
    print(tally.table())
    if tally.unreadable:
        print(f"\n{len(tally.unreadable)} store(s) xarray cannot read itself (no expected), e.g. "
              + "; ".join(f"{d.splitlines()[0]}: {e}" for d, e in tally.unreadable[:3]))
    for path in PATHS:
        if tally.firsts.get(path):
            print(f"\n### {path}: the kinds of difference (examples showing each), then the first ones\n")
            print(tally.common(path, 14))
            print()
            print(tally.failures(path))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=200)
    ap.add_argument("--s3", action="store_true", help="the generated examples on an S3 mount too")
    ap.add_argument("--cdl", type=Path, default=cdl_default())
    ap.add_argument("--no-cdl", action="store_true")
    ap.add_argument("--keep", type=int, default=3, help="differences shown per path")
    ap.add_argument("--paths", default=",".join(PATHS), help="the paths judged, comma-separated")
    args = ap.parse_args()
    paths = [p for p in args.paths.split(",") if p]
    if unknown := [p for p in paths if p not in PATHS]:
        raise SystemExit(f"bench_decoded: --paths: no path {', '.join(unknown)} (paths: {', '.join(PATHS)})")
    warnings.simplefilter("ignore")
    work = Path(tempfile.mkdtemp(prefix="bench-decoded-"))
    t0 = time.monotonic()
    print(f"# decoded judge, {datetime.date.today()}, commit {commit()}, {args.examples} examples", flush=True)
    try:
        if args.examples:
            report(f"directory mount: {args.examples} generated examples",
                   generated(work, args.examples, args.keep, paths))
        if not args.no_cdl:
            report("directory mount: netCDF-C's CDL corpus written by xarray (Zarr v2, v3)",
                   cdl_corpus(work, args.cdl, args.keep, paths))
        if args.s3:
            report(f"S3 mount: {args.examples} generated examples", on_s3(work, args.examples, args.keep, paths))
    finally:
        stop_worker()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n(total {time.monotonic() - t0:.0f} s)")


if __name__ == "__main__":
    main()
