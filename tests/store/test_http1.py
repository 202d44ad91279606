"""nczfs/store/http1.py against a scripted TCP server: every response shape it must read, and
the ones it must refuse, each answered by raw bytes so nothing is left to a library."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import trio

from nczfs.store import http1
from nczfs.store.http1 import HttpError, Pool, TrioPool


class Listener:
    """Accepts connections on 127.0.0.1 (counted), each served by ``_talk`` in a thread of its own."""

    def __init__(self):
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.sock.close()


class Scripted(Listener):
    """For each request received, sends the next scripted reply (raw bytes; an HTTP/1.0 one is
    followed by closing the connection; a list: its pieces, 50 ms apart); ``None`` closes the
    connection instead. Records requests and connections."""

    def __init__(self, replies: list[bytes | None]):
        self.replies = list(replies)
        self.requests: list[bytes] = []
        super().__init__()

    def _talk(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while self.replies:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                request, _, buf = buf.partition(b"\r\n\r\n")
                self.requests.append(request)
                reply = self.replies.pop(0)
                if reply is None:
                    return
                if isinstance(reply, list):
                    for piece in reply:
                        time.sleep(0.05)
                        conn.sendall(piece)
                    continue
                conn.sendall(reply)
                if reply.startswith(b"HTTP/1.0"):  # its body ends with the connection
                    return


class InTrio:
    """A :class:`TrioPool` called like a :class:`Pool`: each request in a trio run of its own."""

    def __init__(self, pool: TrioPool):
        self.pool = pool

    def request(self, *args):
        return trio.run(self.pool.request, *args)


def make_pool(kind: str, port: int, **timeouts):
    """The blocking pool, or its trio twin: every test here runs on both."""
    if kind == "threads":
        return Pool("127.0.0.1", port, **timeouts)
    return InTrio(TrioPool("127.0.0.1", port, **timeouts))


@pytest.fixture(params=["threads", "trio"])
def serve(request):
    servers = []

    def start(*replies):
        s = Scripted(list(replies))
        servers.append(s)
        return s, make_pool(request.param, s.port, read_timeout=5)

    yield start
    for s in servers:
        s.close()


def test_content_length_bodies_on_one_kept_alive_connection(serve):
    server, pool = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"x\"\r\n\r\nhello",
                         b"HTTP/1.1 206 Partial Content\r\ncontent-length: 3\r\n\r\nabc",
                         b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    assert pool.request("GET", "/b/k", {"host": "h", "range": "bytes=0-4"}) == (200, b"hello")
    assert pool.request("GET", "/b/k", {"host": "h"}) == (206, b"abc")
    assert pool.request("GET", "/b/missing", {"host": "h"}) == (404, b"")
    assert server.connections == 1
    assert server.requests[0].split(b"\r\n")[:3] == [b"GET /b/k HTTP/1.1", b"host: h", b"range: bytes=0-4"]


def test_chunked_and_connection_close_and_http_1_0_bodies(serve):
    server, pool = serve(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nX-Trailer: 1\r\n\r\n",
                         b"HTTP/1.1 500 Internal\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno",
                         b"HTTP/1.0 200 OK\r\n\r\nuntil the end")
    assert pool.request("GET", "/a", {}) == (200, b"Wikipedia")
    assert pool.request("GET", "/b", {}) == (500, b"no")
    # that connection was closed as asked: the third request opens a new one, whose end ends the body
    assert pool.request("GET", "/c", {}) == (200, b"until the end")
    assert server.connections == 2


def test_a_head_in_pieces_and_heads_with_bare_line_ends(serve):
    """The blank line that ends a head may arrive split (here after its CR), and lines may end
    in LF alone; an interim 100 Continue before the answer is skipped."""
    server, pool = serve([b"HTTP/1.1 200 OK\r", b"\nContent-Length: 2\r\n\r", b"\nok"],
                         b"HTTP/1.1 200 OK\nContent-Length: 2\nX: y\n\nhi",
                         [b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n", b"\r\n", b"n"])
    assert pool.request("GET", "/a", {}) == (200, b"ok")
    assert pool.request("GET", "/b", {}) == (200, b"hi")
    assert pool.request("GET", "/c", {}) == (404, b"n")
    assert server.connections == 1


def test_a_kept_connection_the_server_closed_is_replaced_once(serve):
    server, pool = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1", None,
                         b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n2")
    assert pool.request("GET", "/", {}) == (200, b"1")
    assert pool.request("GET", "/", {}) == (200, b"2")  # the first connection died: a new one, not an error
    assert server.connections == 2


@pytest.mark.parametrize("reply, message", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "cut short"),
    # a long body (the trio pool receives it in a worker thread) whose connection ends halfway
    (b"HTTP/1.1 200 OK\r\nContent-Length: 3000000\r\n\r\n" + b"x" * 1_500_000, "cut short"),
    (b"SSH-2.0-OpenSSH\r\n\r\n", "status line"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "ValueError"),
    (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 300 + b"\r\n", "too many"),
    (b"\r\n\r\n", "status line"),
    (b"HTTP/1.1 200 OK\r\nX: " + b"y" * 300_000 + b"\r\n\r\n", "too long"),
    (b"HTTP/1.1 200 OK\r\nContent-Len", "closed"),
    (None, "closed"),
])
def test_unreadable_responses_are_errors_not_hangs(serve, reply, message):
    server, pool = serve(reply)
    if reply is not None and b"short" in reply:
        threading.Timer(0.2, server.close).start()
    with pytest.raises(HttpError, match=message):
        pool.request("GET", "/", {})


@pytest.mark.parametrize("kind", ["threads", "trio"])
def test_a_refused_connection_is_an_error(kind):
    s = socket.create_server(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(HttpError, match="connect"):
        make_pool(kind, port).request("GET", "/", {})


@pytest.mark.parametrize("kind", ["threads", "trio"])
def test_a_server_that_never_answers_times_out(kind):
    silent = socket.create_server(("127.0.0.1", 0))
    try:
        with pytest.raises(HttpError, match="(?i)timed? ?out|TooSlow"):
            make_pool(kind, silent.getsockname()[1], read_timeout=0.3).request("GET", "/", {})
    finally:
        silent.close()


def test_the_trio_pool_receives_a_long_body_in_a_thread_and_keeps_the_connection(serve, monkeypatch):
    received = []
    monkeypatch.setattr(http1._TrioConnection, "_read_blocking",
                        lambda self, n, pace, real=http1._TrioConnection._read_blocking: received.append(n) or real(self, n, pace))
    body = bytes(range(256)) * (3 * 4096 + 7)  # 3 MiB and a bit: more than THREAD_BODY
    server, pool = serve(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body,
                         b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    status, got = pool.request("GET", "/big", {})
    # both pools hand over the buffer they received the body into, not a copy of it
    assert status == 200 and got == body and type(got) is bytearray
    assert pool.request("GET", "/small", {}) == (200, b"ok")  # the same connection, non-blocking again
    assert server.connections == 1
    assert received == ([len(body)] if isinstance(pool, InTrio) else [])


class Trickling(Listener):
    """A server that reads each request's head, then sends ``head`` and a body of ``length``
    bytes one byte every ``interval`` seconds, or (``take_body``) takes the request's body one
    byte every ``interval`` seconds and never answers, until the client gives up; records when
    each connection was given up."""

    def __init__(self, *, head: bytes = b"", length: int = 0, take_body: bool = False, interval: float = 0.05):
        self.head, self.length, self.take_body, self.interval = head, length, take_body, interval
        self.given_up: list[float] = []
        super().__init__()

    def _talk(self, conn: socket.socket) -> None:
        start = time.monotonic()
        with conn:
            if self.take_body:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(1 if self.take_body else 65536)
            try:
                if not self.take_body:
                    conn.sendall(self.head)
                for _ in range(self.length if not self.take_body else 10**9):
                    time.sleep(self.interval)
                    if self.take_body:
                        if not conn.recv(1):
                            break
                    else:
                        conn.sendall(b"x")
            except OSError:
                pass
            self.given_up.append(time.monotonic() - start)


@pytest.mark.parametrize("kind, length", [("threads", 100), ("threads", 3 * 1024 * 1024), ("trio", 3 * 1024 * 1024)])
def test_an_answer_trickled_slower_than_the_low_speed_limit_is_given_up(kind, length, monkeypatch):
    """A body that keeps coming, a byte at a time, never waits a read timeout between two
    bytes: the blocking pool (listings, PUTs) gives the exchange its read timeout plus a second
    for every LOW_SPEED bytes moved, the trio pool's GET its read timeout, whose deadline its
    worker thread (bodies over THREAD_BODY) keeps too."""
    monkeypatch.setattr(http1, "LOW_SPEED", 100)
    server = Trickling(head=b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % length, length=length)
    try:
        pool = make_pool(kind, server.port, read_timeout=0.5)
        start = time.monotonic()
        with pytest.raises(HttpError, match="bytes a second|by the attempt's deadline"):
            pool.request("GET", "/", {})
        took = time.monotonic() - start
        # 0.5 s plus 1/100 s for each byte of the head (about 40) and of the trickle: about 1.5 s
        assert 0.5 <= took < 30
        deadline = time.monotonic() + 5
        while not server.given_up and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.given_up and server.given_up[0] < 30  # the connection was closed, not left to trickle
    finally:
        server.close()


def test_a_body_taken_slower_than_the_low_speed_limit_is_given_up(monkeypatch):
    """A server that takes a PUT's body a byte at a time: the send ends too, at the same limit or
    (TCP opens no window for a byte) once a wait to send lasts the read timeout."""
    monkeypatch.setattr(http1, "LOW_SPEED", 100)
    monkeypatch.setattr(http1, "CONTINUE_WAIT", 0.01)
    server = Trickling(take_body=True, interval=0.02)
    try:
        start = time.monotonic()
        with pytest.raises(HttpError, match="bytes a second|no answer for 0.5 s"):
            Pool("127.0.0.1", server.port, read_timeout=0.5).send("PUT", "/b/k", {}, BODY * 8)
        assert time.monotonic() - start < 30
    finally:
        server.close()


def test_an_answer_slow_but_faster_than_the_low_speed_limit_arrives(monkeypatch):
    """The limit is an average: a body whose bytes come at twice LOW_SPEED, though it takes
    several read timeouts in all, is received whole."""
    monkeypatch.setattr(http1, "LOW_SPEED", 100)
    server = Trickling(head=b"HTTP/1.1 200 OK\r\nContent-Length: 120\r\n\r\n", length=120, interval=0.005)
    try:
        assert Pool("127.0.0.1", server.port, read_timeout=0.3).request("GET", "/", {}) == (200, b"x" * 120)
    finally:
        server.close()


def test_a_cancelled_trio_request_closes_its_connection():
    silent = socket.create_server(("127.0.0.1", 0))
    pool = TrioPool("127.0.0.1", silent.getsockname()[1], read_timeout=30)

    async def cancelled():
        with trio.move_on_after(0.2):
            await pool.request("GET", "/", {})
        return len(pool._idle)

    try:
        assert trio.run(cancelled) == 0  # not kept: its answer could still arrive
    finally:
        silent.close()


# ---------------------------------------------------------------- requests with a body (Pool.send)


class OneExchange:
    """A server for one request with a body: ``talk(conn, head)`` gets the connection once the
    request's head is read, and answers as the test wants; what it reads is recorded."""

    def __init__(self, talk):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.head = b""
        self.body = b""
        self.done = threading.Event()
        self._talk = talk
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(65536)
            self.head, _, self.body = buf.partition(b"\r\n\r\n")
            self._talk(self, conn)
        self.done.set()

    def read_body(self, conn: socket.socket, n: int) -> None:
        while len(self.body) < n:
            data = conn.recv(1 << 20)
            if not data:
                return
            self.body += data

    def close(self) -> None:
        self.sock.close()


