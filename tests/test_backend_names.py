"""No module outside a backend's package names a backend to decide something: code that would
compare ``source.backend`` with ``"zip"`` reads a capability the backend declares in its registry
entry instead (each backend's own, in its package: nczfs/store/zip/backend.py, ...; the registry
module, nczfs/store/registry.py, holds only the mechanism and names none).

Read from the source with ``ast``: every comparison (``==``, ``!=``, ``in``, ``not in``) with a
string literal, or a tuple, list or set of them, that is a registered backend's name; and every
``import``/``from`` of a backend's package (``nczfs.store.zip``, ...) from a module outside
nczfs/store/: what the rest of nczfs needs of a backend it reads from its registry entry."""

from __future__ import annotations

import ast
from pathlib import Path

import nczfs
from nczfs.store.registry import BACKENDS

ROOT = Path(nczfs.__file__).parent
#: the backends' packages under nczfs.store (tests/test_layers.py reads this list too)
PACKAGES = ("objstore", "zip", "icechunk", "reference", "directory", "memory")
#: a backend's own package, where it may name itself and the siblings whose entries it declares
OWN = tuple(f"store/{p}/" for p in PACKAGES)
#: outside nczfs/store/, the modules that may import a backend's package, and why (none yet)
IMPORTERS: dict[str, str] = {}


def test_the_backends_packages_and_modules_named_here_exist():
    """A name left behind by a rename would exempt, or ban, nothing; and a backend is a package."""
    assert [p for p in PACKAGES if not (ROOT / "store" / p / "__init__.py").is_file()] == []


def _names(node: ast.AST) -> list[str]:
    """The string literals ``node`` is, or holds (a tuple, list or set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [n for elt in node.elts for n in _names(elt)]
    return []


def comparisons(text: str, names: set[str]) -> list[tuple[int, str]]:
    """``(line, name)`` of each backend name compared in ``text``."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found += [(node.lineno, n) for n in _names(side) if n in names]
    return found


def imports(text: str) -> list[tuple[int, str]]:
    """``(line, module)`` of each import of a backend's package in ``text``."""
    def backend(module: str) -> bool:
        parts = module.split(".")
        return parts[:2] == ["nczfs", "store"] and len(parts) > 2 and parts[2] in PACKAGES

    found = []
    for node in ast.walk(ast.parse(text)):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from nczfs.store import zip`` names the package as an imported name
            modules = [node.module] if backend(node.module) else [f"{node.module}.{a.name}" for a in node.names]
        found += [(node.lineno, m) for m in modules if backend(m)]
    return found


def test_no_module_outside_the_store_imports_a_backends_package():
    bad = [f"{path.relative_to(ROOT)}:{line}: {module}"
           for path in sorted(ROOT.rglob("*.py"))
           if not str(path.relative_to(ROOT)).startswith("store/") and str(path.relative_to(ROOT)) not in IMPORTERS
           for line, module in imports(path.read_text())]
    assert bad == [], "read what the backend declares in its registry entry instead"


def test_the_check_sees_each_form_of_import():
    text = ("import nczfs.store.zip.staging\nfrom nczfs.store.objstore.store import open_s3\n"
            "from nczfs.store import memory\nfrom nczfs.store.registry import BACKENDS\n"
            "import nczfs.store.options\nfrom . import zip\n")
    assert imports(text) == [(1, "nczfs.store.zip.staging"), (2, "nczfs.store.objstore.store"),
                             (3, "nczfs.store.memory")]


def test_no_module_outside_a_backends_package_compares_backend_names():
    names = set(BACKENDS)
    bad = [f"{path.relative_to(ROOT)}:{line}: {name!r}"
           for path in sorted(ROOT.rglob("*.py")) if not str(path.relative_to(ROOT)).startswith(OWN)
           for line, name in comparisons(path.read_text(), names)]
    assert bad == [], "compare a capability the backend declares in its registry entry instead"


def test_the_check_sees_each_form_of_comparison():
    text = ('a = source.backend == "zip"\nb = "s3" != kind\nc = backend in ("memory", "other")\n'
            'd = backend not in {"directory"}\ne = mode == "nczarr"\nf = {"zip": 1}\n')
    assert comparisons(text, set(BACKENDS)) == [(1, "zip"), (2, "s3"), (3, "memory"), (4, "directory")]


def test_each_backend_registers_itself_in_its_own_package():
    """The ``register()`` calls are in the backends' packages, each backend's entry in its own
    (where its opener is), and the registry module imports no backend: it is only the mechanism."""
    import inspect

    callers = sorted(str(path.relative_to(ROOT)) for path in ROOT.rglob("*.py")
                     if any(isinstance(node, ast.Call) and getattr(node.func, "id", None) == "register"
                            for node in ast.walk(ast.parse(path.read_text()))))
    assert callers and all(c.startswith(OWN) for c in callers), callers
    registry = (ROOT / "store" / "registry.py").read_text()
    assert imports(registry) == [] and comparisons(registry, set(BACKENDS)) == []
    for name, backend in BACKENDS.items():
        module = inspect.getmodule(backend.opener).__name__
        home = name if name in PACKAGES else "objstore"  # S3, GCS, Azure, web: one package
        assert module == f"nczfs.store.{home}.backend", (name, module)
