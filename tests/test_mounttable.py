"""mounttable.py: the mount table, and the path the kernel names a mount by."""

from __future__ import annotations

from nczfs.toolbox.mounttable import Mounted, kernel_path, table, topmost


def _info(tmp_path, *lines: str):
    f = tmp_path / "mountinfo"
    f.write_text("".join(line + "\n" for line in ("22 1 0:21 / / rw shared:1 - ext4 /dev/root rw", *lines)))
    return str(f)


def test_the_table_unescapes_paths_and_reads_the_type_after_optional_fields(tmp_path):
    info = _info(
        tmp_path,
        "40 22 0:45 / /mnt/with\\040space rw,nosuid shared:2 master:3 - fuse.nczfs src rw",
        "41 40 0:46 / /mnt/with\\040space rw - fuse.nczfs src rw",
        "not a mountinfo line",
    )
    assert table(info) == [
        Mounted(22, "/", "ext4"),
        Mounted(40, "/mnt/with space", "fuse.nczfs"),
        Mounted(41, "/mnt/with space", "fuse.nczfs"),
    ]
    assert topmost("/mnt/with space", info).id == 41
    assert topmost("/elsewhere", info) is None
    assert table(str(tmp_path / "missing")) == []


def test_kernel_path_follows_symlinks_of_the_parents_and_of_the_last_component(tmp_path):
    (tmp_path / "real" / "mnt").mkdir(parents=True)
    (tmp_path / "parent").symlink_to(tmp_path / "real")
    (tmp_path / "abs").symlink_to(tmp_path / "real" / "mnt")
    (tmp_path / "real" / "rel").symlink_to("mnt")
    (tmp_path / "chain").symlink_to(tmp_path / "parent" / "rel")
    info = _info(tmp_path)
    want = str(tmp_path / "real" / "mnt")
    for given in ("parent/mnt", "abs", "real/rel", "parent/rel", "chain", "real/../real/mnt"):
        assert kernel_path(str(tmp_path / given), info) == want, given
    assert kernel_path(str(tmp_path / "real" / "missing"), info) == str(tmp_path / "real" / "missing")
    assert kernel_path("/", info) == "/"


def test_kernel_path_does_not_look_at_a_mount_point(tmp_path):
    """A path that is a mount point already is the answer: it is not read (a stuck daemon's
    mount would not answer). Shown with a symlink listed as a mount point: not followed."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "m").symlink_to(tmp_path / "elsewhere")
    info = _info(tmp_path, f"50 22 0:47 / {tmp_path}/m rw - fuse.nczfs src rw")
    assert kernel_path(str(tmp_path / "m"), info) == str(tmp_path / "m")


def test_a_symlink_loop_ends(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert kernel_path(str(tmp_path / "a"), _info(tmp_path)) in (str(tmp_path / "a"), str(tmp_path / "b"))
