"""``-o metrics=ADDR:PORT`` (Prometheus, scraped here) and ``nczfs stats --json``."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from nczfs.toolbox import metrics
from nczfs.toolbox.metrics import HELP, describe, parse_address
from nczfs.toolbox.errors import SourceError
from tests.helpers import DirectoryBackend, S3Backend, counts, mounted, run_nczfs


def _every_backend_loaded() -> None:
    """Every module of the store's packages imported, as a daemon has imported those of its
    backend: each declares its counters when imported (metrics.declare)."""
    import importlib
    import pkgutil

    import nczfs.store

    for module in pkgutil.walk_packages(nczfs.store.__path__, "nczfs.store."):
        importlib.import_module(module.name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port: int) -> dict:
    """The families as a Prometheus server that asks for OpenMetrics (with units) sees them."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics",
                                 headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200
        text = r.read().decode()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:  # the classic format too
        assert b'nczfs_s3_requests_total{operation="GetObject"}' in r.read()
    return {f.name: f for f in text_string_to_metric_families(text)}


@pytest.mark.fuse
def test_metrics_serve_every_counter_stats_shows_with_help_and_units(s3_server, tmp_path):
    backend = S3Backend(s3_server, s3_server.shared_bucket, s3_server.new_prefix())
    backend.put("d/a", b"abc" * 1000)
    port = _free_port()
    with mounted(backend, tmp_path / "mnt", "-o", f"metrics=127.0.0.1:{port}", "--cache-dir", str(tmp_path / "cd")) as m:
        assert (m.path / "d" / "a").read_bytes() == b"abc" * 1000
        (m.path / "d" / "b").write_bytes(b"x" * 5000)
        shown = counts(m.path)
        fams = _scrape(port)
        stats = json.loads(run_nczfs("stats", "--json", str(m.path)).stdout)
    assert stats["metrics"] == f"http://127.0.0.1:{port}/metrics" and stats["counters"].keys() == shown.keys()
    _every_backend_loaded()
    info = fams["nczfs_info"].samples[0].labels
    assert info["mountpoint"] == str(m.path) and info["source"] == backend.source
    for key, value in shown.items():
        name, labels, kind, unit, doc = describe(key)
        assert "no description" not in doc, f"{key}: add it to nczfs.toolbox.metrics.HELP"
        fam = fams[name]
        assert fam.type == kind and fam.documentation == doc and fam.unit == unit, (key, fam)
        suffix = "_total" if kind == "counter" else ""
        samples = [s for s in fam.samples if s.name == name + suffix and s.labels == labels]
        assert len(samples) == 1, (key, fam.samples)
        # counters only grow between the stats read and the scrape; gauges may move both ways
        assert samples[0].value >= value if kind == "counter" else samples[0].value >= 0, key
    assert fams["nczfs_s3_requests"].type == "counter"
    get = [s for s in fams["nczfs_s3_requests"].samples if s.labels == {"operation": "GetObject"}]
    assert get and get[0].value >= 1
    assert fams["nczfs_cache_fetched_bytes"].unit == "bytes" and fams["nczfs_cache_held_bytes"].type == "gauge"
    assert any(s.labels == {"operation": "write"} and s.value >= 1 for s in fams["nczfs_fuse_requests"].samples)


def test_every_described_counter_has_a_valid_prometheus_name():
    _every_backend_loaded()
    for key in HELP:
        name, _, _, unit, _ = describe(key)
        assert name.startswith("nczfs_") and "-" not in name and "." not in name
        assert name.split("_").count("bytes") == (unit == "bytes") and name.endswith(unit), name  # at the end, once


