"""A small HTTP/1.1 server on 127.0.0.1 serving in-memory files, with Range support.

Runs in a thread of the test process; counts connections and requests so tests can check
that readers reuse connections. A path in ``gates`` is answered only once its event is set
(or after ``GATE_TIMEOUT``: a test that forgets it does not hang). Stop it with ``close()``
(the fixture does).
"""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GATE_TIMEOUT = 60.0


class RangeServer:
    def __init__(self, files: dict[str, bytes] | None = None):
        self.files: dict[str, bytes] = dict(files or {})
        self.gates: dict[str, threading.Event] = {}
        self.connections = 0
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range header)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1

            def log_message(self, *args) -> None:
                pass

            def _serve(self, body: bool) -> None:
                rng = self.headers.get("Range")
                with server._lock:
                    server.requests.append((self.command, self.path, rng))
                gate = server.gates.get(self.path)
                if gate is not None:
                    gate.wait(GATE_TIMEOUT)
                data = server.files.get(self.path)
                if data is None:
                    self._reply(404, b"not found", body)
                    return
                m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng or "")
                if rng is None or m is None:
                    self._reply(200, data, body)
                    return
                start = int(m.group(1))
                end = min(int(m.group(2)) + 1 if m.group(2) else len(data), len(data))
                if start >= len(data):
                    self._reply(416, b"", body, {"Content-Range": f"bytes */{len(data)}"})
                    return
                self._reply(206, data[start:end], body, {"Content-Range": f"bytes {start}-{end - 1}/{len(data)}"})

            def _reply(self, status: int, data: bytes, body: bool, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Accept-Ranges", "bytes")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve(True)

            def do_HEAD(self) -> None:
                self._serve(False)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address) -> None:
                pass  # a client dropping its connection mid-body is expected; tests check the bytes

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)
