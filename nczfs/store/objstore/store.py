"""A prefix of an S3 bucket as a store: obstore for reads, listings and PUTs; boto3 for the rest.

Every GET (ranged, pinned to the version with ``If-Match``), HEAD, LIST (ListObjectsV2 with
delimiter ``/``, all pages) and PutObject goes through obstore (:mod:`.objstore`): AWS
virtual-hosted over https, S3-compatible servers path style over http or https. boto3 stays for
what obstore does not offer: multipart uploads by upload id (:mod:`.uploads`), server-side
copies (multipart above 5 GiB: :mod:`.copies`), the attributes in objects' metadata
(:mod:`.meta`), and keys obstore cannot name (ASCII control characters). Both clients are made
from one boto3 client (:mod:`.client`). PutObject and writes of unknown outcome: :mod:`.puts`.
No directory-marker objects are written; keys ending in ``/`` written by other tools show as
directories.

:class:`S3Store` holds its parts, each given what it uses when it is made: the bucket and its
client (:class:`~.s3bucket.S3Bucket`), PutObjects, multipart uploads, copies, POSIX attributes;
it checks keys and that it is writable, and hands each operation to the part that does it.
"""

from __future__ import annotations

from dataclasses import replace
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, Iterator

import botocore.exceptions
import obstore as obs
from obstore.exceptions import InvalidPathError

from nczfs.toolbox.errors import Conflict, KeyNotFound, NotSupported, SourceError, Stale
from nczfs.store.objstore.s3url import S3Location
from nczfs.store.base import check_writable
from nczfs.store.keys import check_key, join, parent_of
from nczfs.store.values import ABSENT, ByteRange, DirEntry, Meta, ObjectInfo, Staged, Upload
from nczfs.store.objstore.copies import Copies
from nczfs.store.objstore.client import make_client, obstore_s3
from nczfs.store.objstore.options import S3Options
from nczfs.store.objstore.errors import DENIED, answered_other, code_of, message_of, translate_boto
from nczfs.store.objstore.meta import MetaOfWrites, PosixMeta
from nczfs.store.objstore.obprefix import UNNAMEABLE, ObjectStoreBackend, if_match
from nczfs.store.objstore.probe import probe_conditions
from nczfs.store.objstore.puts import Puts, refused_condition
from nczfs.store.objstore.s3bucket import S3Bucket
from nczfs.store.objstore.uploads import MultipartUploads

log = logging.getLogger(__name__)

#: the largest object S3 holds
MAX_OBJECT_BYTES = 5 * 1024**4
#: the request names ``nczfs stats`` shows for obstore's requests (boto3's name themselves)
S3_OPS = {"get": "GetObject", "head": "HeadObject", "list": "ListObjectsV2", "put": "PutObject",
          "delete": "DeleteObject", "copy": "CopyObject", "multipart": "MultipartUpload"}


def open_s3(options: S3Options, loc: S3Location) -> S3Store:
    """The S3 store of the bucket and prefix at ``loc``, checked to answer (:meth:`S3Store.probe`);
    a writable one's writes are conditional where the server honours conditions (one probe)."""
    store = S3Store(make_client(options, loc), loc.bucket, loc.prefix, read_only=options.read_only,
                    options=options, head_for_meta=options.posix_meta)
    store.probe(options.source)
    if not options.read_only and options.overwrite == "checked":
        checked = store.probe_conditions()
        store.capabilities = replace(store.capabilities, checks_writes=checked, checks_deletes=checked)
    return store


