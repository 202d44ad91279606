"""A minimal HTTP/1.1 client for the lean S3 requests (s3lean.py) on plain ``http://`` endpoints.

urllib3 and http.client spend ~300 us of Python per small GET, mostly parsing headers with
the ``email`` package; this reads the status line and headers itself over a buffered socket
file and costs ~150 us (the rest is the system calls). It speaks only what those requests
need: requests without a body, and PUTs with one (:meth:`Pool.send`); responses with
``Content-Length``, chunked, or closed by the server; keep-alive connections kept in a pool.
Anything it does not understand is an :class:`HttpError`, which the caller retries like a
connection error. ``https://`` endpoints stay with urllib3 (certificates, proxies and TLS
settings are its business).
"""

from __future__ import annotations

import errno
import os
import select
import socket
import threading
import time
from typing import Callable, Generator

import trio

#: longest status line or header line accepted, most header lines, and longest head (the
#: status line and header lines)
MAX_LINE = 65536
MAX_HEADERS = 200
MAX_HEAD = 256 * 1024
#: request bodies this long wait for ``100 Continue`` (at most CONTINUE_WAIT seconds) before
#: they are sent; shorter ones go at once (as botocore, which waits 1 s for any PUT body)
EXPECT_BODY = 1024 * 1024
CONTINUE_WAIT = 1.0
#: the slowest exchange a worker thread's request (:class:`Pool`: listings, PUTs, parts) waits
#: out, in bytes a second: it may take its read timeout plus one second for every LOW_SPEED bytes
#: it sends or receives (curl's low-speed limit, in another form), so that a server trickling its
#: answer, or taking a body a byte at a time, cannot hold a request for ever
LOW_SPEED = 1024
#: bodies longer than this are received into place (:func:`_receive_into`), by the trio pool in a
#: worker thread (the trio thread would spend its time copying them; a small body costs less
#: than a thread's round trip)
THREAD_BODY = 1024 * 1024


class HttpError(Exception):
    """The connection failed or the response could not be read."""


