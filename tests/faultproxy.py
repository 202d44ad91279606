"""A TCP proxy on 127.0.0.1 in front of a real server, for injecting the faults of a network:
answers that never come back, and a server that stops (SIGSTOP) and resumes (SIGCONT).

- ``drop_answers = lambda line: line.startswith("PUT ")``: requests whose request line (``PUT
  /bucket/key?... HTTP/1.1``) it accepts reach the server (which carries them out), but their
  answers are swallowed and the connection is left open, so the client times out: a write whose
  outcome the client cannot know.
- ``freeze()`` / ``thaw()``: bytes stop moving either way (new connections are still accepted,
  as the kernel accepts them for a stopped process) and are delivered when thawed, as a server
  stopped and continued would take and answer them.

Requests are followed by their heads (method, ``Content-Length``); clients here send one request
at a time on a connection and no chunked bodies, which is all this needs.
"""

from __future__ import annotations

import socket
import threading
from typing import Callable


class FaultProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1"):
        self.target = (target_host, target_port)
        self.drop_answers: Callable[[str], bool] | None = None
        self.dropped: list[str] = []  # the request line of each request whose answer was swallowed
        self._running = threading.Event()
        self._running.set()
        self._closing = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def freeze(self) -> None:
        self._running.clear()

    def thaw(self) -> None:
        self._running.set()

    def close(self) -> None:
        self._closing = True
        self._running.set()
        self.listener.close()
        with self._lock:
            for s in self._sockets:
                try:
                    s.close()
                except OSError:
                    pass

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        self._running.wait()
        try:
            server = socket.create_connection(self.target)
        except OSError:
            client.close()
            return
        with self._lock:
            self._sockets += [client, server]
        state = {"drop": False}
        threading.Thread(target=self._upstream, args=(client, server, state), daemon=True).start()
        self._downstream(server, client, state)

    def _upstream(self, client: socket.socket, server: socket.socket, state: dict) -> None:
        """Client to server, following request heads to know whose answer comes next."""
        buf, body_left = b"", 0
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                self._running.wait()
                out = b""
                while data:
                    if body_left:
                        n = min(body_left, len(data))
                        out, data, body_left = out + data[:n], data[n:], body_left - n
                        continue
                    buf += data
                    data = b""
                    end = buf.find(b"\r\n\r\n")
                    if end < 0:
                        break
                    head, data, buf = buf[: end + 4], buf[end + 4 :], b""
                    first = head.split(b"\r\n", 1)[0].decode("latin-1")
                    state["drop"] = self.drop_answers is not None and self.drop_answers(first)
                    if state["drop"]:
                        self.dropped.append(first)
                    for line in head.split(b"\r\n")[1:]:
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            body_left = int(value.strip())
                    out += head
                server.sendall(out)
        except OSError:
            pass
        finally:
            try:
                server.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _downstream(self, server: socket.socket, client: socket.socket, state: dict) -> None:
        try:
            while True:
                data = server.recv(65536)
                if not data:
                    break
                self._running.wait()
                if not state["drop"]:
                    client.sendall(data)
        except OSError:
            pass
        finally:
            for s in (client, server):
                try:
                    s.close()
                except OSError:
                    pass
