"""Stalls and trickles are bounded: an obstore-backed store against a scripted TCP server that
answers a GET and then sends its body slowly (a byte at a time) or not at all."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from nczfs.toolbox.errors import BackendError
from nczfs.store.objstore.obprefix import ObjectStoreBackend
from nczfs.store.objstore.transport import obstore_client_options, retry_config


class SlowServer:
    """Answers every request with a 200 of 1,000 bytes whose body comes one byte every
    ``every`` seconds (``every=None``: never)."""

    def __init__(self, every: float | None):
        self.every = every
        self.requests = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            self.requests += 1
            # a ranged GET gets a 206 of bytes 0-999 whatever it asked (a resume's range is not those)
            ranged = b"\r\nrange: bytes=" in buf.lower()
            conn.sendall((b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-999/1000\r\n" if ranged else
                          b"HTTP/1.1 200 OK\r\n") + b"Content-Length: 1000\r\nETag: \"e\"\r\n"
                         b"Last-Modified: Thu, 26 Nov 2026 09:00:00 GMT\r\n\r\n")
            for _ in range(1000):
                if self.stop.wait(self.every if self.every is not None else 3600):
                    return
                try:
                    conn.sendall(b"x")
                except OSError:
                    return

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


def _backend(server: SlowServer) -> ObjectStoreBackend:
    from obstore.store import S3Store

    endpoint = f"http://127.0.0.1:{server.port}"
    store = S3Store("bkt", endpoint=endpoint, skip_signature=True, region="us-east-1",
                    client_options=obstore_client_options(endpoint, read_timeout=1, request_timeout=2),
                    retry_config=retry_config(1))
    return ObjectStoreBackend(store, "", url="s3://bkt", service="S3")


@pytest.mark.parametrize("every", [0.2, None], ids=["trickled", "stalled"])
def test_a_slow_answer_is_given_up_after_the_bounds_and_retried(every):
    server = SlowServer(every)
    try:
        backend = _backend(server)
        t = time.monotonic()
        with pytest.raises(BackendError) as failed:
            backend.get("k")
        took = time.monotonic() - t
        assert "'k'" in str(failed.value)
        # tried again once (obstore resumes a body cut short with a ranged GET from the byte it
        # got to, which this server answers with bytes 0-999: that ends it)
        assert server.requests == 2 and backend.counters()["GET"] >= 1
        assert took < 10, took  # two attempts of at most 2 s (not 1,000 bytes at 0.2 s, nor for ever)
    finally:
        server.close()


@pytest.mark.parametrize("every", [0.2, None], ids=["trickled", "stalled"])
def test_a_slow_answer_to_a_get_on_the_loop_is_given_up_after_the_bounds(every):
    """Large ranged GETs go through obstore's async API on the store's asyncio loop
    (``get_version_async``): the same bounds hold there, and the error names the key."""
    import trio

    from nczfs.store.values import ByteRange

    server = SlowServer(every)
    backend = _backend(server)
    try:
        backend.async_get_from = 1000  # the server's 1,000 bytes count as a large GET
        t = time.monotonic()
        with pytest.raises(BackendError) as failed:
            trio.run(backend.get_version_async, "k", ByteRange(0, 1000), None)
        took = time.monotonic() - t
        assert "'k'" in str(failed.value) and backend.counters()["gets-on-loop"] == 1
        assert server.requests == 2, server.requests  # tried again once, as the blocking GET
        assert took < 10, took
    finally:
        backend.close()  # the store's asyncio loop thread
        server.close()
