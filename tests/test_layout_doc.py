"""The README's layout names every package and module of nczfs/, and no module that is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE = re.compile(r"\b([A-Za-z_]\w*\.py)\b")


def documented() -> set[str]:
    """Module paths the layout block names: a line at column 0 names a package (``nczfs/x/``) or a
    module; the lines below a package name its modules, several on a line or on continuations."""
    text = (ROOT / "README.md").read_text().split("## Layout", 1)[1]
    block = text.split("```", 2)[1]
    names, package = set(), None
    for line in block.splitlines():
        if line.startswith("nczfs/"):
            head = line.split()[0]
            if head.endswith("/"):
                package = head
                continue
            package = None
            names.update(re.findall(r"nczfs/[\w/]+\.py", head))
            continue
        if not line.startswith(" "):
            package = None
        if package is not None:
            names.update(package + m for m in MODULE.findall(line))
    return names


def modules() -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / "nczfs").rglob("*.py") if p.name != "__init__.py"}


def test_every_module_is_in_the_layout():
    missing = sorted(modules() - documented())
    assert not missing, f"the README's layout does not name: {missing}"


def test_the_layout_names_no_module_that_is_gone():
    stale = sorted(documented() - modules())
    assert not stale, f"the README's layout names modules that do not exist: {stale}"


def test_the_readmes_layout_names_every_package():
    text = (ROOT / "README.md").read_text().split("## Layout", 1)[1].split("\n## ", 1)[0]
    packages = {p.parent.relative_to(ROOT).as_posix() + "/" for p in (ROOT / "nczfs").glob("*/__init__.py")}
    named = set(re.findall(r"`(nczfs/\w+/)`", text))
    assert named >= packages - {"nczfs/samples/"}, sorted(packages - named)
