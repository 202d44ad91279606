"""How every object-store request is bounded: timeouts, and the one retry policy.

:class:`Bounds` holds what ``-o retries=``, ``-o connect_timeout=`` and ``-o read_timeout=``
ask; each client gets its settings from it: obstore's ``client_options`` and ``retry_config``
(:meth:`Bounds.obstore`), botocore's ``retries`` (:meth:`Bounds.botocore`), and the attempts
nczfs makes one by one itself (:meth:`Bounds.attempts`: S3's PutObject, whose attempts must
each be judged). All three pause alike between attempts: 50 ms, doubling, at most 5 s.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, Mapping

from nczfs.toolbox.optionvalues import count, positive
from nczfs.store.options import OptionRow, to, valued

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig

#: seconds one attempt of a request may take in all (an answer trickled a byte at a time is
#: given up then): 32 MiB, the largest single PUT, at 1 Mbit/s
REQUEST_TIMEOUT = 300.0


def obstore_client_options(endpoint: str | None, ca_file: str | None = None, *, connect_timeout: float = 5,
                           read_timeout: float = 15, request_timeout: float = REQUEST_TIMEOUT,
                           allow_http: bool | None = None) -> ClientConfig:
    """obstore's HTTP client options: timeouts, ``http://`` allowed for an explicit ``http://``
    endpoint, a private CA's certificate added to the trusted ones. An attempt ends when no
    byte came for ``read_timeout`` seconds (a stall) or after ``request_timeout`` in all (a
    server trickling its answer); it is then retried as a connection failure is."""
    opts: ClientConfig = {
        "connect_timeout": datetime.timedelta(seconds=connect_timeout),
        "read_timeout": datetime.timedelta(seconds=read_timeout),
        "timeout": datetime.timedelta(seconds=request_timeout),
        "pool_idle_timeout": datetime.timedelta(seconds=50),
    }
    if allow_http or (allow_http is None and (endpoint or "").startswith("http://")):
        opts["allow_http"] = True
    if ca_file:
        with open(ca_file, "rb") as f:
            opts["root_certificate"] = f.read()
    return opts



#: the pause before the first retry, the factor from one pause to the next, the longest pause
#: (seconds), and how long obstore keeps retrying one request in all
INIT_BACKOFF, BACKOFF_BASE, MAX_BACKOFF, RETRY_TIMEOUT = 0.05, 2, 5.0, 120.0


def retry_config(retries: int = 2, *, retry_timeout: float = RETRY_TIMEOUT) -> RetryConfig:
    """obstore's retries as botocore's standard mode makes them (3 attempts in all), bounded in time."""
    return {"max_retries": retries, "retry_timeout": datetime.timedelta(seconds=retry_timeout),
            "backoff": {"init_backoff": datetime.timedelta(seconds=INIT_BACKOFF),
                        "max_backoff": datetime.timedelta(seconds=MAX_BACKOFF), "base": BACKOFF_BASE}}


#: the bounds of every request (every object store, the web server's Zarr)
BOUNDS = (
    OptionRow("retries=N", "object stores: attempts after the first before EIO (default 2)",
              {"retries": (valued, to("retries", count))}),
    OptionRow("connect_timeout=SECONDS", "object stores: seconds to connect (default 5)",
              {"connect_timeout": (valued, to(None, positive))}),
    OptionRow("read_timeout=SECONDS", "object stores: seconds without a byte of an answer (default 15)",
              {"read_timeout": (valued, to(None, positive))}),
)

@dataclass(frozen=True)
class Bounds:
    """What a mount's options ask of every request: ``retries`` attempts after the first,
    seconds to connect, seconds without a byte of an answer (a stall, not a request)."""

    retries: int = 2
    connect_timeout: float = 5.0
    read_timeout: float = 15.0

    rows: ClassVar[tuple[OptionRow, ...]] = BOUNDS

    @staticmethod
    def given(values: Mapping[str, Any]) -> dict[str, Any]:
        """The bounds a mount's ``-o`` values set (absent: the default)."""
        return {k: v for k in ("retries", "connect_timeout", "read_timeout") if (v := values.get(k)) is not None}

    def obstore(self, endpoint: str | None, ca_file: str | None) -> dict[str, Any]:
        """obstore's ``client_options`` and ``retry_config``."""
        return {"client_options": obstore_client_options(endpoint, ca_file, connect_timeout=self.connect_timeout,
                                                         read_timeout=self.read_timeout),
                "retry_config": retry_config(self.retries)}

    def botocore(self) -> dict[str, Any]:
        """botocore's ``retries``: its standard mode, as many attempts."""
        return {"mode": "standard", "total_max_attempts": self.retries + 1}

    def attempts(self, retrying: Callable[[], None] = lambda: None) -> Iterator[int]:
        """Attempt numbers for a loop that makes each attempt itself (``break`` or ``return`` on
        success); ``retrying()`` is told before each pause, which grows as obstore's does."""
        for attempt in range(self.retries + 1):
            yield attempt
            if attempt < self.retries:
                retrying()
                time.sleep(min(MAX_BACKOFF, INIT_BACKOFF * BACKOFF_BASE**attempt))
