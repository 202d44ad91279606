"""Another program rewriting a zip archive the store has open: its changes are never overwritten
by a commit, the store's staged changes are never lost (nczfs/store/zip/behind.py, rebase.py)."""

from __future__ import annotations

import errno
import json
import logging
import os
import zipfile

import pytest

from nczfs.toolbox.errors import BackendError
from nczfs.store.keys import CONFLICT_SUFFIX
from nczfs.store.zip.rebase import rebased
from nczfs.store.zip.store import ZipStore
from tests.store.test_zip import make_zip
from tests.ziputil import rewrite_zip, zip_members


@pytest.fixture
def archive(tmp_path):
    path = tmp_path / "ds.zip"
    make_zip(path, {"a": b"1", "b": b"2"})
    return path


def kept_beside(members: dict[str, bytes], key: str) -> list[bytes]:
    return [v for k, v in members.items() if k.startswith(key + CONFLICT_SUFFIX)]


def test_a_member_another_program_changed_keeps_its_version_and_the_staged_one_goes_beside(archive, caplog):
    s = ZipStore(str(archive))
    s.set("a", b"staged by the mount")
    s.set("mine", b"new")
    rewrite_zip(archive, {"a": b"theirs", "theirs": b"new too"})
    s.sync()
    members = zip_members(archive)
    assert {k: v for k, v in members.items() if CONFLICT_SUFFIX not in k} == {
        "a": b"theirs", "b": b"2", "mine": b"new", "theirs": b"new too"}
    assert kept_beside(members, "a") == [b"staged by the mount"]
    assert s.counters()["zip.conflicts"] == 1
    assert "another program changed 'a'" in caplog.text and "a.nczfs-conflict-" in caplog.text
    s.close()


def test_a_commit_finds_an_archive_rewritten_in_place_with_the_same_size_and_mtime(archive):
    """Its ``stat`` is the same: the bytes of the central directory tell it changed."""
    s = ZipStore(str(archive))
    s.set("mine", b"staged")
    st = os.stat(archive)
    data = archive.read_bytes()
    assert data.count(b"ds/a") == 2  # the local header's name and the central directory's
    with open(archive, "r+b") as f:  # another program renames a member in place
        f.write(data.replace(b"ds/a", b"ds/x"))
    os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = os.stat(archive)
    assert (now.st_ino, now.st_size, now.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
    s.sync()
    assert zip_members(archive) == {"x": b"1", "b": b"2", "mine": b"staged"}
    s.close()


def test_a_commit_tries_again_when_the_archive_changes_while_the_new_one_is_written(archive, monkeypatch):
    s = ZipStore(str(archive))
    s.set("mine", b"staged")
    write = ZipStore._write_archive
    calls = []

    def another_program_meanwhile(self, tmp):
        write(self, tmp)
        calls.append(tmp)
        if len(calls) == 1:
            rewrite_zip(archive, {"theirs": b"meanwhile"})

    monkeypatch.setattr(ZipStore, "_write_archive", another_program_meanwhile)
    s.sync()
    assert len(calls) == 2
    assert zip_members(archive) == {"a": b"1", "b": b"2", "mine": b"staged", "theirs": b"meanwhile"}
    s.close()


@pytest.mark.parametrize("swap", ["exchange", "no-exchange"])
@pytest.mark.parametrize("how", ["replaced", "in-place"])
def test_a_change_between_the_commits_check_and_its_swap_is_not_replaced(archive, monkeypatch, swap, how):
    """The staging's fault hook runs another program's change after the commit's last check of
    the archive, right before the swap (as the directory store's ``before_replace``): the swap
    (``RENAME_EXCHANGE``) finds it in the archive swapped out and puts it back; where the swap is
    missing, the archive is checked right before the plain rename. Either way the change is kept
    and the commit made again on top of it."""
    import nczfs.store.noreplace as noreplace

    if swap == "no-exchange":
        monkeypatch.setattr(noreplace, "_call", None)
    s = ZipStore(str(archive))
    s.set("mine", b"staged")
    calls = []

    def another_program(path):
        calls.append(path)
        if len(calls) > 1:
            return
        if how == "replaced":
            rewrite_zip(archive, {"theirs": b"between the check and the swap"})
        else:  # in place, size and mtime kept: only the central directory tells
            st, data = os.stat(archive), archive.read_bytes()
            archive.write_bytes(data.replace(b"ds/b", b"ds/B"))
            os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns))

    s.staging.before_replace = another_program
    s.sync()
    assert calls == [str(archive)] * 2  # refused once, made again on top
    theirs = {"theirs": b"between the check and the swap", "b": b"2"} if how == "replaced" else {"B": b"2"}
    assert zip_members(archive) == {"a": b"1", "mine": b"staged", **theirs}
    assert sorted(os.listdir(archive.parent / ".ds.zip.nczfs")) == ["lock"]
    s.close()


