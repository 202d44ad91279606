"""Model-based test on real mounts, in the style of mountpoint-s3's reference tests: Hypothesis
draws sequences of file operations (create, write at an offset, truncate, rename, unlink, mkdir,
rmdir, link, descriptors kept open across steps and closed later, remount), applies each to a
mount and to a local directory (the model), and compares the outcome (errno) of every operation
and, after every step, the trees (names, types, sizes, contents).

What the model does beyond a local directory is what docs/SEMANTICS.md says the backend does: on
S3 a remount loses the empty directories (S3 has none) and turns hard links into copies (a link
is one file for the mount's life only).

The two-mount variant runs each step on one of two mounts of one S3 prefix (``-o
metadata_ttl=0`` on both, so that neither answers from attributes, listings or missing names it
remembers) and compares the files seen through both mounts with the model after every step. There
a file is written and closed within its step (data reaches the store at close), directories are
made as a file's parents and removed, on the model and the acting mount, once a step leaves them
empty (an empty directory would be that mount's own: S3 has none), and there are no links (a link
is one file for its mount's life only).

Short derandomized runs in CI; ``NCZFS_LONG_SUITES=1`` runs long random ones.
"""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from tests.mount.suitemounts import LONG, examples, fresh_dir, mount_backend, mount_pair, remount

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(7200 if LONG else 300)]

PATHS = ["/".join(p) for n in (1, 2, 3) for p in itertools.product("ab", repeat=n)]
paths = st.sampled_from(PATHS)
data = st.binary(max_size=12)
offsets = st.sampled_from([0, 1, 5, 4095, 4096, 70000])
sizes = st.sampled_from([0, 1, 3, 4097, 70001])


def attempt(fn, *args) -> int:
    """0, or the errno ``fn(*args)`` failed with."""
    try:
        fn(*args)
    except OSError as exc:
        return exc.errno
    return 0


def write_file(path: str, value: bytes, flags: int = os.O_CREAT | os.O_WRONLY | os.O_TRUNC, offset: int = 0) -> None:
    fd = os.open(path, flags, 0o644)
    try:
        os.pwrite(fd, value, offset)
    finally:
        os.close(fd)


