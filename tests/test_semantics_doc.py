"""docs/SEMANTICS.md and the tests it cites stay in step (no mount needed)."""

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "SEMANTICS.md"
DEFAULT_MODULE = "tests/mount/test_semantics.py"


def cited() -> set[tuple[str, str]]:
    """(module path, test name) for every test named in the document."""
    out = set()
    for module, name in re.findall(r"`(?:(tests/[\w/]+\.py)::)?((?:[A-Z]\w*::)?test_\w+)`", DOC.read_text()):
        out.add((module or DEFAULT_MODULE, name))
    return out


@functools.cache  # each module parsed once, not once a citation (583 of them)
def defined(module: str) -> set[str]:
    """The module's test functions, and its classes' test methods as ``Class::test_x``."""
    tree = ast.parse((ROOT / module).read_text())
    tests = (ast.FunctionDef, ast.AsyncFunctionDef)
    out = {n.name for n in tree.body if isinstance(n, tests) and n.name.startswith("test_")}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        out |= {f"{cls.name}::{n.name}" for n in cls.body if isinstance(n, tests) and n.name.startswith("test_")}
    return out


def test_every_cited_test_exists():
    refs = cited()
    assert len(refs) > 40
    missing = sorted(f"{m}::{n}" for m, n in refs if not (ROOT / m).is_file() or n not in defined(m))
    assert missing == []


def test_every_semantics_test_is_cited():
    names = {n for m, n in cited() if m == DEFAULT_MODULE}
    assert sorted(defined(DEFAULT_MODULE) - names) == []