def test_a_commit_gives_up_with_estale_while_another_program_keeps_rewriting(archive, monkeypatch):
    s = ZipStore(str(archive))
    s.set("mine", b"staged")
    write = ZipStore._write_archive
    n = iter(range(100))

    def always_changed(self, tmp):
        write(self, tmp)
        rewrite_zip(archive, {f"theirs{next(n)}": b"x"})

    monkeypatch.setattr(ZipStore, "_write_archive", always_changed)
    with pytest.raises(BackendError) as err:
        s.sync()
    assert err.value.errno == errno.ESTALE and "staged writes are kept" in str(err.value)
    assert "mine" not in zip_members(archive) and s.get("mine") == b"staged"
    monkeypatch.undo()
    s.close()  # the next commit, once the other program is done
    assert zip_members(archive)["mine"] == b"staged" and zipfile.ZipFile(archive).testzip() is None


def test_a_members_version_is_its_content_the_mounts_own_commit_changes_none(archive):
    s = ZipStore(str(archive))
    staged = s.set("mine", b"staged")
    before = {k: s.stat(k).etag for k in ("a", "b")}
    s.set("0", b"moves every member")
    s.sync()
    assert {k: s.stat(k).etag for k in ("a", "b")} == before and s.stat("mine").etag == staged.etag
    s.set("mine", b"again", if_version=staged.etag)  # no conflict with itself
    s.close()


def test_rebased_records_follow_the_objects_kept_beside():
    records = [{"op": "set", "key": "a", "file": "obj-1", "size": 1, "mtime": 0},
               {"op": "mv", "src": "a", "dst": "c"},
               {"op": "cp", "src": "b", "dst": "d"},
               {"op": "del", "key": "e"},
               {"op": "meta", "key": "f", "meta": {}},
               {"op": "set", "key": "g", "file": "obj-2", "size": 1, "mtime": 0},
               {"op": "del", "key": "g"}]
    out = rebased(records, {"a", "b", "e", "f", "g"}, now=0)
    a, g = "a.nczfs-conflict-19700101T000000Z", "g.nczfs-conflict-19700101T000000Z"
    assert out.records == [{"op": "set", "key": a, "file": "obj-1", "size": 1, "mtime": 0},
                           {"op": "mv", "src": a, "dst": "c"},
                           {"op": "set", "key": g, "file": "obj-2", "size": 1, "mtime": 0},
                           {"op": "del", "key": g}]
    assert out.kept == [("a", a), ("g", g)]
    assert out.dropped == [("b", "cp"), ("e", "del"), ("f", "meta")]
    assert rebased(records, set()).records == records


def without_conflicts(members: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in members.items() if CONFLICT_SUFFIX not in k}


