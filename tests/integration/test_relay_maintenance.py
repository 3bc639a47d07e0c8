"""A relay's life around its deliveries: stopping (also after a loop failed), its dedicated
connections, and retention (expired receipts, finished executions) scoped to the buckets it owns.
What a user observes is read through a second connection: bucket rows, server sessions,
receipts and executions left in the tables."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import timedelta

import attrs
import psycopg
import pytest
from returns.result import Success

import akter
from akter import testing
from akter.outbox.relay import Relay, RelaySettings
from akter.store import connections
from tests.apps import relay_app, shop
from tests.apps.relay_app import Ping, Receiver, receive
from tests.apps.shop import Order, Ship, Shop
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet, until

FAST = RelaySettings(
    heartbeat=timedelta(milliseconds=200),
    ownership_lease=timedelta(seconds=1),
    retention_every=timedelta(milliseconds=50),
    listen_timeout=timedelta(milliseconds=300),
)

RELAY_SESSIONS = (
    "SELECT count(*) FROM pg_stat_activity"
    " WHERE datname = current_database() AND application_name LIKE 'akter-relay-%%'"
)


@pytest.fixture(autouse=True)
def _reset() -> None:
    relay_app.DELIVERIES.clear()
    shop.CALLS.clear()


@pytest.fixture
async def app(database_url: str) -> AsyncIterator[akter.App]:
    app = relay_app.make_app(database_url)
    yield app
    await app.close()


class Boom:
    """A plugin with a bug: it fails once the relay owns buckets."""

    async def run(self, relay: Relay) -> None:
        async def owned() -> frozenset[int]:
            return relay.owned()

        await until(owned, bool, within=20)
        raise RuntimeError("boom")


async def test_a_relay_whose_loop_failed_still_releases_every_bucket_and_closes_on_stop(
    app: akter.App, peek: Peek
) -> None:
    relay = Relay((await app.engine()).sender, FAST, plugins=[Boom()])
    await relay.start()
    with pytest.raises(RuntimeError, match="boom"):
        async with asyncio.timeout(20):
            await relay.wait()
    assert await peek.value("SELECT count(*) FROM akter_relay_buckets WHERE owner = %s", relay.member) > 0
    # twice at once, then once more: each returns once the relay is fully stopped
    await asyncio.gather(relay.stop(), relay.stop())
    await relay.stop()
    assert await peek.value("SELECT count(*) FROM akter_relay_buckets WHERE owner = %s", relay.member) == 0
    assert (
        await peek.value("SELECT count(*) FROM akter_relay_members WHERE member_id = %s", relay.member) == 0
    )
    assert await peek.value(RELAY_SESSIONS) == 0
    assert connections.open_connections() == []


async def test_the_listener_leaves_within_its_timeout_once_a_stop_is_requested(
    app: akter.App, peek: Peek
) -> None:
    relay = Relay((await app.engine()).sender, FAST)
    await relay.start()
    try:
        # this test's database only: other tests (or processes) on the server run relays too
        listening = (
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE application_name = 'akter-relay-listen' AND datname = current_database()"
        )
        await until(lambda: peek.value(listening), lambda n: n == 1, within=20)
        # a stop request alone (no cancellation, no notification): the listener must notice it
        # by itself, which it can only do because its wait for notifies has a timeout — without
        # one it would stay parked on the connection and this never becomes 0
        relay._stopping.set()
        await until(lambda: peek.value(listening), lambda n: n == 0, within=20)
    finally:
        await relay.stop()


async def test_a_dedicated_connection_is_registered_with_where_it_was_opened_until_closed(
    database_url: str,
) -> None:
    conn = await connections.connect(database_url, name="akter-test-dedicated")
    try:
        (opened,) = connections.open_connections()
        assert opened.name == "akter-test-dedicated"
        assert any("test_relay_maintenance.py" in frame for frame in opened.where)
    finally:
        await connections.close(conn)
    assert connections.open_connections() == []


async def _receipts(app: akter.App, actors: int) -> None:
    async with app.client() as client:
        for start in range(0, actors, 50):
            await asyncio.gather(
                *(
                    client.actor(Receiver, f"r{n}", tenant="acme").send(receive, Ping(n))
                    for n in range(start, min(start + 50, actors))
                )
            )


async def test_an_app_without_workflows_prunes_expired_receipts(
    app: akter.App, peek: Peek, clock: testing.Clock
) -> None:
    assert not app.relay_plugins  # no workflow runner: the relay itself prunes
    await _receipts(app, 20)
    assert await peek.count("actor_receipts") == 20
    async with app.relay(FAST):
        await asyncio.sleep(0)  # nothing expired yet: a round keeps them all
        await clock.advance(timedelta(hours=25))  # past the 24 h retry window
        await until(lambda: peek.count("actor_receipts"), lambda n: n == 0, within=20)


async def test_two_relays_prune_concurrently_without_lock_timeouts(
    database_url: str, peek: Peek, clock: testing.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="akter")
    first = relay_app.make_app(database_url)
    second = relay_app.make_app(database_url)
    try:
        await _receipts(first, 400)
        await clock.advance(timedelta(hours=25))
        settings = RelaySettings(
            heartbeat=timedelta(milliseconds=200),
            ownership_lease=timedelta(seconds=1),
            retention_every=timedelta(milliseconds=10),
            retention_batch=5,
        )
        async with first.relay(settings), second.relay(settings):
            await until(lambda: peek.count("actor_receipts"), lambda n: n == 0, within=30)
    finally:
        await first.close()
        await second.close()
    failures = [r for r in caplog.records if "failed" in r.getMessage()]
    assert failures == []


def _shop(database_url: str) -> akter.App:
    app = akter.App(
        [Shop],
        database_url=database_url,
        workflow_retention=timedelta(days=2),
        lock_timeout=timedelta(milliseconds=100),
    )
    runner = app.workflow_runner
    runner.tuning = attrs.evolve(runner.tuning, prune_every=timedelta(milliseconds=50))
    return app


def _retention_failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "retention failed" in r.getMessage()]


async def test_a_prune_that_hits_a_lock_timeout_logs_and_the_relay_keeps_delivering(
    database_url: str, peek: Peek, clock: testing.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="akter")
    before = _shop(database_url)
    try:
        async with before.client() as client, before.relay(FAST) as relay:
            old = await client.actor(Shop, "s1", tenant="acme").start(Ship, Order(id="old"))
            assert (await old.result(timeout=60)).map(lambda s: s.order) == Success("old")
            await quiet(before, relay)
    finally:
        await before.close()
    await clock.advance(timedelta(days=2, hours=1))
    # a new process after the clock moved (a client mints ids on the clock it saw at start)
    app = _shop(database_url)
    try:
        async with await psycopg.AsyncConnection.connect(database_url) as holder:
            # a row lock on a step of the finished execution: the prune waits for it and times out
            await holder.execute(
                "SELECT 1 FROM actor_workflow_step WHERE execution_id = %s LIMIT 1 FOR UPDATE",
                (str(old.execution_id),),
            )
            async with app.client() as client, app.relay(FAST) as relay:
                failed = asyncio.ensure_future(relay.wait())

                async def logged() -> list[logging.LogRecord]:
                    await asyncio.sleep(0)
                    return _retention_failures(caplog)

                (record, *_) = await until(logged, bool, within=20)
                assert record.levelno == logging.WARNING
                assert "(backoff)" in record.getMessage()
                assert "lock timeout" in record.getMessage()
                # still running and delivering while the lock is held
                new = await client.actor(Shop, "s1", tenant="acme").start(Ship, Order(id="new"))
                assert (await new.result(timeout=60)).map(lambda s: s.order) == Success("new")
                assert not failed.done()
                await holder.rollback()
                await until(
                    lambda: peek.value("SELECT count(*) FROM actor_workflow_executions WHERE key = 'old'"),
                    lambda n: n == 0,
                    within=20,
                )
                assert not failed.done()
                failed.cancel()
    finally:
        await app.close()
