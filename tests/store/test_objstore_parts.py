"""Each class of ``nczfs/store/objstore`` finds every attribute its methods use on ``self`` in its
own classes (its MRO): a part holds what it uses, given when it is made, so its module reads
alone. (Issue 47: S3Store was five mixins whose methods used attributes only their siblings set.)"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import textwrap

import nczfs.store.objstore as objstore


def _self_names(cls: type) -> tuple[set[str], set[str]]:
    """(the attributes ``cls``'s own methods read on self, those its body defines or its methods set)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    assert isinstance(tree, ast.ClassDef)
    used, defined = set(), set()
    for item in tree.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(item.name)
        elif isinstance(item, ast.Assign):
            defined |= {t.id for t in item.targets if isinstance(t, ast.Name)}
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
            defined.add(item.target.id)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            (defined if isinstance(node.ctx, ast.Store) else used).add(node.attr)
    if dataclasses.is_dataclass(cls):
        defined |= {f.name for f in dataclasses.fields(cls)}
    return used, defined


def _defined_in(cls: type) -> set[str]:
    """Every attribute some class of ``cls``'s MRO defines (a declaration alone does not)."""
    out: set[str] = set()
    for base in cls.__mro__:
        out |= set(vars(base))
        try:
            out |= _self_names(base)[1]
        except (OSError, TypeError):  # a builtin or compiled class: its vars are all there is
            pass
    return out


def _classes() -> list[type]:
    found = []
    for info in pkgutil.iter_modules(objstore.__path__):
        module = importlib.import_module(f"{objstore.__name__}.{info.name}")
        found += [c for c in vars(module).values() if inspect.isclass(c) and c.__module__ == module.__name__]
    return found


def test_every_objstore_class_uses_only_what_its_own_classes_define():
    classes = _classes()
    assert any(c.__name__ == "S3Store" for c in classes)
    borrowed = {}
    for cls in classes:
        missing = _self_names(cls)[0] - _defined_in(cls)
        if missing:
            borrowed[f"{cls.__module__}.{cls.__qualname__}"] = sorted(missing)
    assert not borrowed, f"attributes used on self that no class of the MRO defines (a mixin's): {borrowed}"