def test_the_backends_declare_their_counters_under_the_names_exported_before():
    """Each backend's counters are declared by its own package (metrics.py declares the mount's
    own only), under the metric names dashboards already use."""
    import subprocess
    import sys

    from nczfs.store.registry import BACKENDS

    own = json.loads(subprocess.run(
        [sys.executable, "-c", "import json; from nczfs.toolbox import metrics as m; "
                               "print(json.dumps([list(m.HELP), [[f.name, f.doc] for f in m.FAMILIES.values()]]))"],
        capture_output=True, text=True, check=True).stdout)
    names = {n for b in BACKENDS.values() for n in (b.name, *b.schemes)}
    words = {key.partition(".")[0] for key in own[0]}  # whose counter: cache., write., zip., ...
    words |= {w for name, doc in own[1] for w in (*name.split("_"), *doc.lower().replace(",", "").split())}
    assert words & names == set()
    _every_backend_loaded()
    assert describe("GetObject") == ("nczfs_s3_requests", {"operation": "GetObject"}, "counter", "",
                                     "S3 requests sent, by operation")
    assert describe("GET")[:2] == ("nczfs_s3_requests", {"operation": "GET"})
    assert describe("fuse.read") == ("nczfs_fuse_requests", {"operation": "read"}, "counter", "",
                                     "FUSE requests the daemon received, by operation")
    assert [describe(k)[:3] for k in ("zip.conflicts", "zip.merged", "retries-considered")] == [
        ("nczfs_zip_conflicts", {}, "counter"), ("nczfs_zip_merged", {}, "counter"),
        ("nczfs_retries_considered", {}, "counter")]


def test_a_backend_declares_its_own_counters_and_family(monkeypatch):
    """A toy backend's counters, declared from its package: described, its family labelled."""
    monkeypatch.setattr(metrics, "HELP", dict(HELP))
    monkeypatch.setattr(metrics, "FAMILIES", dict(metrics.FAMILIES))
    assert "no description" in describe("toy.drawers-opened")[4]
    metrics.declare({"toy.drawers-opened": ("counter", "", "Drawers the toy opened")},
                    metrics.Family("nczfs_toy_requests", "Toy requests, by operation",
                                   lambda key: key.removeprefix("toy:") if key.startswith("toy:") else None))
    assert describe("toy.drawers-opened") == ("nczfs_toy_drawers_opened", {}, "counter", "", "Drawers the toy opened")
    assert describe("toy:Open") == ("nczfs_toy_requests", {"operation": "Open"}, "counter", "",
                                    "Toy requests, by operation")
    fams = {f.name: f for f in metrics.families({"toy.drawers-opened": 2, "toy:Open": 3}, {})}
    assert fams["nczfs_toy_requests"].samples[0].labels == {"operation": "Open"}


@pytest.mark.fuse
def test_metrics_address_in_use_refuses_the_mount(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "mnt").mkdir()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = run_nczfs("mount", str(src), str(tmp_path / "mnt"), "-o", f"metrics=127.0.0.1:{port}",
                        "--log-file", str(tmp_path / "log"))
    assert res.returncode == 2 and f"metrics=127.0.0.1:{port}: cannot listen there" in res.stderr
    bad = run_nczfs("mount", str(src), str(tmp_path / "mnt"), "--metrics", "localhost:http")
    assert bad.returncode == 2 and "not ADDR:PORT" in bad.stderr


def test_metrics_address_forms():
    assert parse_address("9100") == ("127.0.0.1", 9100)
    assert parse_address(":9100") == ("0.0.0.0", 9100)
    assert parse_address("[::1]:9100") == ("::1", 9100)
    with pytest.raises(SourceError):
        parse_address("127.0.0.1:0")


@pytest.mark.fuse
def test_stats_json_is_the_control_file(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    with mounted(DirectoryBackend(src), tmp_path / "mnt") as m:
        (m.path / "f").write_bytes(b"1")
        res = run_nczfs("stats", "--json", str(m.path))
        plain = run_nczfs("stats", str(m.path))
    data = json.loads(res.stdout)
    assert res.returncode == 0 and isinstance(data["pid"], int) and data["counters"]["fuse.write"] >= 1
    assert data["log"] == str(m.log) and data["log_level"] == "info"
    assert ["log", str(m.log)] in [line.split() for line in plain.stdout.splitlines()]
