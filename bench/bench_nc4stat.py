"""The first ``stat`` of a ``NAME.nc4`` whose chunks are re-encoded as deflate (issue 45).

    .venv/bin/python bench/bench_nc4stat.py [--mib 256] [--checkouts BEFORE,AFTER] [--rounds 2]
                                            [--codec zstd|lz4] [--first-only]

A float32 array of --mib MiB (a sine plus noise, rounded to 0.01) as zarr-python's Zarr v3 default
(zstd; ``--codec lz4``: numcodecs' lz4), chunks of 8 MiB, in a directory; each checkout (a path put
first on the daemon's PYTHONPATH; "" for this one) mounts it read-only with ``-o
nc_files=netcdf4,cache_dir=DIR`` (a fresh DIR per checkout and round), and ``stat`` of ``ds.nc4`` is
timed: the first mount (no size known), a remount over the same DIR (sizes kept there, where the
checkout keeps them), and ``ncks -O -v temp`` from the file after it (``--first-only``: the first
stat alone). Daemon CPU seconds beside each; page cache dropped before each mount; the load average
printed before and after (a shared machine: CPU seconds say more).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.bench_directory import drop_caches  # noqa: E402
from bench.bench_s3 import cpu_seconds  # noqa: E402

MiB = 1024 * 1024


def make_data(work: Path, mib: int, codec: str = "zstd") -> Path:
    import numpy as np
    import zarr
    from zarr.codecs.numcodecs import LZ4

    src = work / "src"
    n = mib * MiB // 4
    g = zarr.open_group(str(src / "ds"), mode="w")
    a = g.create_array("temp", shape=(n,), chunks=(2 * MiB,), dtype="<f4", dimension_names=["n"],
                       fill_value=0.0, compressors=LZ4() if codec == "lz4" else "auto")
    rng = np.random.default_rng(0)
    x = np.arange(n, dtype="f4")
    a[:] = np.round(15 + 10 * np.sin(x / 5000) + rng.normal(0, 0.5, n).astype("f4"), 2)
    return src


def daemon_pid(mnt: Path) -> int:
    from nczfs.fuse.control import read_control

    return int(read_control(str(mnt))["pid"])


def one_mount(checkout: str, src: Path, mnt: Path, cache: Path, ncks: bool) -> list[tuple[float, float]]:
    """(wall, daemon CPU) of the first stat of ds.nc4, and of ncks from it if ``ncks``."""
    # run from the checkout: ``python -m`` puts the working directory before PYTHONPATH
    where = checkout or str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": where}
    drop_caches()
    subprocess.run([sys.executable, "-m", "nczfs", "mount", str(src), str(mnt), "--read-only",
                    "-o", f"nc_files=netcdf4,cache_dir={cache}"], check=True, env=env, cwd=where)
    try:
        pid = daemon_pid(mnt)
        out = []
        c0, t0 = cpu_seconds(pid), time.perf_counter()
        size = os.stat(mnt / "ds.nc4").st_size
        out.append((time.perf_counter() - t0, cpu_seconds(pid) - c0))
        if ncks:
            c0, t0 = cpu_seconds(pid), time.perf_counter()
            subprocess.run(["ncks", "-O", "-v", "temp", str(mnt / "ds.nc4"),
                            str(cache.parent / "out.nc")], check=True, capture_output=True)
            out.append((time.perf_counter() - t0, cpu_seconds(pid) - c0))
        print(f"  {checkout or 'this checkout'}: ds.nc4 {size / MiB:.1f} MiB", flush=True)
        return out
    finally:
        subprocess.run([sys.executable, "-m", "nczfs", "umount", str(mnt)], check=True, env=env, cwd=where)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--checkouts", default="/work/main,", help="comma-separated checkout paths ('' = this one)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--codec", choices=("zstd", "lz4"), default="zstd", help="the stored chunks' codec")
    ap.add_argument("--first-only", action="store_true", help="time the first stat only (no remount, no ncks)")
    args = ap.parse_args()
    print(f"load before: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="nc4stat-") as tmp:
        work = Path(tmp)
        src = make_data(work, args.mib, args.codec)
        mnt = work / "mnt"
        mnt.mkdir()
        for r in range(args.rounds):
            for checkout in args.checkouts.split(","):
                cache = work / f"cache-{r}-{abs(hash(checkout))}"
                first = one_mount(checkout, src, mnt, cache, ncks=False)
                if args.first_only:
                    print(f"round {r} {checkout or 'this checkout'}: first stat {first[0][0]:.2f} s "
                          f"(daemon CPU {first[0][1]:.2f} s), load {os.getloadavg()[0]:.1f}", flush=True)
                    continue
                again = one_mount(checkout, src, mnt, cache, ncks=True)
                print(f"round {r} {checkout or 'this checkout'}: first stat {first[0][0]:.2f} s "
                      f"(daemon CPU {first[0][1]:.2f} s); after a remount {again[0][0]:.2f} s "
                      f"(CPU {again[0][1]:.2f} s); ncks then {again[1][0]:.2f} s (CPU {again[1][1]:.2f} s)",
                      flush=True)
    print(f"load after: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
