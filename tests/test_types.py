"""mypy over nczfs/ with the project's settings (pyproject.toml, ``[tool.mypy]``): no error, no
``# type: ignore`` left that nothing needs, and each one left names its error code and says why."""

from __future__ import annotations

import re
import hashlib
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: ``# type: ignore[code]``, then what follows it on the line
IGNORE = re.compile(r"#\s*type:\s*ignore(\[[\w\-, ]+\])?(.*)$")


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    """mypy with the project's settings, its cache kept between runs (a second run takes seconds), one
    cache a checkout: mypy runs of several checkouts sharing one cache read each other's stale entries."""
    cache = Path(tempfile.gettempdir()) / f"nczfs-mypy-cache-{hashlib.sha1(str(ROOT).encode()).hexdigest()[:10]}"
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_mypy_finds_no_error_in_nczfs():
    run = mypy()
    assert run.returncode == 0, run.stdout + run.stderr


def test_no_module_has_error_codes_switched_off():
    """Every module is checked with every error code: pyproject.toml holds no mypy overrides."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert "overrides" not in config, config.get("overrides")


def test_mypy_sees_an_error_and_an_unneeded_ignore(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('def f() -> int:\n    return "x"\n\n\nN: int = 1  # type: ignore[assignment]  # not needed\n')
    out = mypy(str(bad)).stdout
    assert "bad.py:2: error" in out and "[return-value]" in out and "bad.py:5: error: Unused" in out


def bare_ignores(paths: list[Path]) -> list[str]:
    """``path:line`` of each ``# type: ignore`` with no error code or no reason after it."""
    out = []
    for p in paths:
        for n, line in enumerate(p.read_text().splitlines(), 1):
            m = IGNORE.search(line)
            if m and not (m.group(1) and re.match(r"\s+#\s*\S", m.group(2))):
                out.append(f"{p.name}:{n}")
    return out


def test_every_type_ignore_names_its_code_and_says_why(tmp_path):
    assert bare_ignores(sorted((ROOT / "nczfs").rglob("*.py"))) == []
    probe = tmp_path / "probe.py"
    probe.write_text("a = 1  # type: ignore\nb = 2  # type: ignore[misc]\nc = 3  # type: ignore[misc]  # why\n")
    assert bare_ignores([probe]) == ["probe.py:1", "probe.py:2"]
