"""nczfs.toolbox.singleflight: one computation per key, its value or error for every caller."""

from __future__ import annotations

from typing import Awaitable, Callable

import pytest
import trio
import trio.testing

from nczfs.toolbox import background
from nczfs.toolbox.errors import BackendError
from nczfs.toolbox.singleflight import Abandoned, SingleFlight


class Computation:
    """Counts its runs; each waits for ``release`` and then answers or raises."""

    def __init__(self, fail: bool = False, only_first: bool = False):
        self.runs = 0
        self.release = trio.Event()
        self.fail = fail
        self.only_first = only_first

    async def __call__(self) -> str:
        self.runs += 1
        run = self.runs
        await self.release.wait()
        if self.fail and (run == 1 or not self.only_first):
            raise ValueError(f"run {run} failed")
        return f"value of run {run}"


def _callers(flights: SingleFlight, compute: Computation,
             retry: bool = False) -> tuple[list, Callable[[], Awaitable[None]]]:
    """A caller of ``run("k", compute)``, and the outcomes of its calls, in the order they end."""
    outcomes: list = []

    async def caller() -> None:
        try:
            outcomes.append(await flights.run("k", compute, retry=retry))
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            outcomes.append(exc)

    return outcomes, caller


async def test_callers_of_one_key_share_one_computation() -> None:
    flights: SingleFlight[str, str] = SingleFlight()
    compute = Computation()
    outcomes, caller = _callers(flights, compute)
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(caller)
        await trio.testing.wait_all_tasks_blocked()
        assert "k" in flights
        compute.release.set()
    assert compute.runs == 1
    assert outcomes == ["value of run 1"] * 3
    assert "k" not in flights and len(flights) == 0


async def test_an_error_reaches_every_waiter_and_is_not_retried() -> None:
    flights: SingleFlight[str, str] = SingleFlight()
    compute = Computation(fail=True)
    outcomes, caller = _callers(flights, compute)
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(caller)
        await trio.testing.wait_all_tasks_blocked()
        compute.release.set()
    assert compute.runs == 1
    assert [str(o) for o in outcomes] == ["run 1 failed"] * 3
    assert all(isinstance(o, ValueError) for o in outcomes)
    compute.fail = False  # the error is not kept: the next caller computes again
    assert await flights.run("k", compute) == "value of run 2"


async def test_with_retry_waiters_of_a_failed_computation_compute_once_more() -> None:
    flights: SingleFlight[str, str] = SingleFlight()
    compute = Computation(fail=True, only_first=True)
    outcomes, caller = _callers(flights, compute, retry=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_callers(flights, compute)[1])  # a read-ahead, say: its error is its own
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(2):
            nursery.start_soon(caller)
        await trio.testing.wait_all_tasks_blocked()
        compute.release.set()  # run 1 fails, run 2 does not
    assert compute.runs == 2  # the two waiters share one computation more
    assert outcomes == ["value of run 2"] * 2


async def test_with_retry_a_waiter_gives_up_when_the_retry_fails_too() -> None:
    flights: SingleFlight[str, str] = SingleFlight()
    compute = Computation(fail=True)
    outcomes, caller = _callers(flights, compute, retry=True)
    compute.release.set()
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(caller)
    assert compute.runs == 2  # the first caller's, then one more the waiters share
    assert [str(o) for o in outcomes] == ["run 1 failed"] + ["run 2 failed"] * 2


async def test_a_cancelled_waiter_leaves_the_computation_and_the_others_alone() -> None:
    flights: SingleFlight[str, str] = SingleFlight()
    compute = Computation()
    outcomes, caller = _callers(flights, compute)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(caller)  # computes
        await trio.testing.wait_all_tasks_blocked()
        with trio.move_on_after(0.01):
            await flights.run("k", compute)  # a waiter cancelled by its deadline
        nursery.start_soon(caller)
        await trio.testing.wait_all_tasks_blocked()
        compute.release.set()
    assert compute.runs == 1
    assert outcomes == ["value of run 1"] * 2


