"""Nothing nczfs does with an object store contacts a cloud metadata server or leaves loopback.

The check runs in a network namespace of its own (unshare -n) that has only loopback, where
the metadata addresses (169.254.169.254, 169.254.170.2) are traps listening on loopback: a
connection to one is counted, and no packet can leave the machine whatever the code tries.
Each source (GCS with a key and anonymous, Azure with a key, a connection string and
anonymous, a web server, S3 with a profile and anonymous) is opened as a mount opens it and
used (list, and where writable put, get, stat, delete). A canary (obstore's own anonymous GCS
PUT, which asks the metadata server for a token) shows that the traps catch what they must.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not shutil.which("unshare") or not shutil.which("ip"), reason="needs unshare and ip (util-linux, iproute2)")
def test_no_source_contacts_a_metadata_server():
    script = ("ip link set lo up && ip addr add 169.254.169.254/32 dev lo && ip addr add 169.254.170.2/32 dev lo"
              f" && exec {sys.executable} {ROOT / 'tests' / 'sealed_check.py'}")
    res = subprocess.run(["unshare", "--net", "sh", "-c", script], capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert "setup" not in report["errors"], report["errors"]["setup"]
    assert report["trap"].get("canary", 0) >= 1, report  # the traps work
    assert {k: v for k, v in report["trap"].items() if k != "canary"} == {}, report
    # the sources with credentials worked (anonymous ones may be refused by the servers)
    for label in ("gcs-key", "azure-key", "azure-connection-string", "http", "s3-profile"):
        assert label not in report["errors"], report["errors"]
