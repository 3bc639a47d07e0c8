"""A sleep held in process ends on the database clock: never before its due time, and without
waking late on the process's estimate of that clock (``akter_wf_settle_clock.sql``,
``Pass._settle_clock``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from returns.result import Success

import akter
from akter import testing
from tests.apps import flows
from tests.apps.flows import Flows, Job, Settle
from tests.integration.conftest import Peek
from tests.integration.workflow_support import running, until

pytestmark = pytest.mark.integration

SETTLE = """SELECT fenced, settled, due_ms, now_ms FROM akter_wf_settle_clock(
    %s, 'acme', 'Flows', %s, %s, %s, 'nap', '', 1, '\\x00'::bytea, %s)"""
SOON = "UPDATE actor_workflow_step SET due_at = akter_now() + interval '50 milliseconds' WHERE step = 'nap'"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    flows.CALLS.clear()


@pytest.fixture
async def env(database_url: str) -> AsyncIterator[tuple[akter.App, Any, Any]]:
    app = flows.make_app(database_url)
    async with running(app) as (relay, client):
        yield app, relay, client


async def nap_row(peek: Peek) -> tuple[Any, ...]:
    rows = await peek.rows(
        "SELECT due_at, settled_at, exit IS NOT NULL FROM actor_workflow_step WHERE step = 'nap'"
    )
    assert len(rows) == 1
    return rows[0]


async def test_a_held_sleep_ends_at_or_after_its_due_time_and_the_next_step_after_it(
    env: Any, peek: Peek
) -> None:
    _, _, client = env
    run = await client.actor(Flows, "c1", tenant="acme").start(Settle, Job("c1", seconds=1))
    result = await run.result(timeout=60)
    assert isinstance(result, Success)
    due, settled, has_exit = await nap_row(peek)
    assert has_exit
    assert settled >= due
    started = await peek.value("SELECT started_at FROM actor_workflow_step WHERE step = 'ledger'")
    assert started >= due


async def test_a_held_sleep_whose_database_clock_moved_back_suspends_instead_of_spinning(
    env: Any, peek: Peek, clock: testing.Clock
) -> None:
    _, _, client = env
    gate = testing.pause("workflow.before_clock_settle")
    run = await client.actor(Flows, "c2", tenant="acme").start(Settle, Job("c2", seconds=1))
    await gate.reached()
    # the pass is about to settle the sleep it held; the database clock goes back an hour
    await clock.advance(timedelta(hours=-1))
    gate.release()
    status = await until(run.poll, lambda s: s.status != "running")
    assert status.status == "suspended"
    assert (await nap_row(peek))[2] is False
    assert "c2" not in flows.CALLS  # the activity after the sleep has not run
    await clock.advance(timedelta(hours=1))
    assert isinstance(await run.result(timeout=60), Success)
    due, settled, _ = await nap_row(peek)
    assert settled >= due


async def test_the_settle_waits_on_the_server_for_a_clock_due_within_the_hold_and_not_beyond(
    env: Any, peek: Peek
) -> None:
    _, _, client = env
    run = await client.actor(Flows, "c3", tenant="acme").start(Settle, Job("c3", seconds=3600))
    await until(run.poll, lambda s: s.status == "suspended")
    rk, actor_id, generation = (
        await peek.rows(
            "SELECT routing_key, actor_id, generation FROM actor_generations WHERE actor_id = 'c3'"
        )
    )[0]
    eid = run.execution_id
    # due in an hour, a hold of 20 ms: not waited for, not settled; the answer says when
    fenced, settled, due_ms, now_ms = (await peek.rows(SETTLE, rk, actor_id, generation, eid, 20.0))[0]
    assert (fenced, settled) == (True, False)
    assert 3_590_000 < due_ms - now_ms <= 3_600_000
    # due in 50 ms: a stale generation writes nothing, whatever the clock says
    await peek.conn.execute(SOON)
    assert (await peek.rows(SETTLE, rk, actor_id, generation - 1, eid, 500.0))[0][:2] == (False, False)
    assert (await nap_row(peek))[2] is False
    await peek.conn.execute(SOON)
    # the holder's settle, asked before the due time, waits for it and settles no earlier
    fenced, settled, due_ms, now_ms = (await peek.rows(SETTLE, rk, actor_id, generation, eid, 500.0))[0]
    assert (fenced, settled) == (True, True)
    assert now_ms >= due_ms
    due, settled_at, has_exit = await nap_row(peek)
    assert has_exit
    assert settled_at >= due
