"""Who holds which generation, driven with fake turns and no database (``activation.py``)."""

from __future__ import annotations

import asyncio
import gc
import logging
from datetime import timedelta

import pytest

from akter.ids import ActorRef
from akter.workflow.engine.activation import Activations

REF = ActorRef("acme", "Flows", "a1")
OTHER = ActorRef("acme", "Flows", "a2")
#: long enough never to end a wait in these tests: each ends on an event
SAFETY = timedelta(hours=1)


class Turn:
    """A turn of this process in flight, as the hook's per-turn handoff: weakly referenced."""


async def started(waiter: asyncio.Task[bool]) -> None:
    """Let ``waiter`` run until it waits (or ends)."""
    for _ in range(3):
        await asyncio.sleep(0)


async def test_the_newest_generation_holds_and_an_older_one_handed_late_changes_nothing() -> None:
    a = Activations(SAFETY)
    a.handed(REF, 4)
    a.handed(REF, 3)
    assert a.held(REF) == 4
    a.handed(REF, 5)
    assert a.held(REF) == 5
    a.forget(REF, 4)  # an older generation fencing out does not drop the newer one
    assert a.held(REF) == 5
    a.forget(REF, 5)
    assert a.held(REF) is None


async def test_a_pass_asked_for_while_its_loop_lives_joins_that_loop() -> None:
    a = Activations(SAFETY)
    assert a.enter(REF, "e1")
    assert not a.enter(REF, "e1")  # a resume meanwhile: the live loop runs one more pass
    assert a.again("e1")
    assert not a.again("e1")
    assert a.enter(REF, "e2")  # another execution of the actor has its own loop
    a.handed(REF, 7)
    a.leave(REF, "e1")
    assert a.held(REF) == 7  # e2's loop still lives: the actor keeps its generation
    a.leave(REF, "e2")
    assert a.held(REF) is None  # the last loop forgets it: a suspended actor costs nothing
    assert a.actors() == frozenset()
    assert a.enter(REF, "e1")  # a new loop once the old one ended


async def test_a_fenced_pass_with_no_claim_in_flight_ends_at_once() -> None:
    a = Activations(SAFETY)
    a.enter(REF, "e1")
    a.handed(REF, 3)
    a.forget(REF, 3)
    # the generation went to another process: nothing here can hand a newer one over
    assert await a.newer(REF, 3, "e1") is False


async def test_a_fenced_pass_runs_on_under_the_generation_a_turn_in_flight_hands_over() -> None:
    a = Activations(SAFETY)
    a.enter(REF, "e1")
    a.handed(REF, 3)
    turn = Turn()
    release = a.claiming(REF, turn)  # the turn takes generation 4, fencing the pass out
    a.forget(REF, 3)
    waiter = asyncio.create_task(a.newer(REF, 3, "e1"))
    await started(waiter)
    assert not waiter.done()  # committed, not handed over yet: the pass waits for it
    a.handed(REF, 4)  # the turn's answer, then its release, with no wait between them
    release()
    assert await waiter is True
    assert a.held(REF) == 4


async def test_a_claim_on_another_actor_does_not_hold_a_fenced_pass() -> None:
    a = Activations(SAFETY)
    a.enter(REF, "e1")
    turn = Turn()
    release = a.claiming(OTHER, turn)
    assert await a.newer(REF, 3, "e1") is False
    release()


async def test_a_turn_dropped_without_committing_ends_the_wait() -> None:
    a = Activations(SAFETY)
    a.enter(REF, "e1")
    turn: Turn | None = Turn()
    a.claiming(REF, turn)
    waiter = asyncio.create_task(a.newer(REF, 3, "e1"))
    await started(waiter)
    assert not waiter.done()
    turn = None  # the turn failed: its record, and with it the handoff, are dropped
    gc.collect()
    assert await waiter is False


async def test_a_release_after_the_turn_was_dropped_counts_once() -> None:
    a = Activations(SAFETY)
    first, second = Turn(), Turn()
    release_first = a.claiming(REF, first)
    a.claiming(REF, second)
    release_first()
    release_first()  # a second call releases nothing more
    a.enter(REF, "e1")
    waiter = asyncio.create_task(a.newer(REF, 3, "e1"))
    await started(waiter)
    assert not waiter.done()  # the second turn's claim still holds the wait
    del second
    gc.collect()
    assert await waiter is False


async def test_a_resume_of_the_fenced_execution_ends_the_wait_with_one_more_pass() -> None:
    a = Activations(SAFETY)
    assert a.enter(REF, "e1")
    turn = Turn()
    release = a.claiming(REF, turn)
    waiter = asyncio.create_task(a.newer(REF, 3, "e1"))
    await started(waiter)
    assert not a.enter(REF, "e1")  # the resume joins the waiting loop: no second pass
    assert await waiter is True
    release()


async def test_passes_starting_together_share_one_activation_and_the_newest_wins() -> None:
    a = Activations(SAFETY)
    taken = asyncio.Event()
    go = asyncio.Event()
    calls = 0

    async def take() -> int:
        nonlocal calls
        calls += 1
        taken.set()
        await go.wait()
        return 5

    first = asyncio.create_task(a.activate(REF, take))
    second = asyncio.create_task(a.activate(REF, take))
    await taken.wait()
    # while the statement is in flight, a turn hands over a newer generation
    a.handed(REF, 6)
    go.set()
    assert await first == 6
    assert await second == 6
    assert calls == 1


async def test_an_activation_in_flight_holds_a_fenced_pass_until_it_lands() -> None:
    a = Activations(SAFETY)
    a.enter(REF, "e1")
    a.enter(REF, "e2")
    go = asyncio.Event()

    async def take() -> int:
        await go.wait()
        return 9

    activating = asyncio.create_task(a.activate(REF, take))  # e2's pass takes a generation
    await started(activating)
    waiter = asyncio.create_task(a.newer(REF, 8, "e1"))  # e1's pass was fenced out by it
    await started(waiter)
    assert not waiter.done()
    go.set()
    assert await activating == 9
    assert await waiter is True


async def test_the_safety_net_ends_a_wait_whose_claim_never_lands_and_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    a = Activations(timedelta(0))
    turn = Turn()
    release = a.claiming(REF, turn)
    with caplog.at_level(logging.WARNING, logger="akter.workflow"):
        assert await a.newer(REF, 3, "e1") is False
    assert "neither handed its generation over nor was dropped" in caplog.text
    release()
