"""Undeliverable intents are parked, not retried forever: after ``max_attempts`` (at once for an
expired id), visibly, at no cost to the relay, until an operator retries or deletes them. All
through the real in-process relay; rows are read through a second connection (``peek``), and
time moves with the database clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from returns.result import Failure, Success

import akter
from akter import testing
from akter.cli import main
from akter.ids import ExecutionId
from akter.inspect import read_actor, read_execution, render_actor, render_execution
from akter.outbox import admin
from akter.outbox.relay import Relay, RelaySettings
from tests.apps import relay_app, shop
from tests.apps.relay_app import Sender, Stage, stage
from tests.integration.conftest import Peek

MAX = 3
SETTINGS = RelaySettings(
    heartbeat=timedelta(milliseconds=200),
    ownership_lease=timedelta(seconds=1),
    backoff_base=timedelta(seconds=1),
    max_attempts=MAX,
)


@pytest.fixture(autouse=True)
def _reset_receivers() -> None:
    relay_app.DELIVERIES.clear()
    relay_app.FLAKY["failures"] = 0


@pytest.fixture
async def app(database_url: str) -> AsyncIterator[akter.App]:
    app = relay_app.make_app(database_url)
    yield app
    await app.close()


async def _idle(relay: Relay) -> None:
    async with asyncio.timeout(20):
        await relay.idle()


async def _outbox(peek: Peek) -> list[tuple[Any, ...]]:
    return await peek.rows(
        "SELECT attempts, parked_at IS NOT NULL, parked_reason, last_error"
        " FROM actor_outbox ORDER BY actor_id"
    )


async def _run_out_of_attempts(relay: Relay, clock: testing.Clock, peek: Peek) -> None:
    """Deliver until the row is parked, moving the clock past each back-off."""
    for attempt in range(1, MAX + 1):
        await _idle(relay)
        [(attempts, parked, _, _)] = await _outbox(peek)
        assert (attempts, parked) == (attempt, attempt == MAX)
        await clock.advance(timedelta(minutes=10))


async def _run_out_of_attempts_from(relay: Relay, clock: testing.Clock, peek: Peek, first: int) -> None:
    """Like ``_run_out_of_attempts`` for a row at ``first - 1`` attempts: each one falls due first."""
    for attempt in range(first, MAX + 1):
        await clock.advance(timedelta(minutes=10))
        await _idle(relay)
        assert await peek.value("SELECT attempts FROM actor_outbox") == attempt
    assert await peek.value("SELECT parked_at IS NOT NULL FROM actor_outbox") is True


async def _stage_poison(app: akter.App, peek: Peek) -> str:
    """A committed intent whose command its receiver's App no longer declares."""
    async with app.client() as client:
        await client.actor(Sender, "s1", tenant="acme").send(stage, Stage(target="r1", n=1))
    await peek.rows("UPDATE actor_outbox SET command = 'gone' RETURNING 1")
    return str(await peek.value("SELECT intent_id FROM actor_outbox"))


async def test_a_poison_intent_is_parked_after_its_attempts_and_costs_nothing_after(
    app: akter.App, peek: Peek, clock: testing.Clock
) -> None:
    intent_id = await _stage_poison(app, peek)
    async with app.relay(SETTINGS) as relay:
        await _run_out_of_attempts(relay, clock, peek)
        failed = relay.failed
        for _ in range(3):  # a day later, and again: never claimed again
            await clock.advance(timedelta(days=1))
            await _idle(relay)
        assert relay.failed == failed == MAX
    [(attempts, parked, reason, error)] = await _outbox(peek)
    assert (attempts, parked) == (MAX, True)
    assert f"undeliverable after {MAX} attempts" in reason
    assert "UndeliverableIntent" in reason
    assert "'gone'" in reason
    assert "UndeliverableIntent" in error
    # the due scan never reads it: its due time is beyond any claim or next-due probe
    assert await peek.value("SELECT due_at = akter_parked_due() FROM actor_outbox") is True
    [listed] = await admin.read_parked(peek.conn)
    assert (listed.intent_id, str(listed.sender), str(listed.target)) == (
        intent_id,
        "acme/Sender/s1",
        "acme/Receiver/r1",
    )
    assert listed.command == "gone"
    assert await admin.read_parked(peek.conn, tenant="other") == []
    assert [p.intent_id for p in await admin.parked_of(peek.conn, listed.sender)] == [intent_id]


async def test_retry_delivers_a_parked_intent_once_its_cause_is_fixed(
    app: akter.App, peek: Peek, clock: testing.Clock
) -> None:
    relay_app.FLAKY["failures"] = 1000  # the receiver has a bug
    async with app.client() as client, app.relay(SETTINGS) as relay:
        await client.actor(Sender, "s1", tenant="acme").send(stage, Stage(target="r1", n=7, command="flaky"))
        await _run_out_of_attempts(relay, clock, peek)
        intent_id = str(await peek.value("SELECT intent_id FROM actor_outbox"))
        assert len(relay_app.DELIVERIES) == MAX
        relay_app.FLAKY["failures"] = 0  # the operator deploys the fix
        retried = await admin.retry(peek.conn, intent_id)
        assert isinstance(retried, Success)
        assert retried.unwrap().intent_id == intent_id
        await _idle(relay)
    assert [n for _, _, n in relay_app.DELIVERIES] == [7] * (MAX + 1)
    assert {cid for cid, _, _ in relay_app.DELIVERIES} == {intent_id}  # the same id throughout
    assert await peek.count("actor_outbox") == 0
    assert await peek.rows("SELECT command_id, failed FROM actor_receipts WHERE actor_type = 'Receiver'") == [
        (intent_id, False)
    ]
    assert await admin.retry(peek.conn, intent_id) == Failure(admin._not_parked(intent_id))


