"""The parts of one request at once (nczfs.toolbox.atonce): every part runs; a part's failure
cancels the others and, when it is the filesystem's, is raised as itself, not in a group."""

from __future__ import annotations

import pytest
import trio

from nczfs.toolbox import atonce
from nczfs.toolbox.errors import KeyNotFound, Stale, first_of


async def test_every_part_runs_at_once():
    done: list[int] = []

    async def part(i: int) -> None:
        await trio.sleep(0.01 * (3 - i))
        done.append(i)

    await atonce.each(part, [0, 1, 2])
    assert done == [2, 1, 0]  # at once: the last started ended first
    await atonce.each(part, [])


async def test_a_parts_failure_is_raised_as_itself_and_cancels_the_others():
    cancelled: list[int] = []

    async def part(i: int) -> None:
        if i == 1:
            raise Stale("'k/1': changed")
        try:
            await trio.sleep(10)
        except trio.Cancelled:
            cancelled.append(i)
            raise

    with trio.fail_after(5), pytest.raises(Stale, match="'k/1'"):
        await atonce.each(part, [0, 1, 2])
    assert sorted(cancelled) == [0, 2]


async def test_a_failure_that_is_no_filesystems_stays_a_group():
    async def part(i: int) -> None:
        raise (ValueError("a bug") if i else KeyNotFound("'k'"))

    with pytest.raises(ExceptionGroup):
        await atonce.each(part, [0, 1])
    with pytest.raises(ValueError):
        await atonce.each(part, [1])  # one part: in this task, as it is


def test_first_of_a_group_of_one_kind_only():
    inner = ExceptionGroup("b", [Stale("first"), KeyNotFound("second")])
    assert str(first_of(ExceptionGroup("a", [inner]), (Stale, KeyNotFound))) == "first"
    assert first_of(ExceptionGroup("a", [Stale("x"), ValueError("y")]), (Stale,)) is None
    assert first_of(ValueError("y"), (Stale,)) is None
