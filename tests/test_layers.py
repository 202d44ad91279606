"""The layers stay layers: every module of nczfs sits in one layer of :data:`LAYERS` and imports
only from its own layer and those below; no import cycles among nczfs's modules, nor among its
packages; the cache knows no NCZarr and no backend, the NCZarr layer and the filesystem logic
(nczfs/fs) reach the cache only through a Store, and nczfs/fs knows neither pyfuse3 nor the adapter
that calls it.

Read from the source with ``ast``, not by importing: every import statement, in functions too and
under ``if TYPE_CHECKING:`` (except for cycles: an import annotations alone need runs never).
"""

from __future__ import annotations

import ast
from pathlib import Path

import nczfs
from tests.test_backend_names import PACKAGES as BACKEND_PACKAGES

ROOT = Path(nczfs.__file__).parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


#: nczfs's layers, lowest first, each a name and its packages and modules (a package holds its
#: subpackages). A module imports from its own layer and the layers below, never from one above.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("toolbox", ("nczfs.toolbox",)),
    ("store", ("nczfs.store",)),
    ("cache", ("nczfs.cache",)),
    ("mount description", ("nczfs.config",)),
    ("nczarr metadata", ("nczfs.nczarr.metadata",)),
    ("nczarr chunks", ("nczfs.nczarr.chunks",)),
    ("nczarr views and files", ("nczfs.nczarr.views", "nczfs.nczarr.ncfile")),
    ("nczarr", ("nczfs.nczarr",)),
    ("fs", ("nczfs.fs",)),
    ("stack", ("nczfs.daemon.stack", "nczfs.zarrstore")),
    ("fuse/daemon", ("nczfs.fuse", "nczfs.daemon")),
    ("api", ("nczfs", "nczfs.api")),
    ("cli", ("nczfs.cli", "nczfs.__main__")),
]

#: upward imports not mended yet, each ``(importer, imported): why``; only ever shorter
UPWARD: dict[tuple[str, str], str] = {
}


