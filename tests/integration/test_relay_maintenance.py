"""A relay's life around its deliveries: stopping (also after a loop failed), its dedicated
connections, and retention (expired receipts, finished executions) scoped to the buckets it owns.
What a user observes is read through a second connection: bucket rows, server sessions,
receipts and executions left in the tables."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

import akter
from akter.outbox.relay import Relay, RelaySettings
from akter.store import connections
from tests.apps import relay_app, shop
from tests.integration.conftest import Peek
from tests.integration.workflow_support import until

FAST = RelaySettings(
    heartbeat=timedelta(milliseconds=200),
    ownership_lease=timedelta(seconds=1),
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
    relay = Relay(await app.runtime(), FAST, plugins=[Boom()])
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
    relay = Relay(await app.runtime(), FAST)
    await relay.start()
    try:
        listening = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'akter-relay-listen'"
        await until(lambda: peek.value(listening), lambda n: n == 1, within=20)
        # a stop request alone (no cancellation): the listener must notice it by itself
        relay._stopping.set()
        started = time.monotonic()
        await until(lambda: peek.value(listening), lambda n: n == 0, within=20)
        assert time.monotonic() - started < FAST.listen_timeout.total_seconds() + 1.0
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
