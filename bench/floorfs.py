"""The least a pyfuse3 daemon can do for a reader of small files: bench/bench_floor.py's floor.

    python bench/floorfs.py SOURCE MOUNTPOINT [--mode memory|disk] [--no-flush] [--plain-loop]
    python bench/floorfs.py --s3 BUCKET --endpoint URL --key K --secret S MOUNTPOINT [--thread|--loop] [--whole]
    python bench/floorfs.py --icechunk BUCKET/PREFIX --array small --endpoint URL --key K --secret S
        MOUNTPOINT [--at-open]

A read-only tree answered with nothing but lookup, getattr, opendir/readdir/releasedir, open,
read, flush and release, on pyfuse3 and trio, mounted with the options nczfs mounts a directory
with (``default_permissions``, entries and attributes valid 60 s, missing names answered with a
negative entry of 60 s, files opened with ``keep_cache``). Its tree is taken once at start:

- ``memory``: every file of SOURCE read into memory; a read is a slice of bytes;
- ``disk``: SOURCE's tree; open/pread/close of the file on trio's thread, no worker thread;
- ``--s3``: the bucket's listing (names and sizes); a read is one obstore GET of the range, on
  trio's thread (``--thread``: in a worker thread, as a daemon that keeps answering would;
  ``--loop``: sent with obstore's async API on an asyncio loop in a thread of its own).
  ``--whole``: the first READ of an object GETs it whole (with ``--thread`` or ``--loop`` as
  above), later READs of it (and READs waiting for that GET) are slices of it in memory, dropped
  at the release of its last handle: what a daemon that caches a big chunk must do at the least.
  ``--at-open``: as ``--icechunk``'s below, the object GET whole at OPEN and stored in the page
  cache (``notify_store``): no READ. ``--memory``: every object GET at start (not timed), the
  READs answered from memory: what FUSE alone costs;
- ``--icechunk``: the keys of one array (``--array``: its zarr.json and chunks) of an Icechunk
  repository's main branch, listed with their sizes through icechunk's store of a readonly
  session; a read is one ``store.get`` of the range, sent on an asyncio loop in a thread of its
  own (the trio task woken through its token, as ``--loop``). ``--at-open``: the whole chunk
  fetched at OPEN (when no other handle of the inode is open) and handed to the kernel's page
  cache with ``notify_store`` before the open is answered with ``keep_cache``: no READ follows.
  ``--memory``: every key's bytes fetched at start too (not timed), the reads answered from memory
  (with ``--at-open``: stored from memory at OPEN). ``--burst K``: at OPEN, the chunk and its next
  K-1 chunks by number (``.../c/N``) not yet held fetched in one ``get_partial_values`` (one hop
  to the loop), held until their own OPEN stores them in the page cache (implies ``--at-open``).

``--read-ahead-kb K``: the mount's kernel readahead set to K KiB once it serves (nczfs's
``read_ahead_kb``, default 4096: READs of up to 1 MiB instead of 128 KiB). ``--reuse-heap``:
glibc told to keep freed big blocks for the next ones, as nczfs's daemon does
(``nczfs.daemon.mount.reuse_freed_blocks``: an 8 MiB object is not a fresh mmap, page-faulted
anew, each time).

FLUSH is answered (nothing to do), or with ENOSYS (``--no-flush``: the kernel then sends none).
The request loop runs on nczfs's trio shim (nczfs/fuse/trio_loop.py), or on pyfuse3's own
(``--plain-loop``). The requests it answered, by operation, go to ``--counts FILE`` (JSON) when
it is unmounted.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import stat
import sys
from collections import Counter
from pathlib import Path

import pyfuse3
import trio

TTL = 60.0  # nczfs's metadata TTL for a directory mount (capabilities.LONG_TTL)


class Node:
    __slots__ = ("ino", "is_dir", "size", "children", "source", "data")

    def __init__(self, ino: int, is_dir: bool, size: int = 0, source: str = ""):
        self.ino, self.is_dir, self.size, self.source = ino, is_dir, size, source
        self.children: dict[bytes, int] = {}
        self.data = b""


class FloorFs(pyfuse3.Operations):
    supports_dot_lookup = True
    enable_writeback_cache = False
    enable_acl = False

    def __init__(self, flush: bool):
        super().__init__()
        self.nodes = {pyfuse3.ROOT_INODE: Node(pyfuse3.ROOT_INODE, True)}
        self.answer_flush = flush
        self.counts: Counter[str] = Counter()
        self.uid, self.gid = os.getuid(), os.getgid()
        self.fetch = None  # (key, start, end) -> bytes: the S3 mode's GET
        self.disk = False  # files opened and read from their source (fh: the descriptor)
        self.at_open = False  # the whole file fetched at OPEN into the page cache (notify_store)
        self.opened: Counter[int] = Counter()  # handles open, by inode (--at-open)
        self.burst = 0  # --burst K: chunks fetched K at a time at OPEN, held in node.data until theirs
        self.fetch_many = None  # [(key, size)] -> [bytes]: one hop for a burst
        self.by_source: dict[str, Node] = {}
        self.pending: dict[int, trio.Event] = {}  # a burst under way, by the inodes it fetches
        self.whole = False  # --whole: an object GET whole at its first READ, held while open

    def add(self, path: str, size: int | None, source: str) -> Node:
        """The node of ``path`` (parents made as needed): a file of ``size``, or a directory (None)."""
        node = self.nodes[pyfuse3.ROOT_INODE]
        parts = [p for p in path.split("/") if p]
        for i, part in enumerate(parts):
            name = os.fsencode(part)
            if name not in node.children:
                last = i == len(parts) - 1
                child = Node(len(self.nodes) + 1, not last or size is None, size or 0, source if last else "")
                self.nodes[child.ino] = child
                node.children[name] = child.ino
            node = self.nodes[node.children[name]]
        return node

    def entry(self, node: Node) -> pyfuse3.EntryAttributes:
        e = pyfuse3.EntryAttributes()
        e.st_ino = node.ino
        e.entry_timeout = e.attr_timeout = TTL
        e.st_mode = (stat.S_IFDIR | 0o755) if node.is_dir else (stat.S_IFREG | 0o644)
        e.st_nlink = 2 if node.is_dir else 1
        e.st_uid, e.st_gid = self.uid, self.gid
        e.st_size = node.size
        e.st_blksize = 128 * 1024
        e.st_blocks = (node.size + 511) // 512
        return e

    async def lookup(self, parent_inode, name, ctx=None):
        self.counts["lookup"] += 1
        ino = self.nodes[parent_inode].children.get(name)
        if ino is None:
            e = pyfuse3.EntryAttributes()
            e.st_ino = 0
            e.entry_timeout = TTL
            return e
        return self.entry(self.nodes[ino])

    async def getattr(self, inode, ctx=None):
        self.counts["getattr"] += 1
        return self.entry(self.nodes[inode])

    async def opendir(self, inode, ctx):
        self.counts["opendir"] += 1
        return inode

    async def readdir(self, fh, start_id, token):
        self.counts["readdir"] += 1
        items = list(self.nodes[fh].children.items())
        for i, (name, ino) in enumerate(items[start_id:], start_id + 1):
            if not pyfuse3.readdir_reply(token, name, self.entry(self.nodes[ino]), i):
                break

    async def releasedir(self, fh):
        self.counts["releasedir"] += 1

    async def open(self, inode, flags, ctx):
        self.counts["open"] += 1
        if flags & os.O_ACCMODE != os.O_RDONLY:
            raise pyfuse3.FUSEError(errno.EROFS)
        fh = os.open(self.nodes[inode].source, os.O_RDONLY) if self.disk else inode
        if self.whole:
            self.opened[inode] += 1
        if self.at_open:
            await self.store_pages(self.nodes[inode])
        return pyfuse3.FileInfo(fh=fh, keep_cache=True)

    async def store_pages(self, node: Node) -> None:
        """The whole file into the kernel's page cache, if no other handle of it is open."""
        first = not self.opened[node.ino]
        self.opened[node.ino] += 1
        if not first or not node.size:
            return
        try:
            if self.burst:
                await self.fetch_burst(node)
                data, node.data = node.data, b""  # handed to the kernel (a later READ fetches again)
            elif self.fetch is None:
                data = node.data
            else:
                self.counts["get"] += 1
                data = await self.fetch(node.source, 0, node.size)
            pyfuse3.notify_store(node.ino, 0, data)
        except BaseException:
            self.opened[node.ino] -= 1
            raise

    async def fetch_burst(self, node: Node) -> None:
        """``node``'s bytes into node.data, with its next ``burst - 1`` numbered siblings' not held."""
        if node.ino in self.pending:
            await self.pending[node.ino].wait()
        if node.data:
            return
        group = [node]
        head, _, number = node.source.rpartition("/")
        if number.isdigit():
            for i in range(int(number) + 1, int(number) + self.burst):
                sibling = self.by_source.get(f"{head}/{i}")
                if sibling is not None and not sibling.data and sibling.ino not in self.pending \
                        and not self.opened[sibling.ino]:
                    group.append(sibling)
        done = trio.Event()
        for n in group:
            self.pending[n.ino] = done
        try:
            for n, data in zip(group, await self.fetch_many([(n.source, n.size) for n in group])):
                n.data = data
        finally:
            for n in group:
                del self.pending[n.ino]
            done.set()

    async def read(self, fh, off, size):
        self.counts["read"] += 1
        if self.disk:
            return os.pread(fh, size, off)
        node = self.nodes[fh]
        if self.fetch is None:
            return node.data[off:off + size]
        end = min(off + size, node.size)
        if off >= end:
            return b""
        if self.whole:
            return (await self.held(node))[off:end]
        self.counts["get"] += 1
        return await self.fetch(node.source, off, end)

    async def held(self, node: Node) -> memoryview:
        """``node``'s whole object, GET at the first READ; READs meanwhile wait for that GET."""
        if node.ino in self.pending:
            await self.pending[node.ino].wait()
        if not node.data:
            done = self.pending[node.ino] = trio.Event()
            try:
                self.counts["get"] += 1
                node.data = memoryview(await self.fetch(node.source, 0, node.size))
            finally:
                del self.pending[node.ino]
                done.set()
        if len(node.data) != node.size:
            raise pyfuse3.FUSEError(errno.EIO)
        return node.data

    async def flush(self, fh):
        self.counts["flush"] += 1
        if not self.answer_flush:
            raise pyfuse3.FUSEError(errno.ENOSYS)

    async def release(self, fh):
        self.counts["release"] += 1
        if self.disk:
            os.close(fh)
        elif self.at_open:
            self.opened[fh] -= 1
        elif self.whole:
            self.opened[fh] -= 1
            if not self.opened[fh]:
                self.nodes[fh].data = b""  # the object's bytes held no longer

    async def forget(self, inode_list):
        self.counts["forget"] += len(inode_list)


