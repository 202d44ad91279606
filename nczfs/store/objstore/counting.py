"""The requests an object store sent, counted by the names ``nczfs stats`` shows, and the
errors of those that failed (translated, obstore's own retries counted as requests)."""

from __future__ import annotations

import re
import threading
from collections import Counter
from typing import Mapping

from nczfs.toolbox import metrics
from nczfs.toolbox.errors import NczfsError
from nczfs.store.objstore.errors import translate_obstore

#: a request's name as a service calls it (S3: GetObject, PutObject; the others GET, PUT)
OPERATION = re.compile(r"[A-Z][A-Za-z0-9]+")

metrics.declare(
    {"retries-considered": ("counter", "", "S3 requests that failed in a way that is retried (connection, timeout, 5xx)")},
    metrics.Family("nczfs_s3_requests", "S3 requests sent, by operation",
                   lambda key: key if OPERATION.fullmatch(key) else None),
)


class RequestCounts:
    """Counts by name; ``ops`` names each kind of request (``get``, ``put``, ...) as ``service``
    calls it (S3: GetObject, PutObject; the others GET, PUT)."""

    def __init__(self, service: str, ops: Mapping[str, str]):
        self.service = service
        self.ops = ops
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def count(self, kind: str, n: int = 1) -> None:
        """``n`` requests of ``kind`` (a key of ``ops``) sent."""
        self.add(self.ops[kind], n)

    def add(self, name: str, n: int = 1) -> None:
        """``n`` more of counter ``name`` (a request boto3 names itself, retries, ...)."""
        with self._lock:
            self._counts[name] += n

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def error(self, exc: BaseException, key: str, kind: str) -> NczfsError:
        """The nczfs error of a failed request of ``kind``; the attempts obstore made (its
        message says how many it retried) are counted as requests."""
        retried = re.search(r"after (\d+) retries", str(exc))
        if retried and int(retried.group(1)):
            self.count(kind, int(retried.group(1)))
            self.add("retries-considered", int(retried.group(1)))
        return translate_obstore(exc, key, self.ops[kind], self.service)
