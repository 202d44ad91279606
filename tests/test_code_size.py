"""The sizes issue 35 set for a newcomer's reading: no module of nczfs/ over 400 lines, no
function over 50. Complexity (radon, not a dependency) is measured in the closing notes."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "nczfs"
MODULE_LINES = 400
FUNCTION_LINES = 50


def modules() -> list[Path]:
    return sorted(ROOT.rglob("*.py"))


def test_no_module_is_over_400_lines():
    long = {p.relative_to(ROOT.parent).as_posix(): n for p in modules()
            if (n := len(p.read_text().splitlines())) > MODULE_LINES}
    assert not long, long


def test_no_function_is_over_50_lines():
    long = {}
    for p in modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > FUNCTION_LINES:
                    long[f"{p.relative_to(ROOT.parent).as_posix()}:{node.lineno} {node.name}"] = n
    assert not long, long