def load_directory(fs: FloorFs, source: Path, memory: bool) -> None:
    for dirpath, dirnames, filenames in os.walk(source):
        rel = os.path.relpath(dirpath, source)
        for d in dirnames:
            fs.add(os.path.join(rel, d), None, "")
        for f in filenames:
            path = os.path.join(dirpath, f)
            node = fs.add(os.path.join(rel, f), os.path.getsize(path), path)
            if memory:
                node.data = Path(path).read_bytes()
    fs.disk = not memory


def load_bucket(fs: FloorFs, args: argparse.Namespace) -> None:
    import obstore
    from obstore.store import S3Store

    store = S3Store(args.s3, endpoint=args.endpoint, access_key_id=args.key, secret_access_key=args.secret,
                    region="us-east-1", client_options={"allow_http": True})
    for batch in obstore.list(store):
        for meta in batch:
            fs.add(meta["path"], meta["size"], meta["path"])

    def get(key: str, start: int, end: int) -> bytes:
        return obstore.get_range(store, key, start=start, end=end)

    async def inline(key: str, start: int, end: int) -> bytes:
        return get(key, start, end)

    async def threaded(key: str, start: int, end: int) -> bytes:
        return await trio.to_thread.run_sync(get, key, start, end)

    async def get_async(key: str, start: int, end: int):
        return await obstore.get_range_async(store, key, start=start, end=end)

    fs.fetch = threaded if args.thread else on_loop(loop_thread(), get_async) if args.loop else inline
    fs.whole = args.whole
    fs.at_open = args.at_open
    if args.memory:  # every object's bytes GET now (not timed): READs from memory
        for node in fs.nodes.values():
            if not node.is_dir:
                node.data = memoryview(get(node.source, 0, node.size)) if node.size else b""
        fs.fetch = None


