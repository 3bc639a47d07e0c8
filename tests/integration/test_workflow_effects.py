"""Races, akter.all, waits beside running activities and sequential waits, on a real PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from returns.result import Success

import akter
from akter import testing
from tests.apps import flows
from tests.apps.flows import Both, Done, Emit, Flows, Job, Racing, Watch, emit, kickoff
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet, running, until


@pytest.fixture(autouse=True)
def _fresh() -> None:
    flows.CALLS.clear()
    flows.GATES.clear()


@pytest.fixture
async def env(database_url: str) -> AsyncIterator[tuple[akter.App, Any, Any]]:
    app = flows.make_app(database_url)
    async with running(app) as (relay, client):
        yield app, relay, client


async def step_exit(peek: Peek, step: str) -> Any:
    return await peek.value("SELECT exit IS NOT NULL FROM actor_workflow_step WHERE step = %s", step)


async def test_race_records_the_winner_and_replays_it_without_the_loser(
    env: Any, peek: Peek, clock: testing.Clock
) -> None:
    app, relay, client = env
    handle = client.actor(Flows, "f1", tenant="acme")
    run = await handle.start(Racing, Job("r1", seconds=600))
    await quiet(app, relay)
    await handle.send(emit, Emit("r1", 7))
    assert await run.result(timeout=60) == Success(Done("signal 7; r1-after"))
    rows = await peek.rows("SELECT step, kind, exit IS NOT NULL FROM actor_workflow_step ORDER BY step")
    assert ("signal-or-deadline", "race", True) in rows
    # the losing clock was written pending and settled as interrupted at finish; nothing pending
    assert await peek.value("SELECT count(*) FROM actor_workflow_step WHERE exit IS NULL") == 0
    # a later deadline changes nothing: the race is recorded
    await clock.advance(timedelta(hours=1))
    await quiet(app, relay)
    assert flows.CALLS["r1-after"] == 1


async def test_race_deadline_wins_when_no_signal_comes(env: Any, clock: testing.Clock) -> None:
    app, relay, client = env
    run = await client.actor(Flows, "f1", tenant="acme").start(Racing, Job("r2", seconds=60))
    await quiet(app, relay)
    await clock.advance(timedelta(seconds=61))
    assert await run.result(timeout=60) == Success(Done("deadline; r2-after"))


async def test_all_runs_branches_and_two_sleeps_resume_at_their_own_times(
    env: Any, peek: Peek, clock: testing.Clock
) -> None:
    app, relay, client = env
    run = await client.actor(Flows, "f1", tenant="acme").start(Both, Job("b1", seconds=60, seconds2=120))
    await quiet(app, relay)
    assert (await run.poll()).status == "suspended"
    assert (flows.CALLS["b1-left"], flows.CALLS["b1-right"]) == (1, 1)
    await clock.advance(timedelta(seconds=61))
    await quiet(app, relay)
    assert (await step_exit(peek, "nap-a"), await step_exit(peek, "nap-b")) == (True, False)
    assert (await run.poll()).status == "suspended"
    await clock.advance(timedelta(seconds=60))
    assert await run.result(timeout=60) == Success(Done("b1-left+b1-right"))
    assert (flows.CALLS["b1-left"], flows.CALLS["b1-right"]) == (1, 1)


async def test_wait_sees_an_event_committed_before_it_registered(env: Any, peek: Peek) -> None:
    _, _, client = env
    handle = client.actor(Flows, "f1", tenant="acme")
    run = await handle.start(Watch, Job("w", seconds=600))
    await until(
        lambda: peek.value("SELECT count(*) FROM actor_workflow_step WHERE step = 'before'"), lambda n: n == 1
    )
    await handle.send(emit, Emit("w", 1))  # committed while "before" runs, before the wait exists
    flows.gate("w-before").set()
    # the wait settles on it while the sibling activity "beside" is still held: its attempt may
    # write its pending row before or after the wait settles, but it stays unsettled (False, not
    # True) until its gate opens
    await until(lambda: step_exit(peek, "first"), bool)
    await until(lambda: step_exit(peek, "beside"), lambda v: v is False)
    flows.gate("w-beside").set()
    await handle.send(emit, Emit("w", 2))
    assert await run.result(timeout=60) == Success(Done("1,2"))


async def test_event_delivered_while_a_sibling_activity_runs_wakes_the_wait(env: Any, peek: Peek) -> None:
    app, relay, client = env
    handle = client.actor(Flows, "f1", tenant="acme")
    run = await handle.start(Watch, Job("x", seconds=600))
    flows.gate("x-before").set()
    await until(
        lambda: peek.value("SELECT count(*) FROM actor_workflow_step WHERE step IN ('first', 'beside')"),
        lambda n: n == 2,
    )
    await handle.send(emit, Emit("other", 9))  # does not match
    await handle.send(emit, Emit("x", 5))
    await until(lambda: step_exit(peek, "first"), bool)
    assert await step_exit(peek, "beside") is False
    cursor = await peek.value("SELECT event_cursor FROM actor_workflow_executions")
    assert cursor == 2
    flows.gate("x-beside").set()
    await quiet(app, relay)
    assert (await run.poll()).status == "suspended"  # the second wait: events are consumed in order
    await handle.send(emit, Emit("x", 6))
    assert await run.result(timeout=60) == Success(Done("5,6"))


async def test_a_wait_and_its_timeout_settle_exactly_once(env: Any, peek: Peek, clock: testing.Clock) -> None:
    app, relay, client = env
    handle = client.actor(Flows, "f1", tenant="acme")
    run = await handle.start(Watch, Job("t", seconds=60))
    flows.gate("t-before").set()
    flows.gate("t-beside").set()
    await handle.send(emit, Emit("t", 1))
    await until(lambda: step_exit(peek, "second"), lambda v: v is False)
    await quiet(app, relay)
    await clock.advance(timedelta(seconds=61))
    await handle.send(emit, Emit("t", 2))  # after the deadline: the timeout wins
    assert await run.result(timeout=60) == Success(Done("1;timeout"))
    assert await peek.value("SELECT count(*) FROM actor_workflow_step WHERE step = 'second'") == 1


async def test_a_start_staged_in_a_turn_sees_that_turns_own_events(env: Any, peek: Peek) -> None:
    _, _, client = env
    handle = client.actor(Flows, "f1", tenant="acme")
    execution_id = (await handle.send(kickoff, Emit("k", 4))).unwrap()
    run = client.run(Racing, execution_id, tenant="acme")
    assert await run.result(timeout=60) == Success(Done("signal 4; k-after"))
    assert await peek.value("SELECT count(*) FROM actor_workflow_executions") == 1


async def test_a_start_rolled_back_with_its_turn_starts_nothing(env: Any, peek: Peek) -> None:
    _, _, client = env
    handle = client.actor(Flows, "f1", tenant="acme")
    with pytest.raises(akter.Defect):
        await handle.send(kickoff, Emit("neg", -1))
    assert await peek.count("actor_workflow_executions") == 0
    assert await peek.count("actor_outbox") == 0
