"""What every part of the S3 store sends its requests with (:class:`S3Bucket`): the boto3 client
and the bucket, the mount's S3 options, obstore's one-attempt store, the S3 keys of store keys,
the request counters, and whether this thread's last request went out without an answer. Also
the listings boto3 gives where obstore cannot (a key holding a control character)."""

from __future__ import annotations

import threading
from typing import Any, Iterator

from nczfs.store.objstore.client import obstore_s3
from nczfs.store.objstore.counting import RequestCounts
from nczfs.store.objstore.errors import UNANSWERED, translate_boto
from nczfs.store.objstore.options import S3Options
from nczfs.store.objstore.paths import ObjectPaths


class S3Bucket:
    """``bucket`` through the boto3 ``client``, its keys ``paths``, its requests counted in
    ``requests`` (boto3's by the names boto3 gives them, from the client's events)."""

    def __init__(self, client: Any, bucket: str, options: S3Options, paths: ObjectPaths, requests: RequestCounts):
        self.client = client
        self.bucket = bucket
        self.options = options
        self.paths = paths
        self.requests = requests
        #: PUTs go through a store making one attempt a call: each attempt's failure tells whether
        #: the request went out without an answer (its outcome unknown), which obstore's own
        #: retries would hide behind their last error; it also checks such writes (one HEAD)
        self.once = obstore_s3(client, bucket, options.without_retries())
        #: whether an attempt of this thread's request went out without an answer
        self._attempts = threading.local()
        client.meta.events.register("before-send.s3", self._count_request)
        client.meta.events.register("needs-retry.s3", self._count_retry)

    def full(self, key: str) -> str:
        """The S3 key of store key ``key``."""
        return self.paths.full(key)

    # ------------------------------------------------------------------ requests, attempts

    def _count_request(self, event_name: str = "", **_: Any) -> None:
        self.requests.add(event_name.rsplit(".", 1)[-1])

    def _count_retry(self, response: Any = None, caught_exception: Any = None, **_: Any) -> None:
        # called after every attempt; a retry follows when the attempt failed (a connection
        # error or a timeout, or a 5xx) and retries are left
        if caught_exception is not None or (response is not None and (response[0] is None or response[0].status_code >= 500)):
            self.requests.add("retries-considered")
        if isinstance(caught_exception, UNANSWERED):
            self.went_unanswered()

    def went_unanswered(self) -> None:
        """An attempt of this thread's request (a write) went out and got no answer."""
        self._attempts.unanswered = True
        self.requests.add("unanswered")

    def start_request(self) -> None:
        """This thread's next request starts: none of its attempts went unanswered yet."""
        self._attempts.unanswered = False

    def was_unanswered(self) -> bool:
        """Did an attempt of this thread's request since :meth:`start_request` get no answer?"""
        return bool(getattr(self._attempts, "unanswered", False))

    # ------------------------------------------------------------------ keys obstore cannot name
    # S3 takes any UTF-8 in a key; obstore (object_store's paths) refuses ASCII control
    # characters, and fails a whole listing that holds one. boto3 serves those keys and listings.

    def list_other_way(self, base: str | None, delimiter: bool) -> Iterator[Any] | None:
        """The listing of path ``base`` through boto3, shaped as obstore's (Listings.other_way)."""
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=f"{base}/" if base else "", **({"Delimiter": "/"} if delimiter else {}),
            **self.options.payer())

        def meta(item: dict) -> dict:
            key = item["Key"]
            return {"path": key.rstrip("/"), "size": int(item["Size"]), "last_modified": item.get("LastModified"),
                    "e_tag": item.get("ETag"), "marker": key.endswith("/")}

        def listing() -> Iterator[Any]:
            try:
                if delimiter:
                    prefixes, objects = [], []
                    for page in pages:
                        self.requests.add("ListObjectsV2")
                        prefixes += [cp["Prefix"].rstrip("/") for cp in page.get("CommonPrefixes", ())]
                        objects += [meta(item) for item in page.get("Contents", ())]
                    yield {"common_prefixes": prefixes, "objects": objects}
                else:
                    for page in pages:
                        self.requests.add("ListObjectsV2")
                        yield [meta(item) for item in page.get("Contents", ())]
            except Exception as exc:
                raise translate_boto(exc, base or "/", "ListObjectsV2") from None

        return listing()
