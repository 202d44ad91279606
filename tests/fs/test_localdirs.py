"""The directories the mount keeps, counted per directory above them (nczfs/fs/localdirs.py)."""

from nczfs.fs.localdirs import LocalDirs, count_below


def test_a_kept_directory_is_counted_below_every_directory_above_it_and_moves_with_its_parent():
    dirs = LocalDirs()
    dirs.add("a/b/c")
    dirs.add("a/b/c")  # once
    dirs.add("a/x")
    assert [dirs.holds_below(p) for p in ("a", "a/b", "a/b/c", "a/x", "b")] == [True, True, False, False, False]
    assert dirs.move("a/b", "z/b") is False  # "a/b" itself was not kept, "a/b/c" was
    assert sorted(dirs) == ["a/x", "z/b/c"] and dirs.holds_below("z") and not dirs.holds_below("a/b")
    assert dirs.move("z/b/c", "c") is True and sorted(dirs) == ["a/x", "c"]
    dirs.discard("a/x")
    dirs.discard("a/x")
    assert sorted(dirs) == ["c"] and dirs._below == {}


def test_counts_go_to_zero_and_leave_no_entry():
    counts: dict[str, int] = {}
    count_below(counts, "a/b/f", 1)
    count_below(counts, "a/g", 1)
    assert counts == {"a": 2, "a/b": 1}
    count_below(counts, "a/b/f", -1)
    count_below(counts, "a/g", -1)
    count_below(counts, "top", 1)  # the root is never counted
    assert counts == {}