def test_a_directory_rename_is_checked_member_by_member_on_a_changed_archive(tmp_path, caplog):
    """The mount renames ``d`` to ``e`` (after writing ``d/z``, and writes ``e/w`` after);
    another program meanwhile rewrites ``d/x`` and ``d/z`` and makes ``e/y``. Its versions stay
    where it put them; the mount's ``d/z`` and ``d/y`` go beside as conflict files; the rest
    moves."""
    archive = tmp_path / "ds.zip"
    make_zip(archive, {"a": b"1", "d/x": b"x0", "d/y": b"y0", "d/z": b"z0", "d/sub/q": b"q0"})
    s = ZipStore(str(archive))
    s.set("d/z", b"z: the mount's")
    s.rename_dir("d", "e")
    s.set("e/w", b"after the rename")
    rewrite_zip(archive, {"d/x": b"x: theirs", "d/z": b"z: theirs", "e/y": b"y: theirs"})
    s.sync()
    members = zip_members(archive)
    assert without_conflicts(members) == {
        "a": b"1", "d/x": b"x: theirs", "d/z": b"z: theirs", "e/y": b"y: theirs", "e/sub/q": b"q0",
        "e/w": b"after the rename"}
    assert kept_beside(members, "e/y") == [b"y0"] and kept_beside(members, "e/z") == [b"z: the mount's"]
    assert len(members) == 8 and s.counters()["zip.conflicts"] == 2
    assert "another program changed 'd/x'" in caplog.text and "move with its directory" in caplog.text
    assert sorted(e.name for e in s.list_dir("d")) == ["x", "z"]
    s.close()


def test_a_directory_renamed_where_another_program_made_a_file_goes_beside_it(tmp_path):
    """Nothing staged is lost (the journal was orphaned before): the directory goes beside the
    other program's file, with the writes made in it after the rename."""
    archive = tmp_path / "ds.zip"
    make_zip(archive, {"d/x": b"x0"})
    s = ZipStore(str(archive))
    s.rename_dir("d", "e")
    s.set("e/w", b"after the rename")
    rewrite_zip(archive, {"e": b"their file"})
    s.sync()
    members = zip_members(archive)
    assert without_conflicts(members) == {"e": b"their file"}
    beside = sorted(k for k in members if k.startswith("e" + CONFLICT_SUFFIX))
    assert [k.partition("/")[2] for k in beside] == ["w", "x"] and s.counters()["zip.conflicts"] == 1
    s.close()


def test_a_rebased_directory_rename_keeps_and_puts_beside_by_member():
    records = [{"op": "set", "key": "d/z", "file": "obj-1", "size": 1, "mtime": 0},
               {"op": "mvdir", "src": "d", "dst": "e"},
               {"op": "mv", "src": "e/x", "dst": "f"},
               {"op": "del", "key": "e/z"}]
    out = rebased(records, {"d/x", "d/z", "e/y", "d/new"}, now=0, known={"d/x", "d/y", "d/z"})
    t = CONFLICT_SUFFIX + "19700101T000000Z"
    assert out.records == [{"op": "set", "key": "d/z" + t, "file": "obj-1", "size": 1, "mtime": 0},
                           {"op": "mvdir", "src": "d", "dst": "e", "keep": ["d/new", "d/x", "d/z"],
                            "beside": {"e/y": "e/y" + t}},
                           {"op": "del", "key": "e/z" + t}]
    assert out.kept == [("d/z", "d/z" + t), ("e/y", "e/y" + t)]
    assert out.dropped == [("d/x", "mvdir"), ("d/z", "mvdir"), ("e/x", "mv")]


def test_a_member_both_changed_is_merged_where_the_layer_above_says_how(archive, caplog):
    """Told how (``merge_with``: the consolidating layer for consolidated metadata), a member
    another program changed while the mount's change was staged is the merge of the other's
    version, the mount's and the archive's as read; the members it does not want go beside."""
    caplog.set_level(logging.INFO, "nczfs.store.zip.behind")
    calls = []

    def merge(key, theirs, ours, base):
        calls.append((key, theirs, ours, base))
        return theirs + b"+" + ours if key == "a" else None

    s = ZipStore(str(archive))
    s.merge_with(merge, wants=lambda key: key != "b")
    s.set("a", b"ours")
    s.set("b", b"mine")
    s.set("n", b"new here")
    rewrite_zip(archive, {"a": b"theirs", "b": b"their b", "n": b"new there"})
    s.sync()
    members = zip_members(archive)
    assert {k: v for k, v in members.items() if CONFLICT_SUFFIX not in k} == {
        "a": b"theirs+ours", "b": b"their b", "n": b"new there"}
    assert kept_beside(members, "a") == []
    assert kept_beside(members, "b") == [b"mine"] and kept_beside(members, "n") == [b"new here"]
    assert sorted(calls) == [("a", b"theirs", b"ours", b"1"), ("n", b"new there", b"new here", None)]
    assert s.counters()["zip.merged"] == 1 and s.counters()["zip.conflicts"] == 2
    assert "changes of it (staged, not yet committed) are merged" in caplog.text
    s.close()
    reopened = ZipStore(str(archive))  # the merge was journalled and committed, not only applied
    assert reopened.get("a") == b"theirs+ours"
    reopened.close()


