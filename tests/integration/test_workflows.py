"""Workflow members end to end on a real PostgreSQL, with the relay running in process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from returns.result import Failure, Success

import akter
from akter import testing
from tests.apps import shop
from tests.apps.shop import Order, OutOfStock, Pay, Ship, Shipped, Shop, pay
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet


@pytest.fixture(autouse=True)
def _calls() -> None:
    shop.CALLS.clear()


@pytest.fixture
async def running(database_url: str) -> AsyncIterator[tuple[akter.App, Any, akter.Client]]:
    app = shop.make_app(database_url)
    async with app.relay() as relay, app.client() as client:
        yield app, relay, client


async def test_start_runs_to_completion_and_a_keyed_start_attaches(running: Any, peek: Peek) -> None:
    app, relay, client = running
    handle = client.actor(Shop, "s1", tenant="acme")
    run = await handle.start(Ship, Order(id="o1", qty=2))
    assert await run.result(timeout=60) == Success(Shipped(order="o1", slot=20))
    again = await handle.start(Ship, Order(id="o1", qty=2))
    assert again.execution_id == run.execution_id
    assert await again.result(timeout=60) == Success(Shipped(order="o1", slot=20))
    assert shop.CALLS["reserve:o1"] == 1
    status = await run.poll()
    assert status.finished
    assert status.outcome == "succeeded"
    reattached = client.run(Ship, run.execution_id, tenant="acme")
    assert (await reattached.poll()).result == Success(Shipped(order="o1", slot=20))
    await quiet(app, relay)
    assert await peek.count("actor_outbox") == 0
    assert await peek.value("SELECT count(*) FROM actor_workflow_step WHERE exit IS NULL") == 0


async def test_declared_activity_failure_fails_the_run_and_compensation_does_not_run(running: Any) -> None:
    _, _, client = running
    run = await client.actor(Shop, "s1", tenant="acme").start(Ship, Order(id="big", qty=500))
    result = await run.result(timeout=60)
    assert isinstance(result, Failure)
    error = result.failure()
    assert isinstance(error, OutOfStock)
    assert (error.sku, error.asked) == ("big", 500)
    assert shop.CALLS["reserve:big"] == 1
    assert "release:big" not in shop.CALLS


async def test_retry_records_each_attempt_and_replay_reruns_none(
    running: Any, peek: Peek, clock: testing.Clock
) -> None:
    app, relay, client = running
    run = await client.actor(Shop, "s1", tenant="acme").start(
        Ship, Order(id="flaky", fail_times=2, sleep_s=60)
    )
    await quiet(app, relay)
    assert shop.CALLS["reserve:flaky"] == 3
    rows = await peek.rows(
        "SELECT attempt, exit IS NOT NULL FROM actor_workflow_step WHERE step = 'reserve' ORDER BY attempt"
    )
    assert rows == [(1, True), (2, True), (3, True)]
    await clock.advance(timedelta(seconds=61))  # the next pass replays all three attempts
    assert await run.result(timeout=60) == Success(Shipped(order="flaky", slot=10))
    assert shop.CALLS["reserve:flaky"] == 3


async def test_sleep_suspends_until_the_database_clock_passes_it(
    running: Any, clock: testing.Clock, peek: Peek
) -> None:
    app, relay, client = running
    run = await client.actor(Shop, "s1", tenant="acme").start(Ship, Order(id="nap", sleep_s=3600))
    await quiet(app, relay)
    assert (await run.poll()).status == "suspended"
    due_before = await peek.value("SELECT due_at FROM actor_workflow_step WHERE step = 'cool-off'")
    await clock.advance(timedelta(hours=1, seconds=1))
    assert await run.result(timeout=60) == Success(Shipped(order="nap", slot=10))
    assert shop.CALLS["reserve:nap"] == 1
    assert await peek.value("SELECT due_at FROM actor_workflow_step WHERE step = 'cool-off'") == due_before


async def test_wait_resolves_on_an_event_and_times_out_otherwise(running: Any, clock: testing.Clock) -> None:
    app, relay, client = running
    handle = client.actor(Shop, "s1", tenant="acme")
    waiting = await handle.start(Ship, Order(id="w1", wait_s=600))
    timing_out = await handle.start(Ship, Order(id="w2", wait_s=600))
    await quiet(app, relay)
    await handle.send(pay, Pay(order="w1", amount=42))
    assert await waiting.result(timeout=60) == Success(Shipped(order="w1", slot=10, paid=42))
    await quiet(app, relay)
    assert (await timing_out.poll()).status == "suspended"
    await clock.advance(timedelta(minutes=11))
    assert await timing_out.result(timeout=60) == Success(Shipped(order="w2", slot=10, paid=-1))


async def test_interrupt_runs_compensation_once(running: Any, peek: Peek) -> None:
    app, relay, client = running
    run = await client.actor(Shop, "s1", tenant="acme").start(Ship, Order(id="int", sleep_s=3600))
    await quiet(app, relay)
    await run.interrupt()
    result = await run.result(timeout=60)
    assert isinstance(result, Failure)
    assert isinstance(result.failure(), akter.Interrupted)
    assert shop.CALLS["release:int"] == 1
    await quiet(app, relay)
    assert await peek.count("actor_outbox") == 0
    assert await peek.value("SELECT count(*) FROM actor_workflow_step WHERE exit IS NULL") == 0
    await run.interrupt()  # finished: nothing changes
    assert (await run.poll()).outcome == "interrupted"


async def test_retention_prunes_finished_executions_after_the_retention(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    app = akter.App([Shop], database_url=database_url, workflow_retention=timedelta(days=2))
    async with app.relay() as relay, app.client() as client:
        handle = client.actor(Shop, "s1", tenant="acme")
        done = await handle.start(Ship, Order(id="old"))
        await done.result(timeout=60)
        open_run = await handle.start(Ship, Order(id="open", sleep_s=30 * 86400))
        await quiet(app, relay)
        assert await app.workflow_runner.prune() == 0  # younger than the retention
        await clock.advance(timedelta(days=2, hours=1))
        assert await app.workflow_runner.prune() == 1
        assert await peek.rows("SELECT key, status FROM actor_workflow_executions") == [("open", "suspended")]
        assert (
            await peek.value(
                "SELECT count(*) FROM actor_workflow_step s WHERE s.execution_id = %s", done.execution_id
            )
            == 0
        )
        assert (await open_run.poll()).status == "suspended"


async def test_steps_can_be_dropped_at_finish(database_url: str, peek: Peek) -> None:
    app = akter.App([Shop], database_url=database_url, drop_steps_at_finish=True)
    async with app.relay(), app.client() as client:
        run = await client.actor(Shop, "s1", tenant="acme").start(Ship, Order(id="lean"))
        assert await run.result(timeout=60) == Success(Shipped(order="lean", slot=10))
    assert await peek.count("actor_workflow_step") == 0
    assert await peek.count("actor_workflow_executions") == 1


def test_the_sync_client_starts_and_waits(database_url: str) -> None:
    app = shop.make_app(database_url)

    async def relay_until(stop: asyncio.Event) -> None:
        async with app.relay():
            await stop.wait()

    import threading

    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    thread = threading.Thread(target=loop.run_until_complete, args=(relay_until(stop),), daemon=True)
    thread.start()
    try:
        with app.sync_client() as client:
            run = client.actor(Shop, "s1", tenant="acme").start(Ship, Order(id="sync"))
            assert run.result(timeout=60) == Success(Shipped(order="sync", slot=10))
            assert client.run(Ship, run.execution_id, tenant="acme").poll().finished
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)
        loop.close()
