"""An Azure Blob emulator for the tests: Azurite (npm ``azurite``, installed by scripts/install.sh
under .venv/azurite, run by Debian's nodejs) on 127.0.0.1, in memory, its telemetry off.

Its well-known development account (``devstoreaccount1``) and key reach the mount as users
give them: ``AZURE_STORAGE_CONNECTION_STRING`` or ``AZURE_STORAGE_ACCOUNT_KEY`` with
``-o azure_storage_account=``. The tests read and write the medium with the Azure SDK.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

from tests.procs import spawn, stop, wait_ready
from tests.ports import free_ports

ACCOUNT = "devstoreaccount1"
#: Azurite's published development key (not a secret: every Azurite has it)
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
ROOT = Path(__file__).resolve().parents[1]


def azurite_binary() -> str:
    found = ROOT / ".venv" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
    if found.exists():
        return str(found)
    exe = shutil.which("azurite-blob")
    if exe is None:
        raise RuntimeError("azurite-blob is missing: bash scripts/install.sh --test installs it (npm)")
    return exe


class Azurite:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
                f"BlobEndpoint={self.endpoint};")

    def start(self, timeout: float = 60) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_ports(1)[0]
        log = self.workdir / "azurite.log"
        self.proc = spawn([azurite_binary(), "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--inMemoryPersistence",
                           "--disableTelemetry", "--skipApiVersionCheck", "--loose", "--silent"], log, cwd=self.workdir)
        wait_ready(self.proc, [self.port], "Azurite", log, timeout)

    def stop(self) -> None:
        stop(self.proc)
        self.proc = None

    def service(self):
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(self.connection_string)

    def new_container(self, stem: str = "t") -> str:
        name = f"nczfs-{stem}-{uuid.uuid4().hex[:10]}"
        self.service().create_container(name)
        return name

    def put(self, container: str, key: str, data: bytes) -> None:
        self.service().get_blob_client(container, key).upload_blob(data, overwrite=True)

    def get(self, container: str, key: str) -> bytes | None:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            return self.service().get_blob_client(container, key).download_blob().readall()
        except ResourceNotFoundError:
            return None

    def keys(self, container: str, prefix: str = "") -> list[str]:
        return sorted(b.name for b in self.service().get_container_client(container).list_blobs(name_starts_with=prefix))
