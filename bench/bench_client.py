"""CPU per GET from trio: the ways nczfs can send an S3 request, in one run, on one SeaweedFS.

    .venv/bin/python bench/bench_client.py [--small 2000] [--big 40] [--rounds 5] [--https]

Each path reads the same objects from a trio program as the daemon does (``--inflight``
requests at once): ``--small`` ranged GETs of 4 KiB (pinned with If-Match) and ``--big`` GETs of
a whole 8 MiB object (by its range, as the mount asks for a block). It prints the process's CPU
time (user + system, every thread, getrusage) per request, median of ``--rounds`` interleaved
rounds, and the wall time. Paths:

- ``boto3``: botocore's get_object in a worker thread (trio.to_thread);
- ``store``: nczfs's S3 backend as the mount uses it (nczfs/store/objstore/store.py, ThreadedStore);
- ``obstore-thread``: obstore's blocking API in a worker thread (trio.to_thread);
- ``obstore-thread-nocopy``: the same, keeping obstore's buffer (no copy into a ``bytes``);
- ``obstore-asyncio``: obstore's async API on one asyncio loop thread, each request handed to
  it and its result handed back to the waiting trio task (:class:`AsyncioThread`).

With ``--https`` SeaweedFS serves S3 over TLS with a certificate of a private CA (as AWS users
reach S3, over https). Not part of CI.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.s3server import ADMIN, SeaweedS3  # noqa: E402

MiB = 1024 * 1024


class AsyncioThread:
    """An asyncio loop in a thread of its own, running coroutines for trio tasks: the request
    handed over with call_soon_threadsafe, the result handed back with the trio token."""

    def __init__(self) -> None:
        import asyncio
        import threading

        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    async def run(self, fn, *args):
        import asyncio

        import outcome

        token, task = trio.lowlevel.current_trio_token(), trio.lowlevel.current_task()

        def start() -> None:
            fut = asyncio.ensure_future(fn(*args))
            fut.add_done_callback(lambda f: token.run_sync_soon(trio.lowlevel.reschedule, task, outcome.capture(f.result)))

        self.loop.call_soon_threadsafe(start)
        return await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def drive(n: int, inflight: int, one) -> None:
    limiter = trio.CapacityLimiter(inflight)

    async def worker(i: int) -> None:
        async with limiter:
            await one(i)

    async with trio.open_nursery() as nursery:
        for i in range(n):
            nursery.start_soon(worker, i)


def make_paths(endpoint: str, bucket: str, ca: str | None):
    import boto3
    import obstore as obs
    from botocore.config import Config

    from nczfs.store.values import ByteRange
    from nczfs.store.objstore.store import S3Store
    from nczfs.store.threads import ThreadedStore

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ADMIN[0], aws_secret_access_key=ADMIN[1],
                          region_name="us-east-1", verify=ca,
                          config=Config(s3={"addressing_style": "path"}, max_pool_connections=32))
    store = ThreadedStore(S3Store(client, bucket, ""))
    from nczfs.store.objstore.transport import obstore_client_options

    ob = obs.store.S3Store(bucket, endpoint=endpoint, access_key_id=ADMIN[0], secret_access_key=ADMIN[1],
                           region="us-east-1", client_options=obstore_client_options(endpoint, ca),
                           virtual_hosted_style_request=False)
    bridge = AsyncioThread()
    etags = {k: client.head_object(Bucket=bucket, Key=k)["ETag"] for k in ("small", "big")}

    def rng(key: str, i: int) -> tuple[int, int]:
        """4 KiB of the small object; the whole big one, as the mount's cache asks for a block:
        by its range."""
        return ((i * 4096) % (MiB - 4096), (i * 4096) % (MiB - 4096) + 4096) if key == "small" else (0, 8 * MiB)

    async def boto(key: str, i: int) -> None:
        r = rng(key, i)
        kw = {"Range": f"bytes={r[0]}-{r[1] - 1}"}
        await trio.to_thread.run_sync(lambda: client.get_object(Bucket=bucket, Key=key, IfMatch=etags[key], **kw)["Body"].read())

    async def nczfs_store(key: str, i: int) -> None:
        r = rng(key, i)
        await store.get_version(key, ByteRange(*r), etags[key].strip('"'))

    def options(key: str, i: int) -> dict:
        r = rng(key, i)
        return {"if_match": etags[key], "range": r}

    async def ob_thread(key: str, i: int) -> None:
        await trio.to_thread.run_sync(lambda: bytes(obs.get(ob, key, options=options(key, i)).bytes()))

    async def ob_thread_nocopy(key: str, i: int) -> None:
        await trio.to_thread.run_sync(lambda: obs.get(ob, key, options=options(key, i)).bytes())


    async def fetch(key: str, i: int):
        return await (await obs.get_async(ob, key, options=options(key, i))).bytes_async()

    async def ob_asyncio(key: str, i: int) -> None:
        await bridge.run(fetch, key, i)

    return {"boto3": boto, "store": nczfs_store, "obstore-thread": ob_thread, "obstore-asyncio": ob_asyncio,
            "obstore-thread-nocopy": ob_thread_nocopy}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", type=int, default=2000)
    ap.add_argument("--big", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--inflight", type=int, default=8)
    ap.add_argument("--https", action="store_true")
    ap.add_argument("--paths", default="boto3,store,obstore-thread,obstore-thread-nocopy,obstore-asyncio")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nczfs-bench-client-"))
    server = SeaweedS3(work / "weed", tls=args.https)
    server.start()
    try:
        bucket = server.new_bucket("client")
        c = server.client()
        c.put_object(Bucket=bucket, Key="small", Body=os.urandom(MiB))
        c.put_object(Bucket=bucket, Key="big", Body=os.urandom(8 * MiB))
        endpoint, ca = (server.https_endpoint, str(server.ca_file)) if args.https else (server.endpoint, None)
        paths = make_paths(endpoint, bucket, ca)
        wanted = args.paths.split(",")
        results: dict[tuple[str, str], list[tuple[float, float]]] = {}

        async def round_() -> None:
            for name in wanted:
                fn = paths[name]
                for key, n in (("small", args.small), ("big", args.big)):
                    c0, t0 = cpu(), time.perf_counter()
                    await drive(n, args.inflight, lambda i, fn=fn, key=key: fn(key, i))
                    results.setdefault((name, key), []).append(((cpu() - c0) / n, time.perf_counter() - t0))

        async def all_rounds() -> None:
            await drive(50, args.inflight, lambda i: paths[wanted[0]]("small", i))  # warm-up: connections
            for name in wanted:
                await drive(20, args.inflight, lambda i, name=name: paths[name]("small", i))
            for _ in range(args.rounds):
                await round_()

        trio.run(all_rounds)
        scheme = "https" if args.https else "http"
        print(f"\n| path ({scheme}, {args.inflight} in flight, median of {args.rounds}) | CPU ms per 4 KiB GET | wall s ({args.small}) "
              f"| CPU ms per 8 MiB GET | wall s ({args.big}) |")
        print("|---|---:|---:|---:|---:|")
        for name in wanted:
            s, b = results[(name, "small")], results[(name, "big")]
            print(f"| {name} | {statistics.median(x[0] for x in s) * 1e3:.3f} | {statistics.median(x[1] for x in s):.2f} "
                  f"| {statistics.median(x[0] for x in b) * 1e3:.2f} | {statistics.median(x[1] for x in b):.2f} |")
        print(f"\nload average before the run's end: {os.getloadavg()}")
    finally:
        server.stop()
        os.system(f"rm -rf {work}")


if __name__ == "__main__":
    main()