def tree(root: Path, files_only: bool = False) -> dict[str, object]:
    """Every entry below ``root``: a directory as "dir", a file as its bytes."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for name in sorted(dirnames) if not files_only else ():
            out[os.path.normpath(os.path.join(rel, name))] = "dir"
        for name in filenames:
            full = os.path.join(dirpath, name)
            assert stat.S_ISREG(os.lstat(full).st_mode), full
            with open(full, "rb") as f:
                content = f.read()
            assert len(content) == os.stat(full).st_size, f"{full}: size differs from the bytes read"
            out[os.path.normpath(os.path.join(rel, name))] = content
    return out


def prune(root: Path) -> None:
    """Remove every empty directory below ``root``, deepest first."""
    for dirpath, _, _ in sorted(os.walk(root), key=lambda w: -len(w[0])):
        if dirpath != str(root) and not os.listdir(dirpath):
            os.rmdir(dirpath)


def differences(model: dict, seen: dict) -> list[str]:
    out = [f"missing {k}" for k in sorted(set(model) - set(seen))]
    out += [f"extra {k}" for k in sorted(set(seen) - set(model))]
    return out + [f"differs {k}: {seen[k]!r:.60} != model {model[k]!r:.60}"
                  for k in sorted(set(model) & set(seen)) if model[k] != seen[k]]


class MountModel(RuleBasedStateMachine):
    """One mount (``mount``, a live ``Mount``) against a local directory."""

    mount = None
    backend = "directory"

    def __init__(self) -> None:
        super().__init__()
        self.model = Path(tempfile.mkdtemp(prefix="nczfs-model-"))
        self.name = fresh_dir(self.mount.path, "model").name
        self.kept: list[tuple[int, int]] = []
        self.remounted = False

    @property
    def root(self) -> Path:
        return self.mount.path / self.name

    def both(self, fn, *rels, extra=()) -> None:
        """``fn`` on the model's paths, then on the mount's: the same errno (or none)."""
        want = attempt(fn, *[str(self.model / r) for r in rels], *extra)
        got = attempt(fn, *[str(self.root / r) for r in rels], *extra)
        assert got == want, f"{fn.__name__}{rels}: errno {got} on the mount, {want} on a local directory"

    @rule(p=paths, value=data)
    def create(self, p, value):
        self.both(write_file, p, extra=(value,))

    @rule(p=paths, value=data, offset=offsets)
    def write_at(self, p, value, offset):
        self.both(write_file, p, extra=(value, os.O_WRONLY, offset))

    @rule(p=paths, size=sizes)
    def truncate(self, p, size):
        self.both(os.truncate, p, extra=(size,))

    @rule(src=paths, dst=paths)
    def rename(self, src, dst):
        self.both(os.rename, src, dst)

    @rule(p=paths)
    def unlink(self, p):
        self.both(os.unlink, p)

    @rule(p=paths)
    def mkdir(self, p):
        self.both(os.mkdir, p)

    @rule(p=paths)
    def rmdir(self, p):
        self.both(os.rmdir, p)

    @rule(src=paths, dst=paths)
    def link(self, src, dst):
        self.both(os.link, src, dst)

    @precondition(lambda self: len(self.kept) < 2)
    @rule(p=paths)
    def open_and_keep(self, p):
        try:
            want = os.open(self.model / p, os.O_RDWR)
        except OSError as exc:
            with pytest.raises(OSError) as info:
                os.close(os.open(self.root / p, os.O_RDWR))
            assert info.value.errno == exc.errno
            return
        self.kept.append((want, os.open(self.root / p, os.O_RDWR)))

    @precondition(lambda self: self.kept)
    @rule(i=st.integers(0, 1), value=data, offset=offsets)
    def write_kept(self, i, value, offset):
        for fd in self.kept[i % len(self.kept)]:
            os.pwrite(fd, value, offset)

    @precondition(lambda self: self.kept)
    @rule(i=st.integers(0, 1))
    def close_kept(self, i):
        for fd in self.kept.pop(i % len(self.kept)):
            os.close(fd)

    @precondition(lambda self: not self.remounted)
    @rule()
    def remount(self):
        """Rare (once an example at most): every handle closed, unmounted, mounted again."""
        self.remounted = True
        while self.kept:
            self.close_kept(0)
        remount(self.mount)
        self.root.mkdir(exist_ok=True)  # the example's own directory, gone with S3's empty ones
        if self.backend != "directory":
            self.after_a_remount()

    def after_a_remount(self) -> None:
        """S3 keeps no empty directory and no hard link: the model loses them too."""
        for dirpath, _, filenames in os.walk(self.model):
            for name in filenames:
                p = os.path.join(dirpath, name)
                if os.stat(p).st_nlink > 1:
                    shutil.copy(p, p + ".copy")
                    os.replace(p + ".copy", p)
        prune(self.model)

    @invariant()
    def trees_match(self):
        assert differences(tree(self.model), tree(self.root)) == []

    def teardown(self):
        for pair in self.kept:
            for fd in pair:
                os.close(fd)
        shutil.rmtree(self.model, ignore_errors=True)


@pytest.fixture(scope="module", params=["directory", "s3"])
def model_mount(request, tmp_path_factory):
    with mount_backend(request.param, request, tmp_path_factory.mktemp(f"model-{request.param}")) as m:
        yield m


def test_random_file_operations_match_a_local_directory(model_mount):
    machine = type("Model", (MountModel,), {"mount": model_mount, "backend": model_mount.backend.name})
    run_state_machine_as_test(machine, settings=examples(6, steps=15))


class TwoMountModel(RuleBasedStateMachine):
    """Each step on one of two mounts of one S3 prefix; the files both show against the model."""

    mounts: tuple = ()

    def __init__(self) -> None:
        super().__init__()
        self.model = Path(tempfile.mkdtemp(prefix="nczfs-model2-"))
        self.name = fresh_dir(self.mounts[0].path, "pair").name

    def on(self, which: int, fn, *rels, extra=()) -> None:
        """``fn`` on the model and on mount ``which``: the same errno; then the directories left
        empty are removed from both (an empty directory would be that mount's own)."""
        root = self.mounts[which].path / self.name
        want = attempt(fn, *[str(self.model / r) for r in rels], *extra)
        got = attempt(fn, *[str(root / r) for r in rels], *extra)
        assert got == want, f"{fn.__name__}{rels} on mount {which + 1}: errno {got}, {want} on a local directory"
        prune(self.model)
        prune(root)

    @rule(which=st.integers(0, 1), p=paths, value=data)
    def create(self, which, p, value):
        def made(path, value):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_file(path, value)

        self.on(which, made, p, extra=(value,))

    @rule(which=st.integers(0, 1), p=paths, value=data, offset=offsets)
    def write_at(self, which, p, value, offset):
        self.on(which, write_file, p, extra=(value, os.O_WRONLY, offset))

    @rule(which=st.integers(0, 1), p=paths, size=sizes)
    def truncate(self, which, p, size):
        self.on(which, os.truncate, p, extra=(size,))

    @rule(which=st.integers(0, 1), src=paths, dst=paths)
    def rename(self, which, src, dst):
        self.on(which, os.rename, src, dst)

    @rule(which=st.integers(0, 1), p=paths)
    def unlink(self, which, p):
        self.on(which, os.unlink, p)

    @invariant()
    def both_mounts_show_the_model(self):
        want = tree(self.model, files_only=True)
        for i, m in enumerate(self.mounts):
            assert differences(want, tree(m.path / self.name, files_only=True)) == [], f"mount {i + 1}"

    def teardown(self):
        shutil.rmtree(self.model, ignore_errors=True)


@pytest.fixture(scope="module")
def s3_pair(request, tmp_path_factory):
    with mount_pair(request, tmp_path_factory.mktemp("model-pair"), "-o", "metadata_ttl=0") as pair:
        yield pair


def test_two_mounts_of_one_s3_prefix_interleaved_match_a_local_directory(s3_pair):
    machine = type("PairModel", (TwoMountModel,), {"mounts": s3_pair})
    run_state_machine_as_test(machine, settings=examples(6, steps=15))