def _response(
    headers: dict[bytes, bytes] | None = None,
) -> Generator[tuple[str, int], bytes, tuple[int, bytes, bool]]:
    """The response side of one exchange, free of I/O, shared by the blocking and the trio
    connections: it yields what it needs next, ``("head", 0)`` (the status line and the header
    lines, up to and with the blank line that ends them), ``("line", 0)`` (a line, with its end),
    ``("read", n)`` (n bytes, fewer only at the connection's end) or ``("rest", 0)`` (all until
    the connection ends), is sent those bytes, and returns (status, body, keep the connection).
    The header lines' names (lower case) and values go into ``headers`` if given. An interim
    ``1xx`` response (a ``100 Continue`` that came late) is skipped."""
    while True:
        lines = (yield ("head", 0)).split(b"\n")[:-2] or [b""]  # without the blank line
        version, _, rest = lines[0].partition(b" ")
        try:
            status = int(rest[:3])
        except ValueError:
            raise HttpError(f"not an HTTP status line: {version + b' ' + rest[:40]!r}") from None
        if len(lines) > MAX_HEADERS + 1:
            raise HttpError("too many response headers")
        if not 100 <= status < 200:
            break
    length: int | None = None
    chunked = False
    close = version != b"HTTP/1.1"
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if headers is not None:
            headers[name] = value.strip()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif name == b"connection":
            v = value.strip().lower()
            close = v == b"close" or (close and v != b"keep-alive")
    if chunked:
        parts = []
        while True:
            size = int((yield ("line", 0)).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (yield ("line", 0)) not in (b"\r\n", b"\n"):  # trailers
                    pass
                return status, b"".join(parts), not close
            part = yield ("read", size)
            if len(part) != size:
                raise HttpError("chunked body cut short")
            parts.append(part)
            yield ("line", 0)
    if length is not None:
        body = yield ("read", length)
        if len(body) != length:
            raise HttpError(f"response body cut short ({len(body)} of {length} bytes)")
        return status, body, not close
    return status, (yield ("rest", 0)), False  # delimited by the end of the connection


def _request_bytes(method: str, target: str, headers: dict[str, str]) -> bytes:
    """A request's line and headers, as sent."""
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    return head.encode("latin-1")


def _head_end(buf: bytearray, start: int) -> int:
    """Where the blank line that ends a response's head ends in ``buf`` (searched from
    ``start``), or 0 if it is not there yet."""
    crlf = buf.find(b"\n\r\n", start)
    lf = buf.find(b"\n\n", start)
    if lf >= 0 and (crlf < 0 or lf < crlf):
        return lf + 2
    return crlf + 3 if crlf >= 0 else 0


def _take_head(buf: bytearray, start: int) -> bytes | None:
    """The head at the start of ``buf`` (searched for its end from ``start``), taken out of it;
    None if it is not all there yet."""
    end = _head_end(buf, start)
    if (end or len(buf)) > MAX_HEAD:  # whether it came whole or not: one fill may hold it all
        raise HttpError("response head too long")
    if end:
        head = bytes(buf[:end])
        del buf[:end]
        return head
    return None


def _take_line(buf: bytearray, start: int) -> bytes | None:
    """The line at the start of ``buf`` (searched for its end from ``start``), taken out of it;
    None if it is not all there yet."""
    end = buf.find(b"\n", start)
    if end >= 0:
        line = bytes(buf[: end + 1])
        del buf[: end + 1]
        return _check_line(line)
    return _check_line(bytes(buf)) if len(buf) > MAX_LINE else None


class _Pace:
    """The time limits of one exchange's socket operations: none waits more than
    ``read_timeout``, and all of them end by ``deadline``, which each byte moved puts off by
    ``per_byte`` seconds."""

    __slots__ = ("deadline", "per_byte", "read_timeout")

    def __init__(self, read_timeout: float, deadline: float, per_byte: float):
        self.read_timeout, self.deadline, self.per_byte = read_timeout, deadline, per_byte

    def timeout(self) -> float:
        """How long the next socket operation may wait."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.timed_out()
        return min(left, self.read_timeout)

    def moved(self, n: int) -> None:
        self.deadline += n * self.per_byte

    def timed_out(self) -> TimeoutError:
        """Why a socket operation timed out."""
        if self.deadline - time.monotonic() > 0:
            return TimeoutError(f"no answer for {self.read_timeout:g} s")
        if self.per_byte == 0:
            return TimeoutError("no whole answer by the attempt's deadline")
        return TimeoutError(f"the server moved fewer than {LOW_SPEED} bytes a second")


def _receive_into(sock: socket.socket, buf: bytearray, n: int, pace: _Pace) -> bytearray:
    """(blocking socket) ``n`` bytes, fewer only at the connection's end: those in ``buf`` (taken
    out of it), then the rest received into place. The bytearray itself, not a bytes copy of it
    (lab, a cold read of 512 MiB in 8 MiB blocks: the daemon's CPU 0.76 -> 0.64 s, medians of 6
    pairs)."""
    out = bytearray(n)
    have = len(buf)
    out[:have] = buf
    buf.clear()
    with memoryview(out) as view:  # released before a short body is cut to its length
        while have < n:
            sock.settimeout(pace.timeout())
            try:
                got = sock.recv_into(view[have:])
            except TimeoutError:
                raise pace.timed_out() from None
            if not got:
                break
            pace.moved(got)
            have += got
    if have < n:  # the connection ended: the parser says the body was cut short
        del out[have:]
    return out


def _check_line(line: bytes) -> bytes:
    if len(line) > MAX_LINE:
        raise HttpError("response line too long")
    if not line.endswith(b"\n"):
        raise HttpError("connection closed by the server")
    return line


class _Connection:
    """One keep-alive connection, used by one thread at a time: a blocking socket whose every
    wait is bounded by the exchange's :class:`_Pace`."""

    def __init__(self, host: str, port: int, connect_timeout: float, read_timeout: float):
        try:
            self.sock = socket.create_connection((host, port), timeout=connect_timeout)
        except OSError as exc:
            raise HttpError(f"connect to {host}:{port}: {exc}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.read_timeout = read_timeout
        self.pace = self._new_pace()
        self.buf = bytearray()
        self.reused = False

    def _new_pace(self) -> _Pace:
        return _Pace(self.read_timeout, time.monotonic() + self.read_timeout, 1 / LOW_SPEED)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def exchange(self, request: bytes, headers: dict[bytes, bytes] | None = None) -> tuple[int, bytes, bool]:
        """Send ``request``; return (status, body, keep the connection); the answer's header
        lines go into ``headers`` if given."""
        if headers is not None:
            headers.clear()
        self.pace = self._new_pace()
        self._send(request)
        return self._receive(_response(headers))

    def _send(self, data: bytes | memoryview) -> None:
        with memoryview(data) as view:
            while view:
                self.sock.settimeout(self.pace.timeout())
                try:
                    sent = self.sock.send(view)
                except TimeoutError:
                    raise self.pace.timed_out() from None
                self.pace.moved(sent)
                view = view[sent:]

    def _fill(self) -> bool:
        """More bytes into the buffer; False at the connection's end."""
        self.sock.settimeout(self.pace.timeout())
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            raise self.pace.timed_out() from None
        self.pace.moved(len(data))
        self.buf += data
        return bool(data)

    def _receive(self, reader: Generator[tuple[str, int], bytes, tuple[int, bytes, bool]],
                 first: bytes | None = None) -> tuple[int, bytes, bool]:
        """Run ``reader`` over the response (``first``: its head, read already)."""
        want = next(reader)
        while True:
            what, n = want
            if what == "head":
                got, first = first or self._head(), None
            elif what == "line":
                got = self._line()
            elif what == "read":
                got = self._read(n)
            else:
                while self._fill():
                    pass
                got, self.buf = bytes(self.buf), bytearray()
            try:
                want = reader.send(got)
            except StopIteration as done:
                return done.value

    def _head(self) -> bytes:
        start = 0
        while (head := _take_head(self.buf, start)) is None:
            start = max(0, len(self.buf) - 2)
            if not self._fill():
                raise HttpError("connection closed by the server")
        return head

    def _line(self) -> bytes:
        start = 0
        while (line := _take_line(self.buf, start)) is None:
            start = len(self.buf)
            if not self._fill():
                return _check_line(bytes(self.buf))
        return line

    def _read(self, n: int) -> bytes:
        if n - len(self.buf) > THREAD_BODY:
            return _receive_into(self.sock, self.buf, n, self.pace)  # type: ignore[return-value]
        while len(self.buf) < n and self._fill():
            pass
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    def send(self, head: bytes, body: bytes | memoryview, headers: dict[bytes, bytes], expect: bool
             ) -> tuple[int, bytes, bool]:
        """Send a request with a body. With ``expect`` (``head`` says ``Expect: 100-continue``) the
        body waits for the server's ``100 Continue``, so that a refusal (a wrong signature, a
        denied key) is read as the server's answer instead of breaking the connection midway;
        no answer within :data:`CONTINUE_WAIT` sends the body anyway, as RFC 9110 allows."""
        self.pace = self._new_pace()
        self._send(head)
        if expect and select.select([self.sock], [], [], CONTINUE_WAIT)[0]:
            first = self._head()
            if not first.startswith(b"HTTP/1.1 100"):  # the final answer, before the body
                status, answer, _ = self._receive(_response(headers), first)
                return status, answer, False  # the server may wait for the body: never reuse this connection
        try:
            self._send(body)
        except OSError as exc:  # the server may have answered and closed: its answer says why
            if isinstance(exc, TimeoutError) or not select.select([self.sock], [], [], 0)[0]:
                raise
            status, answer, _ = self._receive(_response(headers))
            return status, answer, False
        return self._receive(_response(headers))


class Pool:
    """Keep-alive connections to one ``host:port``, shared by threads (one request per connection at a time)."""

    def __init__(self, host: str, port: int, *, maxsize: int = 16, connect_timeout: float = 5, read_timeout: float = 60):
        self.host, self.port, self.maxsize = host, port, maxsize
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def request(self, method: str, target: str, headers: dict[str, str],
                answer_headers: dict[bytes, bytes] | None = None) -> tuple[int, bytes]:
        """One request without a body; the answer's headers (by lower-case name) go into
        ``answer_headers`` if given."""
        request = _request_bytes(method, target, headers)
        return self._exchange(lambda conn: conn.exchange(request, answer_headers))

    def send(self, method: str, target: str, headers: dict[str, str], body: bytes | memoryview
             ) -> tuple[int, bytes, dict[bytes, bytes]]:
        """One request with a body (a PUT of an object or a part); returns (status, body,
        response headers by lower-case name)."""
        expect = len(body) >= EXPECT_BODY
        if expect:
            headers = {**headers, "expect": "100-continue"}
        head = _request_bytes(method, target, {**headers, "content-length": str(len(body))})
        answer_headers: dict[bytes, bytes] = {}

        def attempt(conn: _Connection) -> tuple[int, bytes, bool]:
            answer_headers.clear()
            return conn.send(head, body, answer_headers, expect)

        status, answer = self._exchange(attempt)
        return status, answer, answer_headers

    def _exchange(self, attempt: Callable[[_Connection], tuple[int, bytes, bool]]) -> tuple[int, bytes]:
        """``attempt`` on a pooled connection: (status, body). A reused connection the server had
        closed meanwhile is replaced by a new one once (that is not a failed attempt; the request
        is sent whole again)."""
        for _ in range(2):
            conn = self._take()
            try:
                status, body, keep = attempt(conn)
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


class _TrioConnection:
    """One keep-alive connection read and written from the trio thread: a non-blocking socket
    waited on with trio; a long body is received in a worker thread instead."""

    def __init__(self, sock: socket.socket, read_timeout: float):
        self.sock, self.read_timeout = sock, read_timeout
        self.buf = bytearray()
        self.reused = False

    @classmethod
    async def open(cls, address: tuple, connect_timeout: float, read_timeout: float) -> _TrioConnection:
        family, kind, proto, _, addr = address
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            code = sock.connect_ex(addr)
            if code == errno.EINPROGRESS:
                with trio.move_on_after(connect_timeout):
                    await trio.lowlevel.wait_writable(sock)
                    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code == errno.EINPROGRESS:
                    code = errno.ETIMEDOUT
            if code:
                raise HttpError(f"connect to {addr[0]}:{addr[1]}: {os.strerror(code)}")
        except BaseException:
            sock.close()
            raise
        return cls(sock, read_timeout)

    def close(self) -> None:
        self.sock.close()

    async def _fill(self) -> bool:
        """More bytes into the buffer; False at the connection's end."""
        while True:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self.sock)
                continue
            self.buf += data
            return bool(data)

    async def _head(self) -> bytes:
        start = 0
        while (head := _take_head(self.buf, start)) is None:
            start = max(0, len(self.buf) - 2)
            if not await self._fill():
                raise HttpError("connection closed by the server")
        return head

    async def _line(self) -> bytes:
        start = 0
        while (line := _take_line(self.buf, start)) is None:
            start = len(self.buf)
            if not await self._fill():
                return _check_line(bytes(self.buf))
        return line

    async def _read(self, n: int) -> bytes:
        if n - len(self.buf) > THREAD_BODY:
            # the worker thread stops at the attempt's deadline (TrioPool.request's), which it
            # cannot see: a body trickled past it would hold the thread, and the attempt, for ever
            left = trio.current_effective_deadline() - trio.current_time()
            pace = _Pace(self.read_timeout, time.monotonic() + left, 0)
            return await trio.to_thread.run_sync(self._read_blocking, n, pace)
        while len(self.buf) < n:
            if not await self._fill():
                break
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    def _read_blocking(self, n: int, pace: _Pace) -> bytearray:
        """(worker thread) ``n`` bytes, received into place (:func:`_receive_into`)."""
        try:
            return _receive_into(self.sock, self.buf, n, pace)
        finally:
            self.sock.setblocking(False)

    async def _rest(self) -> bytes:
        while await self._fill():
            pass
        data = bytes(self.buf)
        self.buf.clear()
        return data

    async def exchange(self, request: bytes, headers: dict[bytes, bytes] | None = None) -> tuple[int, bytes, bool]:
        if headers is not None:
            headers.clear()
        view = memoryview(request)
        while view:
            try:
                view = view[self.sock.send(view):]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.sock)
        reader = _response(headers)
        want = next(reader)
        while True:
            what, n = want
            if what == "head":
                got = await self._head()
            elif what == "line":
                got = await self._line()
            else:
                got = await (self._read(n) if what == "read" else self._rest())
            try:
                want = reader.send(got)
            except StopIteration as done:
                return done.value


