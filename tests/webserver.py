"""A static web server for the tests: nginx (Debian's ``nginx-core``) serving a directory on
127.0.0.1, as a published Zarr is served: GET with ranges, HEAD, ETag and Last-Modified, 404
for a missing file, no directory listings."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.procs import spawn, stop, wait_ready
from tests.ports import free_ports


class Nginx:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.root = workdir / "www"
        self.proc: subprocess.Popen | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> None:
        exe = shutil.which("nginx") or "/usr/sbin/nginx"
        if not os.path.exists(exe):
            raise RuntimeError("nginx is missing: bash scripts/install.sh --test installs it (nginx-core)")
        self.root.mkdir(parents=True, exist_ok=True)
        (self.workdir / "tmp").mkdir(exist_ok=True)
        self.port = free_ports(1)[0]
        conf = self.workdir / "nginx.conf"
        tmp = self.workdir / "tmp"
        conf.write_text(f"""
daemon off;
user root;
worker_processes 1;
pid {self.workdir}/nginx.pid;
error_log {self.workdir}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy; fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{self.port};
        root {self.root};
        autoindex off;
    }}
}}
""")
        log = self.workdir / "error.log"
        self.proc = spawn([exe, "-c", str(conf), "-p", str(self.workdir)], self.workdir / "nginx.out")
        wait_ready(self.proc, [self.port], "nginx", log, timeout)

    def stop(self) -> None:
        stop(self.proc)
        self.proc = None
