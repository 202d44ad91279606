"""nczfs.toolbox.background: a mount's background work in the nursery the mount owns."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import trio
import trio.testing

import nczfs
from nczfs.toolbox import background


def test_work_started_in_a_mount_runs_in_its_nursery_and_ends_with_it():
    seen: list[str] = []

    async def worker(tag: str) -> None:
        seen.append(f"{tag} started")
        try:
            await trio.sleep_forever()
        finally:
            seen.append(f"{tag} cancelled")

    async def handler() -> None:  # a request handler, started by the mount's task as pyfuse3 does
        background.start_soon(worker, "fetch", name="a fetch")

    async def main() -> None:
        async with background.owned() as nursery:
            async with trio.open_nursery() as requests:
                requests.start_soon(handler)
            await trio.testing.wait_all_tasks_blocked()
            assert [t.name for t in nursery.child_tasks] == ["a fetch"]
        assert seen == ["fetch started", "fetch cancelled"]

    trio.run(main)


def test_a_failing_background_task_ends_the_mount_with_its_error():
    async def broken() -> None:
        raise ValueError("the fetch broke")

    async def main() -> None:
        async with background.owned():
            background.start_soon(broken)
            await trio.sleep_forever()

    with pytest.raises(ExceptionGroup) as raised:
        trio.run(main)
    assert raised.group_contains(ValueError, match="the fetch broke", depth=None)


def test_without_a_mount_the_work_runs_as_a_system_task_of_the_run():
    async def main() -> None:
        done = trio.Event()

        async def worker() -> None:
            done.set()

        background.start_soon(worker)
        with trio.fail_after(5):
            await done.wait()

    trio.run(main)


def test_nothing_else_in_nczfs_spawns_system_tasks():
    """One place starts background work: the module above (reads the source, not a run)."""
    root = Path(nczfs.__file__).parent
    spawning = []
    for path in root.rglob("*.py"):
        if path.relative_to(root) == Path("toolbox/background.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "spawn_system_task":
                spawning.append(f"{path.relative_to(root)}:{node.lineno}")
    assert spawning == []