def loop_thread():
    """An asyncio loop running in a thread of its own."""
    import asyncio
    import threading

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    return loop


def on_loop(loop, get):
    """Each fetch ``get(*args)`` (a coroutine) sent on ``loop``, the trio task woken through its
    token when the answer is in: no worker thread."""
    import asyncio

    async def fetch(*args):
        done, token = trio.Event(), trio.lowlevel.current_trio_token()
        future = asyncio.run_coroutine_threadsafe(get(*args), loop)
        future.add_done_callback(lambda _: token.run_sync_soon(done.set))
        await done.wait()
        return future.result()

    return fetch


def load_icechunk(fs: FloorFs, args: argparse.Namespace) -> None:
    """The array's keys and sizes (not timed); each read one ``store.get`` of its range."""
    import asyncio

    import icechunk
    from zarr.abc.store import RangeByteRequest
    from zarr.core.buffer import default_buffer_prototype

    bucket, _, prefix = args.icechunk.partition("/")
    storage = icechunk.s3_storage(bucket=bucket, prefix=prefix, endpoint_url=args.endpoint, allow_http=True,
                                  region="us-east-1", access_key_id=args.key, secret_access_key=args.secret,
                                  force_path_style=True)
    store = icechunk.Repository.open(storage).readonly_session(branch="main").store
    loop = loop_thread()

    async def listing() -> list[tuple[str, int]]:
        keys = [k async for k in store.list_prefix(args.array.rstrip("/") + "/")]
        sizes: list[int] = []
        for i in range(0, len(keys), 16):  # a few at a time: each takes a thread of icechunk's pool
            sizes += await asyncio.gather(*(store.getsize(k) for k in keys[i:i + 16]))
        return list(zip(keys, sizes))

    keys = asyncio.run_coroutine_threadsafe(listing(), loop).result()
    if not keys:
        raise SystemExit(f"floorfs: no key under {args.array!r} in {args.icechunk}")
    for key, size in keys:
        fs.by_source[key] = fs.add(key, size, key)
    prototype = default_buffer_prototype()

    async def get(key: str, start: int, end: int) -> bytes:
        buf = await store.get(key, prototype, RangeByteRequest(start, end))
        if buf is None:
            raise OSError(errno.EIO, f"{key}: missing from the repository")
        return buf.to_bytes()

    async def get_many(ranges: list[tuple[str, int]]) -> list[bytes]:
        bufs = await store.get_partial_values(prototype, [(k, RangeByteRequest(0, size)) for k, size in ranges])
        for (key, _), buf in zip(ranges, bufs):
            if buf is None:
                raise OSError(errno.EIO, f"{key}: missing from the repository")
        return [buf.to_bytes() for buf in bufs]

    fs.fetch = on_loop(loop, get)
    fs.fetch_many = on_loop(loop, get_many)
    fs.at_open = args.at_open or args.burst > 0
    fs.burst = args.burst
    if args.memory:
        async def every() -> list[bytes]:
            out: list[bytes] = []
            for i in range(0, len(keys), 16):
                out += await get_many(keys[i:i + 16])
            return out

        for (key, _), data in zip(keys, asyncio.run_coroutine_threadsafe(every(), loop).result()):
            fs.by_source[key].data = data
        fs.fetch = None


