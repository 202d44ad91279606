"""Run inside a network namespace of its own (tests/test_sealed_network.py): start the emulators
and the web server there, open each object-store source as a mount does and use it, and report
every connection made to the cloud metadata addresses, which here are traps on loopback.

Prints one JSON line: {"trap": {label: connections}, "errors": {label: message}}.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import threading
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: AWS/GCE/Azure instance metadata, ECS container credentials
TRAPS = [("169.254.169.254", 80), ("169.254.170.2", 80)]
hits: dict[str, int] = {}
current = ["setup"]


def trap(addr: tuple[str, int]) -> None:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(addr)
    srv.listen(64)

    def serve() -> None:
        while True:
            conn, _ = srv.accept()
            hits[current[0]] = hits.get(current[0], 0) + 1
            conn.close()

    threading.Thread(target=serve, daemon=True).start()


def use(store, writable: bool) -> None:
    from nczfs.toolbox.errors import NczfsError

    try:
        store.list_dir("")
        if writable:
            store.set("sealed/x", b"1")
            store.get("sealed/x")
            store.stat("sealed/x")
            store.delete("sealed/x")
    except NczfsError:
        pass  # refusals are fine here: only where the requests went matters


def main() -> None:
    for addr in TRAPS:
        trap(addr)
    from nczfs.config.mountconfig import MountConfig
    from nczfs.config.source import parse_source
    from nczfs.store.registry import open_store
    from tests.azurite import KEY, Azurite
    from tests.gcsserver import FakeGCS, service_account_file
    from tests.s3server import SeaweedS3
    from tests.store.test_webzarr import publish
    from tests.webserver import Nginx

    work = Path(tempfile.mkdtemp(prefix="nczfs-sealed-"))
    errors: dict[str, str] = {}
    servers = [FakeGCS(work / "gcs"), Azurite(work / "az"), Nginx(work / "web"), SeaweedS3(work / "s3")]
    try:
        for s in servers:
            s.start()
        gcs, az, web, s3 = servers
        os.environ.update(s3.write_aws_files(work / "aws"))
        key = service_account_file(work / "sa.json")
        bucket, container, s3bucket = gcs.new_bucket("sealed"), az.new_container("sealed"), s3.new_bucket("sealed")
        url = publish(web, "sealed.zarr", 2, work)

        def mount(label: str, source: str, writable: bool = True, env: dict | None = None, **opts) -> None:
            current[0] = label
            saved = {k: os.environ.get(k) for k in (env or {})}
            os.environ.update(env or {})
            try:
                use(open_store(MountConfig.of(parse_source(source), "/nonexistent", **opts)), writable)
            except Exception as exc:  # noqa: BLE001 - reported, the test decides
                errors[label] = f"{type(exc).__name__}: {exc}"
            finally:
                for k, v in saved.items():
                    os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)

        mount("gcs-key", f"gs://{bucket}/p", endpoint_url=gcs.endpoint, google_application_credentials=str(key))
        mount("gcs-anon", f"gs://{bucket}/p", endpoint_url=gcs.endpoint, no_sign_request=True)
        mount("azure-key", f"az://{container}/p", env={"AZURE_STORAGE_ACCOUNT_KEY": KEY},
              endpoint_url=az.endpoint, azure_storage_account="devstoreaccount1")
        mount("azure-connection-string", f"az://{container}/p",
              env={"AZURE_STORAGE_CONNECTION_STRING": az.connection_string})
        mount("azure-anon", f"az://{container}/p", endpoint_url=az.endpoint, azure_storage_account="devstoreaccount1",
              no_sign_request=True)
        mount("http", url, writable=False, read_only=True)
        mount("s3-profile", f"s3://{s3bucket}/p", endpoint_url=s3.endpoint)
        mount("s3-anon", f"s3://{s3bucket}/p", endpoint_url=s3.endpoint, no_sign_request=True)

        # the canary: obstore's own anonymous GCS PUT asks the metadata server for a token (the
        # trap must see it, or this check could see nothing)
        current[0] = "canary"
        import obstore as obs
        from obstore.store import GCSStore

        try:
            obs.put(GCSStore(bucket, base_url=gcs.endpoint, skip_signature=True,
                             client_options={"allow_http": True}, retry_config={"max_retries": 0}), "canary", b"1")
        except Exception:  # noqa: BLE001 - expected: no token
            pass
    except Exception:  # noqa: BLE001
        errors["setup"] = traceback.format_exc()
    finally:
        for s in servers:
            s.stop()
    print(json.dumps({"trap": hits, "errors": errors}))


if __name__ == "__main__":
    main()