class TrioPool:
    """:class:`Pool`'s twin for the trio thread: the same requests and answers, without a worker
    thread's round trip per request (~400 us of CPU for a small GET on these machines)."""

    def __init__(self, host: str, port: int, *, maxsize: int = 16, connect_timeout: float = 5, read_timeout: float = 60):
        self.host, self.port, self.maxsize = host, port, maxsize
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self._idle: list[_TrioConnection] = []
        self._address: tuple | None = None
        self._closed = False

    async def request(self, method: str, target: str, headers: dict[str, str],
                      answer_headers: dict[bytes, bytes] | None = None) -> tuple[int, bytes]:
        request = _request_bytes(method, target, headers)
        await trio.lowlevel.checkpoint_if_cancelled()
        for _ in range(2):
            conn = await self._take()
            try:
                with trio.fail_after(self.read_timeout):
                    status, body, keep = await conn.exchange(request, answer_headers)
            except (OSError, ValueError, HttpError, trio.TooSlowError) as exc:
                conn.close()
                if conn.reused and not isinstance(exc, (TimeoutError, trio.TooSlowError)):
                    continue
                raise HttpError(f"{type(exc).__name__}: {exc}") from None
            except BaseException:  # cancelled mid-exchange: the connection is in an unknown state
                conn.close()
                raise
            if keep and not self._closed and len(self._idle) < self.maxsize:
                self._idle.append(conn)
            else:
                conn.close()
            return status, body
        raise HttpError("connection closed by the server")

    async def _take(self) -> _TrioConnection:
        if self._idle:
            conn = self._idle.pop()
            conn.reused = True
            return conn
        if self._address is None:
            try:
                found = await trio.socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            except OSError as exc:
                raise HttpError(f"connect to {self.host}:{self.port}: {exc}") from None
            self._address = found[0]
        return await _TrioConnection.open(self._address, self.connect_timeout, self.read_timeout)

    def close(self) -> None:
        """Close the idle connections (callable outside trio: nothing waits on them)."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