def walk(node: ast.AST, type_checking: bool = False):
    """``ast.walk``, without the bodies of ``if TYPE_CHECKING:`` unless ``type_checking``."""
    yield node
    for child in ast.iter_child_nodes(node):
        if type_checking or not (isinstance(child, ast.If)
                                 and ast.unparse(child.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")):
            yield from walk(child, type_checking)


def imports(type_checking: bool = False) -> dict[str, set[str]]:
    """``{module: the nczfs modules it imports}``, ``from pkg import mod`` counted as ``pkg.mod``;
    those under ``if TYPE_CHECKING:`` too if ``type_checking``."""
    paths = {module_name(p): p for p in ROOT.rglob("*.py")}
    out: dict[str, set[str]] = {}
    for name, path in paths.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in walk(ast.parse(path.read_text()), type_checking):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base for a in node.names)
        out[name] = {m for m in found if m in paths and m != name}
    return out


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of the layer ``module`` sits in (its longest listed prefix; the
    package ``nczfs`` holds only its ``__init__``)."""
    found = [(len(m), i) for i, (_, ms) in enumerate(LAYERS) for m in ms
             if module == m or (m != "nczfs" and module.startswith(m + "."))]
    assert found, f"{module} is in no layer of LAYERS"
    return max(found)[1]


def upward(graph: dict[str, set[str]]) -> dict[tuple[str, str], str]:
    """Every import of a module from a layer above its own: ``{(importer, imported): 'low < high'}``.
    ``import nczfs`` (the package: ``__version__``, the API loaded lazily) is no layer's."""
    return {(m, n): f"{LAYERS[layer_of(m)][0]} < {LAYERS[layer_of(n)][0]}"
            for m in graph for n in graph[m] if n != "nczfs" and layer_of(n) > layer_of(m)}


def test_every_module_sits_in_one_layer():
    for m in imports():
        layer_of(m)


def test_no_module_imports_from_a_layer_above_its_own():
    """Every import counts: in functions, under ``if TYPE_CHECKING:`` (what annotations name is a
    dependency too)."""
    found = upward(imports(type_checking=True))
    assert {k: v for k, v in found.items() if k not in UPWARD} == {}
    assert sorted(k for k in UPWARD if k not in found) == []  # an upward import mended leaves UPWARD


def test_the_layer_check_sees_upward_imports_of_every_kind():
    graph = imports(type_checking=True)
    assert "nczfs.fs.filesystem" in graph["nczfs.fuse.ops"]  # fuse/daemon over fs: down
    assert upward({"nczfs.fs.x": {"nczfs.fuse.ops"}}) == {("nczfs.fs.x", "nczfs.fuse.ops"): "fs < fuse/daemon"}
    assert upward({"nczfs.cli.x": {"nczfs.fs.x", "nczfs"}, "nczfs.daemon.mount": {"nczfs"}}) == {}
    assert LAYERS[layer_of("nczfs.store.objstore.store")][0] == "store" and layer_of("nczfs.fuse") == layer_of("nczfs.daemon.mount")
    assert upward({"nczfs.nczarr.metadata.x": {"nczfs.nczarr.chunks.y", "nczfs.nczarr.views.z"},
                   "nczfs.nczarr.views.z": {"nczfs.nczarr.ncfile.w", "nczfs.nczarr.chunks.y"}}) == {
        ("nczfs.nczarr.metadata.x", "nczfs.nczarr.chunks.y"): "nczarr metadata < nczarr chunks",
        ("nczfs.nczarr.metadata.x", "nczfs.nczarr.views.z"): "nczarr metadata < nczarr views and files"}
    assert package_of("nczfs.nczarr.views.emit") == "nczfs.nczarr.views" != package_of("nczfs.nczarr.ncfile.ncfiles")
    assert package_of("nczfs.nczarr.ncfile.hdf5.writer") == "nczfs.nczarr.ncfile" and package_of("nczfs.nczarr.layer") == "nczfs.nczarr"


def test_no_module_imports_itself_round_a_cycle():
    assert cycle(imports()) is None


def package_of(module: str) -> str:
    """``nczfs.store`` for ``nczfs.store.objstore.store``, a room of nczarr for its modules
    (``nczfs.nczarr.views`` for ``nczfs.nczarr.views.emit``); a module at nczfs's root is its own."""
    parts = module.split(".")
    if parts[:2] == ["nczfs", "nczarr"] and len(parts) > 3:
        return ".".join(parts[:3])
    return ".".join(parts[:2]) if len(parts) > 2 or (ROOT / parts[-1]).is_dir() else module


def test_no_package_imports_itself_round_a_cycle():
    """Between nczfs's packages (and root modules) too: store never imports a module that imports the store."""
    graph: dict[str, set[str]] = {}
    for m, ns in imports().items():  # ``import nczfs`` (``__version__``) is no package's, as in upward()
        graph.setdefault(package_of(m), set()).update(
            package_of(n) for n in ns if package_of(n) != package_of(m) and n != "nczfs")
    assert cycle(graph) is None


def test_the_cycle_finder_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_the_cache_imports_nothing_of_the_layers_above_or_of_a_backend():
    graph = imports(type_checking=True)
    cache = [m for m in graph if m == "nczfs.cache" or m.startswith("nczfs.cache.")]
    assert cache
    # the backends' packages as tests/test_backend_names.py lists them, each still there (a name
    # left behind by a rename would ban nothing)
    backends = tuple(f"nczfs.store.{b}" for b in BACKEND_PACKAGES)
    assert [b for b in backends if b not in graph] == []
    above = ("nczfs.nczarr", "nczfs.fs", "nczfs.fuse.ops", "nczfs.daemon.mount", "nczfs.daemon.stack", "nczfs.config.source",
             "nczfs.config.mountconfig", "nczfs.store.registry") + backends
    wrong = {m: sorted(n for n in graph[m] if n.startswith(above)) for m in cache}
    assert {m: ns for m, ns in wrong.items() if ns} == {}


def external_imports(module: str) -> set[str]:
    """The top-level names of what ``module`` imports from outside nczfs."""
    path = ROOT.parent.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    found = set()
    for node in walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name.partition(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.partition(".")[0])
    return found - {"nczfs"}


def test_the_filesystem_logic_imports_neither_pyfuse3_nor_the_layers_above():
    """nczfs/fs is plain async Python over a Store: the FUSE adapter calls it, never the reverse,
    and the NCZarr layer and the cache below it are reached only through the Store it is given."""
    graph = imports(type_checking=True)
    fs = [m for m in graph if m == "nczfs.fs" or m.startswith("nczfs.fs.")]
    assert "nczfs.fs.filesystem" in fs and "nczfs.fs.writeback" in fs
    above = {"nczfs.fuse", "nczfs.fuse.ops", "nczfs.daemon.mount", "nczfs.fuse.control", "nczfs.daemon.controlsock", "nczfs.fuse.trio_loop",
             "nczfs.nczarr", "nczfs.cache", "nczfs.daemon.stack", "nczfs.daemon.umount", "nczfs.cli", "nczfs.api"}
    wrong = {m: sorted(n for n in graph[m] if any(n == a or n.startswith(a + ".") for a in above)) for m in fs}
    assert {m: ns for m, ns in wrong.items() if ns} == {}
    assert {m for m in fs if "pyfuse3" in external_imports(m)} == set()
    assert "pyfuse3" in external_imports("nczfs.fuse.ops")  # the check sees a real import


def test_only_the_fuse_package_and_the_daemon_import_pyfuse3():
    """The adapter, its control file, the kernel notices and the trio loop are nczfs/fuse; the
    daemon (mount.py) wires them; nothing else of nczfs knows pyfuse3."""
    importing = {m for m in imports() if "pyfuse3" in external_imports(m)}
    assert importing == {"nczfs.daemon.mount", "nczfs.fuse.ops", "nczfs.fuse.notifier", "nczfs.fuse.trio_loop"}
    assert "pyfuse3" not in external_imports("nczfs.fuse.control")  # read by clients (stats, umount)


def test_the_mount_tells_the_cache_which_keys_are_metadata(tmp_path):
    from dataclasses import replace

    from nczfs.config.mountconfig import MountConfig
    from nczfs.config.source import parse_source
    from nczfs.daemon.stack import cached
    from nczfs.store.memory.store import MemoryStore
    from nczfs.store.threads import ThreadedStore

    config = MountConfig(source=parse_source("s3://bkt/p"), mountpoint=str(tmp_path))
    store = MemoryStore("layers")
    store.capabilities = replace(store.capabilities, remote=True)  # as S3's: its bytes are cached
    ahead = cached(ThreadedStore(store), config).metadata_ahead
    assert ahead.enabled and ahead.is_metadata("a/b/.zarray") and not ahead.is_metadata("a/b/0.0")


def every_import(path: Path) -> set[str]:
    """Every module ``path`` names in an import statement, those under ``if TYPE_CHECKING:`` too."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.update([node.module or ""] + [f"{node.module}.{a.name}" for a in node.names])
    return found


def test_the_nczarr_layer_imports_neither_pyfuse3_nor_the_filesystem_nor_the_cache():
    """Changes reach the kernel through the notifier the mount passes in (nczarr.layer.Notify); the
    cache below is reached only through the Store the layer is given."""
    above = ("pyfuse3", "nczfs.fs", "nczfs.fuse", "nczfs.fuse.ops", "nczfs.daemon.mount", "nczfs.cache")
    files = sorted((ROOT / "nczarr").rglob("*.py"))
    assert files
    below = tuple(a + "." for a in above)
    wrong = {str(p.relative_to(ROOT)): sorted(m for m in every_import(p) if m in above or m.startswith(below))
             for p in files}
    assert {name: ms for name, ms in wrong.items() if ms} == {}


def test_the_icechunk_backend_knows_no_mount_config():
    """The registry builds IcechunkOptions from the MountConfig; the backend takes only those."""
    files = sorted((ROOT / "store" / "icechunk").rglob("*.py"))
    assert len(files) > 1
    assert {str(p.relative_to(ROOT)) for p in files if "nczfs.config.mountconfig" in every_import(p)} == set()