async def test_when_the_computing_caller_is_cancelled_a_waiter_computes_again() -> None:
    flights: SingleFlight[str, str] = SingleFlight()
    compute = Computation()
    outcomes, caller = _callers(flights, compute)
    async with trio.open_nursery() as nursery:
        first = trio.CancelScope()
        nursery.start_soon(_in_scope, first, flights, compute)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(caller)
        nursery.start_soon(caller)
        await trio.testing.wait_all_tasks_blocked()
        first.cancel()
        await trio.testing.wait_all_tasks_blocked()
        compute.release.set()
    assert compute.runs == 2
    assert outcomes == ["value of run 2"] * 2


async def _in_scope(scope: trio.CancelScope, flights: SingleFlight, compute: Computation) -> None:
    with scope:
        await flights.run("k", compute)


async def test_started_in_the_background_a_cancelled_waiter_strands_nobody() -> None:
    flights: SingleFlight[str, str] = SingleFlight()
    compute = Computation()
    flight = flights.start("k", compute, name="test flight")
    assert flights.start("k", compute) is flight  # one in flight per key
    with trio.move_on_after(0.01):
        await flight.wait()
    compute.release.set()
    assert await flight.wait() == "value of run 1"
    assert compute.runs == 1 and "k" not in flights


async def test_a_background_computation_that_fails_answers_its_waiters_with_the_error() -> None:
    flights: SingleFlight[str, str] = SingleFlight()
    compute = Computation(fail=True)
    flight = flights.start("k", compute)
    compute.release.set()
    with pytest.raises(ValueError, match="run 1 failed"):
        await flight.wait()
    with pytest.raises(ValueError, match="run 1 failed"):
        await flight.wait()


async def test_a_background_computation_cancelled_answers_abandoned_naming_the_key() -> None:
    flights: SingleFlight[tuple[str, int], str] = SingleFlight(describe=lambda key: repr(key[0]))
    compute = Computation()
    async with background.owned():  # the mount's background work, cancelled when it ends
        flight = flights.start(("a/b", 0), compute)
        await trio.testing.wait_all_tasks_blocked()
    with pytest.raises(Abandoned, match="'a/b': cancelled before it ended"):
        await flight.wait()
    assert flight.abandoned and ("a/b", 0) not in flights


async def test_a_group_is_computed_in_one_call_and_each_key_gets_its_own_outcome() -> None:
    """``start_group``: the keys not in flight yet computed by one call; each waiter gets its
    key's value or error; a call that fails or answers too few fails them all; a cancelled one
    abandons them all, naming each key."""
    flights: SingleFlight[str, str] = SingleFlight()
    calls: list[list[str]] = []
    release = trio.Event()

    async def compute(keys: list[str]) -> list[str | Exception]:
        calls.append(keys)
        await release.wait()
        return [ValueError(f"{k} failed") if k == "b" else f"value of {k}" for k in keys]

    alone = flights.start("c", Computation())
    flights.start_group(["a", "b", "c", "a"], compute, name="test group")
    got = {k: flights.get(k) for k in "abc"}
    assert got["c"] is alone and calls == []  # in flight already: not computed again
    release.set()
    assert await got["a"].wait() == "value of a"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="b failed"):
        await got["b"].wait()  # type: ignore[union-attr]
    assert calls == [["a", "b"]] and "a" not in flights and "b" not in flights

    async def too_few(keys: list[str]) -> list[str | Exception]:
        return ["one"]

    flights.start_group(["x", "y"], too_few)
    flight = flights.get("y")
    with pytest.raises(BackendError, match="1 answers to 2 computations of 'x', 'y'"):
        await flight.wait()  # type: ignore[union-attr]

    async with background.owned():
        flights.start_group(["p", "q"], compute)
        flight = flights.get("q")
        release = trio.Event()
        await trio.testing.wait_all_tasks_blocked()
    with pytest.raises(Abandoned, match="'q': cancelled before it ended"):
        await flight.wait()  # type: ignore[union-attr]
    assert "p" not in flights and "q" not in flights