async def serve(mountpoint: str, read_ahead_kb: int) -> None:
    """pyfuse3's request loop; the readahead set (``read_ahead_kb``) once the mount answers."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pyfuse3.main)
        if read_ahead_kb:
            from nczfs.daemon.mount import set_read_ahead

            st = await trio.to_thread.run_sync(os.stat, mountpoint)
            await trio.to_thread.run_sync(set_read_ahead, st.st_dev, read_ahead_kb)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("source", nargs="?", help="the directory served (not with --s3)")
    ap.add_argument("mountpoint")
    ap.add_argument("--mode", choices=("memory", "disk"), default="memory")
    ap.add_argument("--s3", metavar="BUCKET", help="serve this bucket, one GET per read")
    ap.add_argument("--endpoint", default="")
    ap.add_argument("--key", default="")
    ap.add_argument("--secret", default="")
    ap.add_argument("--thread", action="store_true", help="--s3: each GET in a worker thread")
    ap.add_argument("--loop", action="store_true", help="--s3: each GET on an asyncio loop's thread")
    ap.add_argument("--whole", action="store_true",
                    help="--s3: an object GET whole at its first READ, later READs from memory while it is open")
    ap.add_argument("--icechunk", metavar="BUCKET/PREFIX", help="serve --array of this Icechunk repository (main)")
    ap.add_argument("--array", default="small", help="--icechunk: the array's path in the repository")
    ap.add_argument("--at-open", action="store_true", help="--s3, --icechunk: fetch a file whole at OPEN (notify_store)")
    ap.add_argument("--memory", action="store_true", help="--s3, --icechunk: every file fetched at start, read from memory")
    ap.add_argument("--burst", type=int, default=0, metavar="K",
                    help="--icechunk: at OPEN, a chunk and its next K-1 fetched in one get_partial_values")
    ap.add_argument("--read-ahead-kb", type=int, default=0, metavar="K",
                    help="set the mount's kernel readahead to K KiB once it serves (0: the kernel's default)")
    ap.add_argument("--reuse-heap", action="store_true", help="glibc keeps freed big blocks (as nczfs's daemon)")
    ap.add_argument("--no-flush", action="store_true", help="answer FLUSH with ENOSYS")
    ap.add_argument("--plain-loop", action="store_true", help="pyfuse3's own trio loop, not nczfs's shim")
    ap.add_argument("--counts", help="write the requests answered, by operation, here (JSON) at the end")
    args = ap.parse_args(argv)
    fs = FloorFs(flush=not args.no_flush)
    if args.s3:
        load_bucket(fs, args)
    elif args.icechunk:
        load_icechunk(fs, args)
    elif args.source:
        load_directory(fs, Path(args.source), args.mode == "memory")
    else:
        ap.error("a SOURCE directory, --s3 BUCKET or --icechunk BUCKET/PREFIX")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if not args.plain_loop:
        from nczfs.fuse import trio_loop

        trio_loop.install()
    if args.reuse_heap:
        from nczfs.daemon.mount import reuse_freed_blocks

        reuse_freed_blocks()
    pyfuse3.init(fs, args.mountpoint, {"fsname=floorfs", "subtype=floorfs", "default_permissions"})
    try:
        trio.run(serve, args.mountpoint, args.read_ahead_kb)
    finally:
        pyfuse3.close(unmount=False)
        if args.counts:
            Path(args.counts).write_text(json.dumps(fs.counts))


if __name__ == "__main__":
    main()