class S3Store(ObjectStoreBackend):
    # modes, owners, times, symlinks and special files in objects' user metadata (s3fs-fuse's);
    # SeaweedFS (and S3 gateways over a filer) list a folder for a while after its last key is
    # deleted: rmdir and directory renames delete those folders explicitly (see forget_dir)
    capabilities = replace(ObjectStoreBackend.capabilities, max_object_size=MAX_OBJECT_BYTES,
                           emptied_dirs_may_linger=True)

    def __init__(
        self,
        client,
        bucket: str,
        prefix: str = "",
        *,
        read_only: bool = False,
        multipart_threshold: int = 32 * 1024**2,
        part_size: int = 8 * 1024**2,
        max_concurrency: int = 16,
        options: S3Options = S3Options(),
        head_for_meta: bool = False,
    ):
        super().__init__(obstore_s3(client, bucket, options), prefix,
                         url=f"s3://{bucket}/{prefix.strip('/')}", service="S3", read_only=read_only, ops=S3_OPS,
                         multipart_threshold=multipart_threshold, part_size=part_size, max_concurrency=max_concurrency)
        self.s3 = S3Bucket(client, bucket, options, self.paths, self.requests)
        self.meta_of_writes = MetaOfWrites()
        self.posix = PosixMeta(self.s3, self.sizes, self.get, head_for_meta)
        self.capabilities = replace(self.capabilities, reads_meta=head_for_meta)
        self.puts = Puts(self.s3, self.meta_of_writes, self.stat)
        self.uploads = MultipartUploads(self.s3, self.sizes, self.puts, self.meta_of_writes)
        self.copies = Copies(self.s3, self.sizes, self.uploads, self.puts, self, self._delete_path)

    @property
    def bucket(self) -> str:
        return self.s3.bucket

    @property
    def head_for_meta(self) -> bool:
        """-o posix_meta: objects found by a lookup or a listing are asked (HEAD, through boto3:
        obstore's HEAD gives no user metadata) for the attributes in their metadata; else only
        what the mount wrote itself shows them."""
        return self.posix.head_for_meta

    # ------------------------------------------------------------------ the uploads' journal (JournalsUploads)

    @property
    def upload_log(self) -> Any:
        """Told of every upload opened and finished (runstate.UploadJournal; None: not told)."""
        return self.uploads.upload_log

    @upload_log.setter
    def upload_log(self, log: Any) -> None:
        self.uploads.upload_log = log

    @property
    def scope(self) -> str:
        """Where this store's objects live: the endpoint, the bucket and the prefix."""
        return f"{self.s3.client.meta.endpoint_url}/{self.s3.bucket}/{self.prefix}"

    def abort_uploads(self, uploads: dict[str, str]) -> dict[str, str]:
        return self.uploads.abort_uploads(uploads)

    # ------------------------------------------------------------------ reads

    def _dir_prefix(self, prefix: str) -> str:
        """The S3 prefix listing the children of ``prefix`` ("" is the mount root)."""
        full = self.paths.dir_path(prefix)
        return f"{full}/" if full else ""

    def list_other_way(self, base: str | None, delimiter: bool) -> Iterator[Any] | None:
        return self.s3.list_other_way(base, delimiter)

    def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        check_key(key)
        full = self._full(key)
        if not UNNAMEABLE.search(full) or (rng is not None and rng.end == rng.start):
            return super().get_version(key, rng, etag)
        s3 = self.s3
        kwargs: dict[str, Any] = {"Bucket": s3.bucket, "Key": full, **s3.options.payer()}
        if etag:
            kwargs["IfMatch"] = f'"{etag}"'
        if rng is not None and not (rng.start == 0 and rng.end is None):
            kwargs["Range"] = f"bytes={rng.start}-{'' if rng.end is None else rng.end - 1}"
        try:
            answer = s3.client.get_object(**kwargs)
            if (wrong := answered_other(key, if_match(etag), answer.get("ETag"))) is not None:
                raise wrong
            return answer["Body"].read()
        except botocore.exceptions.ClientError as exc:
            if code_of(exc) == "InvalidRange":
                return self._past_the_end(key, rng)
            raise translate_boto(exc, key, "GetObject") from None
        except Exception as exc:
            raise translate_boto(exc, key, "GetObject") from None

    def stat(self, key: str) -> ObjectInfo:
        check_key(key)
        full = self._full(key)
        if not UNNAMEABLE.search(full) and not self.head_for_meta:
            return super().stat(key)
        return self.posix.head(key, full)

    def list_dir(self, prefix: str) -> list[DirEntry]:
        entries = super().list_dir(prefix)
        if not self.head_for_meta:
            return entries
        files = [e for e in entries if not e.is_dir]

        def head(e: DirEntry) -> DirEntry | None:
            try:
                return DirEntry(e.name, False, self.stat(join(prefix, e.name)))
            except KeyNotFound:
                return None

        if files:  # -o posix_meta: a HEAD per object listed, in parallel
            with ThreadPoolExecutor(max_workers=min(8, self.sizes.max_concurrency, len(files))) as pool:
                headed = {e.name: h for e, h in zip(files, pool.map(head, files)) if h is not None}
            entries = [headed.get(e.name, e) if not e.is_dir else e for e in entries if e.is_dir or e.name in headed]
        return entries

    def list_tree(self, prefix: str, limit: int) -> dict[str, list[DirEntry]] | None:
        if self.head_for_meta:
            return None  # listed a directory at a time, whose objects are asked for their attributes
        return super().list_tree(prefix, limit)

    def _delete_path(self, key: str, path: str) -> None:
        if not UNNAMEABLE.search(path):
            return super()._delete_path(key, path)
        try:
            self.s3.client.delete_object(Bucket=self.s3.bucket, Key=path, **self.s3.options.payer())
        except Exception as exc:
            err = translate_boto(exc, key, "DeleteObject")
            if not isinstance(err, KeyNotFound):
                raise err from None

    def probe(self, text: str) -> None:  # type: ignore[override]  # the store probes with the source's text for its message
        """Fail now, with one line, if the bucket is missing, the credentials wrong or the endpoint down."""
        s3 = self.s3
        try:
            s3.client.list_objects_v2(Bucket=s3.bucket, Prefix=self._dir_prefix(""), MaxKeys=1, **s3.options.payer())
        except botocore.exceptions.ClientError as exc:
            code = code_of(exc)
            if code == "NoSuchBucket":
                raise SourceError(f"{text}: bucket {s3.bucket!r} does not exist") from None
            if code in DENIED:
                raise SourceError(f"{text}: S3 refused the credentials or access ({message_of(exc)})") from None
            raise SourceError(f"{text}: S3 error: {message_of(exc)}") from None
        except botocore.exceptions.NoCredentialsError:
            raise SourceError(
                f"{text}: no AWS credentials found (set a profile, AWS_ACCESS_KEY_ID, or --no-sign-request)"
            ) from None
        except botocore.exceptions.BotoCoreError as exc:  # unreachable endpoint, timeouts, bad config
            raise SourceError(f"{text}: cannot reach S3: {exc}") from None

    def entry(self, key: str) -> DirEntry | None:
        found = self._entry(key)
        if found is not None and not found.is_dir and self.head_for_meta:
            try:
                return DirEntry(found.name, False, self.stat(key))
            except KeyNotFound:
                return None
        return found

    def _entry(self, key: str) -> DirEntry | None:  # noqa: C901
        """Mostly one LIST: the keys from just before ``key`` on, in its directory (S3's
        start-after), say whether it is an object, a directory (which wins, as in listings) or
        nothing. Where the first keys leave that open (a directory named like ``key`` less its
        last character, full of keys), a LIST of ``key/`` and a HEAD decide."""
        check_key(key)
        full = self._full(key)
        before = _start_after(full)
        if before is None or UNNAMEABLE.search(full):
            return super().entry(key)
        name = key.rpartition("/")[2]
        self._count("list")
        try:
            chunk = next(iter(obs.list(self.store, self.paths.dir_path(parent_of(key)), offset=before,
                                       chunk_size=ENTRY_KEYS)), [])
        except Exception as exc:
            if isinstance(exc, (InvalidPathError, ValueError)):  # a key obstore cannot name nearby
                return super().entry(key)
            raise self._err(exc, key, "list") from None
        paths = [m["path"] for m in chunk]
        if any(p.startswith(full + "/") for p in paths):
            return DirEntry(name, True)
        if len(chunk) == ENTRY_KEYS and paths[-1] <= full + "/":
            return super().entry(key)  # not decided by the keys seen
        for meta in chunk:
            if meta["path"] == full:
                return DirEntry(name, True) if self.listings.is_marker(meta) else DirEntry(name, False, self._info(key, meta))
        return None

    # ------------------------------------------------------------------ writes (the parts')

    def set(self, key: str, data: bytes | bytearray | memoryview, if_version: str | None = None) -> ObjectInfo:
        check_key(key)
        check_writable(self, key)
        if len(data) >= self.sizes.multipart_threshold:
            return self.uploads.write(key, data, if_version)
        return self.puts.put(key, data, len(data), if_version)

    def set_file(self, key: str, f: BinaryIO, size: int, if_version: str | None = None) -> ObjectInfo:
        """Store ``size`` bytes of the file object ``f`` from its position; above the multipart
        threshold its parts are read one at a time and sent in parallel."""
        if size < self.sizes.multipart_threshold:
            return super().set_file(key, f, size, if_version)  # one PutObject, a short file refused
        check_key(key)
        check_writable(self, key)
        return self.uploads.write_file(key, f, size, if_version)

    def stage(self, key: str, data: bytes) -> Staged | None:
        check_key(key)
        check_writable(self, key)
        return self.uploads.stage(key, data)

    def open_upload(self, key: str) -> Upload:
        check_key(key)
        check_writable(self, key)
        return self.uploads.open_upload(key)

    def copy(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        check_key(src)
        check_key(dst)
        check_writable(self, dst)
        return self.copies.copy(src, dst, if_version)

    def rename_dir(self, src: str, dst: str) -> None:
        check_key(src)
        check_key(dst)
        check_writable(self, dst)
        self.copies.rename_dir(src, dst)

    def forget_dir(self, prefix: str) -> None:
        check_key(prefix)
        check_writable(self, prefix)
        self.copies.forget_dir(prefix)

    def write_meta(self, key: str, meta: Meta | None) -> None:
        self.meta_of_writes.note(key, meta)

    def set_meta(self, key: str, changes: Meta, is_dir: bool = False) -> Meta:
        if is_dir:
            raise NotSupported(f"{key!r}: nczfs writes no directory objects to S3")
        check_key(key)
        check_writable(self, key)
        return self.posix.set_meta(key, changes)

    def make_node(self, key: str, meta: Meta, target: str | None = None) -> ObjectInfo:
        check_key(key)
        check_writable(self, key)
        return self.posix.make_node(key, meta, target)

    def readlink(self, key: str) -> str:
        check_key(key)
        return self.posix.readlink(key)

    def probe_conditions(self) -> bool:
        """Does the server refuse a conditional write whose condition fails? One probe at mount
        time (:func:`~nczfs.store.objstore.probe.probe_conditions`), through the one-attempt store."""
        def refused(exc: BaseException, key: str) -> bool:
            return isinstance(translate_boto(self._err(exc, key, "put"), key, "PutObject"), Stale)

        return probe_conditions(self, self.s3.once, refused, "If-None-Match")

    def delete(self, key: str, if_version: str | None = None) -> None:
        """DeleteObject; ``if_version`` (where ``checks_deletes``): with ``If-Match``, refused
        (Conflict, one HEAD for the version found) while the object is another version."""
        check_key(key)
        check_writable(self, key)
        if not if_version or if_version == ABSENT or (pin := if_match(if_version)) is None:
            self._delete_path(key, self._full(key))
            return
        self._count("delete")
        try:
            self.s3.client.delete_object(Bucket=self.s3.bucket, Key=self._full(key), IfMatch=pin)
        except Exception as exc:
            err = translate_boto(exc, key, "delete")
            if isinstance(err, KeyNotFound):
                return  # gone already (AWS answers a missing key's If-Match 404)
            if not refused_condition(err, if_version):
                raise err from None
            try:
                found = self.stat(key).etag
            except KeyNotFound:
                return  # gone already (SeaweedFS answers a missing key's If-Match 412)
            raise Conflict(key, if_version, found) from None

    def close(self) -> None:
        self.uploads.close()
        super().close()
        try:
            self.s3.client.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass


#: keys one lookup's LIST looks at (the page it fetches holds up to 1,000)
ENTRY_KEYS = 8


def _start_after(key: str) -> str | None:
    """An S3 start-after from which a listing of ``key``'s directory begins with ``key`` (or
    with keys of a directory named like ``key`` less its last character, where that character
    follows "/"); None where none can be written."""
    last = ord(key[-1])
    prev = chr(last - 1) if last > 1 else ""
    if prev == "/":  # "x0": from "x." on ("x/..." comes first: the keys of directory "x")
        prev = "."
    if not prev or 0xD800 <= ord(prev) <= 0xDFFF:
        return None
    return key[:-1] + prev + "\U0010ffff"