async def test_delete_removes_a_parked_intent_for_good(
    app: akter.App, peek: Peek, clock: testing.Clock
) -> None:
    intent_id = await _stage_poison(app, peek)
    async with app.relay(SETTINGS) as relay:
        await _run_out_of_attempts(relay, clock, peek)
        deleted = await admin.delete(peek.conn, intent_id)
        assert isinstance(deleted, Success)
        assert deleted.unwrap().command == "gone"
        await clock.advance(timedelta(days=1))
        await _idle(relay)
    assert await peek.count("actor_outbox") == 0
    assert relay_app.DELIVERIES == []
    assert isinstance(await admin.delete(peek.conn, intent_id), Failure)


async def test_an_expired_intent_is_parked_at_once_and_retried_only_under_a_new_id(
    app: akter.App, peek: Peek, clock: testing.Clock
) -> None:
    async with app.client() as client:
        await client.actor(Sender, "s1", tenant="acme").send(stage, Stage(target="r1", n=3))
    old_id = str(await peek.value("SELECT intent_id FROM actor_outbox"))
    await clock.advance(timedelta(hours=25))  # past the 24 h retry window before any relay ran
    async with app.relay(SETTINGS) as relay:
        await _idle(relay)
        [(attempts, parked, reason, _)] = await _outbox(peek)
        assert (attempts, parked) == (1, True)
        assert "intent id expired" in reason
        assert "CommandExpired" in reason
        refused = await admin.retry(peek.conn, old_id)
        assert isinstance(refused, Failure)
        assert "--new-id" in refused.failure()
        assert await peek.value("SELECT parked_at IS NOT NULL FROM actor_outbox") is True
        retried = await admin.retry(peek.conn, old_id, new_id=True)
        new_id = retried.unwrap().intent_id
        assert new_id != old_id
        await _idle(relay)
    assert [(cid, n) for cid, _, n in relay_app.DELIVERIES] == [(new_id, 3)]
    assert await peek.count("actor_outbox") == 0


async def test_the_commands_list_retry_and_delete_parked_intents(
    app: akter.App, peek: Peek, clock: testing.Clock, database_url: str
) -> None:
    intent_id = await _stage_poison(app, peek)
    async with app.relay(SETTINGS) as relay:
        await _run_out_of_attempts(relay, clock, peek)
        runner = CliRunner()
        db = ["--database-url", database_url]

        def akter_(*args: str) -> Any:
            return runner.invoke(main, list(args), catch_exceptions=False)

        # the CLI runs its own event loop: call it from a thread, as an operator's shell would
        listed = await asyncio.to_thread(akter_, "inspect", "parked", *db)
        assert listed.exit_code == 0, listed.output
        assert intent_id in listed.output
        assert "PARKED since" in listed.output
        assert "gone from acme/Sender/s1 to acme/Receiver/r1" in listed.output
        as_json = await asyncio.to_thread(akter_, "inspect", "parked", "--json", *db)
        assert '"parked_reason"' in as_json.output
        # the sender's own view shows the row parked, with why
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            view = await read_actor(conn, app, akter.ActorRef("acme", "Sender", "s1"))
        assert view is not None
        assert "PARKED since" in render_actor(view)
        retried = await asyncio.to_thread(akter_, "outbox", "retry", intent_id, *db)
        assert retried.exit_code == 0, retried.output
        assert f"due now: {intent_id}" in retried.output
        await _idle(relay)  # still undeliverable: it spends a fresh budget of attempts
        assert await peek.value("SELECT attempts FROM actor_outbox") == 1
        await _run_out_of_attempts_from(relay, clock, peek, 2)
        deleted = await asyncio.to_thread(akter_, "outbox", "delete", intent_id, *db)
        assert deleted.exit_code == 0, deleted.output
        missing = await asyncio.to_thread(akter_, "outbox", "delete", intent_id, *db)
        assert missing.exit_code == 1
        assert "no parked intent" in missing.output
    assert await peek.count("actor_outbox") == 0


async def test_an_execution_whose_resume_timer_is_parked_says_so_until_it_is_re_armed(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    app = shop.make_app(database_url)
    async with app.relay(SETTINGS) as relay, app.client() as client:
        run = await client.actor(shop.Shop, "shop-1", tenant="acme").start(
            shop.Ship, shop.Order(id="o-1", sleep_s=60)
        )
        await _idle(relay)
        assert (await run.poll()).status == "suspended"
        # the timer's body no longer decodes: every resume fails
        await peek.rows("UPDATE actor_outbox SET payload = '\\x01deadbeef' RETURNING 1")
        await _run_out_of_attempts_from(relay, clock, peek, 1)
        status = await run.poll()
        assert status.blocked_reason is not None
        assert status.blocked_reason.startswith("its resume timer is parked: undeliverable after 3 attempts")
        assert "CorruptRecord" in status.blocked_reason
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            view = await read_execution(conn, app, ExecutionId.parse(run.execution_id))
        assert view is not None
        assert "PARKED since" in render_execution(view)
        # akter's own timer is not deleted by accident
        refused = await admin.delete(peek.conn, view.timer.intent_id)  # type: ignore[union-attr]
        assert isinstance(refused, Failure)
        assert "--force" in refused.failure()
        # an interrupt arms the timer afresh: it is due again, and no longer parked
        await run.interrupt()
        result = await run.result(timeout=60)
        assert isinstance(result, Failure)
        assert isinstance(result.failure(), akter.Interrupted)
        await _idle(relay)
        assert (await run.poll()).blocked_reason is None
    assert await peek.count("actor_outbox") == 0
    await app.close()