def test_a_merge_of_consolidated_metadata_keeps_both_writers_entries(archive):
    """The merge the stack gives a zip store (:func:`merge_consolidated`): the other program's
    ``.zmetadata`` with this mount's entries set and removed since the archive it read."""
    from nczfs.nczarr.consolidating import is_consolidated, merge_consolidated

    def zmeta(*names: str) -> bytes:
        return json.dumps({"metadata": {n: {"zarr_format": 2} for n in names}, "zarr_consolidated_format": 1}).encode()

    rewrite_zip(archive, {".zmetadata": zmeta(".zgroup", "old/.zattrs")})
    s = ZipStore(str(archive))
    s.merge_with(merge_consolidated, is_consolidated)
    s.set(".zmetadata", zmeta(".zgroup", "mine/.zarray"))
    rewrite_zip(archive, {".zmetadata": zmeta(".zgroup", "old/.zattrs", "theirs/.zarray")})
    s.sync()
    members = zip_members(archive)
    assert sorted(json.loads(members[".zmetadata"])["metadata"]) == [".zgroup", "mine/.zarray", "theirs/.zarray"]
    assert kept_beside(members, ".zmetadata") == []
    s.close()


def test_a_merge_merged_again_at_a_later_rebase_is_kept_under_a_conflict_name_of_the_same_second(archive, monkeypatch):
    """Two rebases within one second give the mount's version the same conflict name: the
    first merge's record removing the one beside comes before the one storing the merge, so
    the second rebase merges the first's merge, not nothing."""
    monkeypatch.setattr("nczfs.store.zip.rebase.conflict_name", lambda key, now=None: key + CONFLICT_SUFFIX + "same")
    s = ZipStore(str(archive))
    s.merge_with(lambda key, theirs, ours, base: theirs + b"+" + ours, wants=lambda key: True)
    s.set("a", b"ours")
    rewrite_zip(archive, {"a": b"t1"})
    assert s.get("a") == b"t1+ours"  # found changed at the next call
    rewrite_zip(archive, {"a": b"t2"})
    s.sync()
    members = zip_members(archive)
    assert members["a"] == b"t2+t1+ours" and kept_beside(members, "a") == []
    assert s.counters()["zip.merged"] == 2
    s.close()


def test_a_merge_base_a_read_would_refuse_is_no_base_and_nothing_is_merged(tmp_path, monkeypatch):
    """The archive's version as read (the merge's base) is read with a member read's checks
    (size limit, zip-bomb ratio, encryption): one they refuse is unreadable, so the member is
    not merged and the mount's version goes beside."""
    path = tmp_path / "ds.zip"
    make_zip(path, {"a": b"0123456789"})
    monkeypatch.setattr("nczfs.store.zip.archive.MAX_INFLATED", 4)
    calls = []
    s = ZipStore(str(path))
    s.merge_with(lambda key, theirs, ours, base: calls.append(base) or theirs + ours, wants=lambda key: True)
    s.set("a", b"ours")
    rewrite_zip(path, {"a": b"theirs"})
    s.sync()
    members = zip_members(path)
    assert calls == [] and members["a"] == b"theirs" and kept_beside(members, "a") == [b"ours"]
    s.close()