BODY = bytes(range(256)) * 8192  # 2 MiB: waits for 100 Continue


def test_a_long_body_waits_for_100_continue_and_is_sent_whole():
    def talk(server, conn):
        server.early = server.body
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        server.read_body(conn, len(BODY))
        conn.sendall(b'HTTP/1.1 200 OK\r\nETag: "e"\r\nContent-Length: 0\r\n\r\n')

    server = OneExchange(talk)
    try:
        status, body, headers = Pool("127.0.0.1", server.port).send("PUT", "/b/k?partNumber=1", {"host": "h"}, BODY)
        assert (status, body, headers[b"etag"]) == (200, b"", b'"e"')
        assert server.done.wait(5) and server.body == BODY
        assert server.early == b""  # nothing of the body came before the server's go-ahead
        assert b"expect: 100-continue" in server.head.lower() and f"content-length: {len(BODY)}".encode() in server.head
    finally:
        server.close()


def test_a_short_body_goes_at_once():
    def talk(server, conn):
        server.read_body(conn, 5)
        conn.sendall(b'HTTP/1.1 200 OK\r\nETag: "s"\r\nContent-Length: 0\r\n\r\n')

    server = OneExchange(talk)
    try:
        assert Pool("127.0.0.1", server.port).send("PUT", "/b/k", {}, b"hello")[0] == 200
        assert server.done.wait(5) and server.body == b"hello" and b"expect" not in server.head.lower()
    finally:
        server.close()


