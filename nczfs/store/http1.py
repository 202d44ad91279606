"""A minimal HTTP/1.1 client for the lean S3 requests (s3get.py) on plain ``http://`` endpoints.

urllib3 and http.client spend ~300 us of Python per small GET, mostly parsing headers with
the ``email`` package; this reads the status line and headers itself over a buffered socket
file and costs ~150 us (the rest is the system calls). It speaks only what those requests
need: requests without a body; responses with ``Content-Length``, chunked, or closed by the
server; keep-alive connections kept in a pool. Anything it does not understand is an
:class:`HttpError`, which the caller retries like a connection error. ``https://`` endpoints
stay with urllib3 (certificates, proxies and TLS settings are its business).
"""

from __future__ import annotations

import socket
import threading
from typing import BinaryIO

#: longest status line or header line accepted, and most header lines
MAX_LINE = 65536
MAX_HEADERS = 200


class HttpError(Exception):
    """The connection failed or the response could not be read."""


class _Connection:
    def __init__(self, host: str, port: int, connect_timeout: float, read_timeout: float):
        try:
            self.sock = socket.create_connection((host, port), timeout=connect_timeout)
        except OSError as exc:
            raise HttpError(f"connect to {host}:{port}: {exc}") from None
        self.sock.settimeout(read_timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file: BinaryIO = self.sock.makefile("rb")
        self.reused = False

    def close(self) -> None:
        for closing in (self.file.close, self.sock.close):
            try:
                closing()
            except OSError:
                pass

    def _line(self) -> bytes:
        line = self.file.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise HttpError("response line too long")
        if not line.endswith(b"\n"):
            raise HttpError("connection closed by the server")
        return line

    def exchange(self, request: bytes) -> tuple[int, bytes, bool]:
        """Send ``request``; return (status, body, keep the connection)."""
        self.sock.sendall(request)
        version, _, rest = self._line().partition(b" ")
        try:
            status = int(rest[:3])
        except ValueError:
            raise HttpError(f"not an HTTP status line: {version + b' ' + rest[:40]!r}") from None
        length: int | None = None
        chunked = False
        close = version != b"HTTP/1.1"
        for _ in range(MAX_HEADERS):
            line = self._line()
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                v = value.strip().lower()
                close = v == b"close" or (close and v != b"keep-alive")
        else:
            raise HttpError("too many response headers")
        if chunked:
            body = self._chunks()
        elif length is not None:
            body = self.file.read(length)
            if len(body) != length:
                raise HttpError(f"response body cut short ({len(body)} of {length} bytes)")
        else:  # delimited by the end of the connection
            body, close = self.file.read(), True
        return status, body, not close

    def _chunks(self) -> bytes:
        parts = []
        while True:
            size = int(self._line().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self._line() not in (b"\r\n", b"\n"):  # trailers
                    pass
                return b"".join(parts)
            part = self.file.read(size)
            if len(part) != size:
                raise HttpError("chunked body cut short")
            parts.append(part)
            self._line()


class Pool:
    """Keep-alive connections to one ``host:port``, shared by threads (one request per connection at a time)."""

    def __init__(self, host: str, port: int, *, maxsize: int = 16, connect_timeout: float = 5, read_timeout: float = 60):
        self.host, self.port, self.maxsize = host, port, maxsize
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def request(self, method: str, target: str, headers: dict[str, str]) -> tuple[int, bytes]:
        """One request without a body; a reused connection the server had closed meanwhile is
        replaced by a new one once (that is not a failed attempt)."""
        head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        request = head.encode("latin-1")
        for _ in range(2):
            conn = self._take()
            try:
                status, body, keep = conn.exchange(request)
            except (OSError, ValueError, HttpError) as exc:
                conn.close()
                if conn.reused and not isinstance(exc, TimeoutError):
                    continue
                raise HttpError(f"{type(exc).__name__}: {exc}") from None
            if keep:
                self._give(conn)
            else:
                conn.close()
            return status, body
        raise HttpError("connection closed by the server")

    def _take(self) -> _Connection:
        with self._lock:
            if self._idle:
                conn = self._idle.pop()
                conn.reused = True
                return conn
        return _Connection(self.host, self.port, self.connect_timeout, self.read_timeout)

    def _give(self, conn: _Connection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.maxsize:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
