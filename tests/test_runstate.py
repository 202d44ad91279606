"""What daemons keep in their runtime directory (nczfs/daemon/runstate.py), read after one was killed."""

from __future__ import annotations

import json
import os
import subprocess

from nczfs.daemon import runstate


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _state(directory, pid: int, **state) -> None:
    (directory / f"{pid}.json").write_text(json.dumps({"pid": pid, **state}))


def test_the_upload_journal_says_which_uploads_are_still_open(tmp_path):
    journal = runstate.UploadJournal(str(tmp_path))
    journal.opened("id-1", "p/a")
    journal.opened("id 2", "p/b c")
    journal.done("id-1")
    journal.close()
    with open(journal.path, "a") as f:
        f.write('open "id-3" "p/t')  # a kill during an append: a torn last line, never acknowledged
    assert runstate.open_uploads(journal.path) == {"id 2": "p/b c"}
    assert runstate.open_uploads(str(tmp_path / "missing")) == {}


def test_a_mount_takes_over_only_dead_mounts_of_its_scope(tmp_path):
    dead, other, live = _dead_pid(), _dead_pid(), os.getpid()
    for pid, scope in ((dead, "s3:x"), (other, "s3:y"), (live, "s3:x")):
        _state(tmp_path, pid, scope=scope, mountpoint=f"/mnt/{pid}")
        (tmp_path / f"{pid}.uploads").write_text(f'open "u{pid}" "k{pid}"\n')
    assert runstate.take_over(str(tmp_path), "s3:x") == {f"u{dead}": f"k{dead}"}
    assert sorted(os.listdir(tmp_path)) == sorted(f"{p}.{e}" for p in (other, live) for e in ("json", "uploads"))
    state = runstate.read_state(str(tmp_path), other)
    assert runstate.left_behind(str(tmp_path), state) == [
        f"1 multipart upload(s) left open in s3:y (k{other}); the next mount of it aborts them"]


def test_prune_removes_the_states_of_dead_daemons_that_left_nothing(tmp_path):
    empty, busy = _dead_pid(), _dead_pid()
    _state(tmp_path, empty, scope="directory:/d")
    _state(tmp_path, busy, scope="s3:z")
    (tmp_path / f"{busy}.uploads").write_text('open "u" "k"\n')
    _state(tmp_path, os.getpid(), scope="directory:/d")  # alive: kept whatever it holds
    runstate.prune(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == sorted([f"{busy}.json", f"{busy}.uploads", f"{os.getpid()}.json"])


def test_staged_writes_left_behind_are_counted_by_the_backend_the_state_names(tmp_path):
    """The count comes from the zip backend's registry entry (``staged``), read by the saved
    state's backend name: a backend that stages nothing reports nothing for the same directory."""
    staging = tmp_path / ".a.zip.nczfs"
    staging.mkdir()
    (staging / "journal").write_text("nczfs-journal 1\nput x\nput y\n")
    state = {"pid": _dead_pid(), "backend": "zip", "staging": str(staging), "location": "/d/a.zip"}
    assert runstate.left_behind(str(tmp_path), state) == [
        f"2 change(s) staged in {staging} are not yet in /d/a.zip; mount it read/write again to commit them"]
    assert runstate.left_behind(str(tmp_path), {**state, "backend": "directory"}) == []