def test_an_answer_before_the_body_is_returned_and_the_body_never_sent():
    """A refusal (here 403) instead of ``100 Continue``: the body stays unsent, the connection is dropped."""
    def talk(server, conn):
        refusal = b"<Error><Code>AccessDenied</Code></Error>"
        conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: %d\r\n\r\n%s" % (len(refusal), refusal))
        server.read_body(conn, 1)  # until the client closes the connection

    server = OneExchange(talk)
    try:
        pool = Pool("127.0.0.1", server.port)
        status, body, _ = pool.send("PUT", "/b/k", {}, BODY)
        assert status == 403 and b"AccessDenied" in body
        assert server.done.wait(5) and server.body == b""
        assert pool._idle == []
    finally:
        server.close()


def test_a_server_that_ignores_expect_gets_the_body_after_a_wait(monkeypatch):
    """No ``100 Continue`` within CONTINUE_WAIT: the body is sent anyway; a ``100`` that comes
    late, before the answer, is skipped."""
    monkeypatch.setattr(http1, "CONTINUE_WAIT", 0.2)

    def talk(server, conn):
        server.read_body(conn, len(BODY))
        conn.sendall(b'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nETag: "late"\r\nContent-Length: 2\r\n\r\nok')

    server = OneExchange(talk)
    try:
        status, body, headers = Pool("127.0.0.1", server.port).send("PUT", "/b/k", {}, BODY)
        assert (status, body, headers[b"etag"]) == (200, b"ok", b'"late"')
        assert server.done.wait(5) and server.body == BODY
    finally:
        server.close()
