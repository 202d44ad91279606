"""docs/OPERATIONS.md names only tests that exist; the fstab lines in the docs are valid."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from nczfs.config.mountconfig import parse_options
from nczfs.config.source import parse_source

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "OPERATIONS.md"


def _defined(module: str) -> set[str]:
    tree = ast.parse((ROOT / module).read_text())
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


@pytest.mark.parametrize("doc,least", [(DOC, 20), (ROOT / "docs" / "API.md", 4)], ids=["OPERATIONS", "API"])
def test_every_test_named_in_operations_doc_exists(doc, least):
    refs = re.findall(r"`(tests/[\w/]+\.py)::(test_\w+)`", doc.read_text())
    assert len(refs) >= least
    missing = sorted(f"{m}::{n}" for m, n in set(refs) if not (ROOT / m).is_file() or n not in _defined(m))
    assert missing == []


def _fstab_lines(doc: Path) -> list[list[str]]:
    """Lines of fenced blocks whose third field is the fstab type ``fuse.nczfs``."""
    lines, fenced = [], False
    for line in doc.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        fields = line.split()
        if fenced and len(fields) >= 3 and fields[2] == "fuse.nczfs" and fields[0] not in ("#", "mount"):
            lines.append(fields)
    return lines


@pytest.mark.parametrize("doc", [ROOT / "README.md", DOC], ids=["README", "OPERATIONS"])
def test_readme_fstab_lines_parse(doc):
    """Each documented fstab line: six fields, a SOURCE nczfs parses, options it accepts."""
    lines = _fstab_lines(doc)
    backends = set()
    for fields in lines:
        assert len(fields) == 6, fields
        backends.add(parse_source(fields[0]).backend)
        parse_options([fields[3]])
    assert {"s3", "zip"} <= backends
