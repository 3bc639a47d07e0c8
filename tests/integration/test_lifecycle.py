"""The engine's lifecycle: started once per process, clients borrowed for free, one result
listener that survives a lost connection.

What a user observes is counted from outside: backends in ``pg_stat_activity`` (through a second
connection), and the calls the engine makes to migrate, open pools and store manifests."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import pytest
from returns.result import Success

import akter
import akter.engine
from akter import testing
from akter.workflow.client import run as run_module
from tests.apps import counter, shop
from tests.apps.counter import Add, Counter, add
from tests.apps.shop import Order, Pay, Ship, Shipped, Shop, pay
from tests.integration.conftest import Peek
from tests.integration.workflow_support import until

BACKENDS = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


async def _no_backends_left(peek: Peek) -> None:
    """A closed pool's backends leave pg_stat_activity a moment after the client hung up."""
    await until(lambda: _backends_are(peek, 0), bool, "no backend left")


async def _backends_are(peek: Peek, n: int) -> bool:
    return int(await peek.value(BACKENDS)) == n


class Calls:
    """Counts the expensive steps of starting an engine."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.migrations = 0
        self.pools = 0
        self.manifests = 0
        real_migrate, real_pool, real_accept = (
            akter.engine.apply_migrations,
            akter.engine.open_pool,
            akter.engine._accept_declarations,
        )

        def migrate(url: str) -> list[int]:
            self.migrations += 1
            return real_migrate(url)

        async def open_pool(*args: Any, **kwargs: Any) -> Any:
            self.pools += 1
            return await real_pool(*args, **kwargs)

        async def accept(*args: Any) -> None:
            self.manifests += 1
            await real_accept(*args)

        monkeypatch.setattr(akter.engine, "apply_migrations", migrate)
        monkeypatch.setattr(akter.engine, "open_pool", open_pool)
        monkeypatch.setattr(akter.engine, "_accept_declarations", accept)


async def test_a_client_borrowed_a_hundred_times_from_a_started_app_opens_nothing(
    database_url: str, peek: Peek, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls(monkeypatch)
    app = counter.make_app(database_url)
    async with app:
        assert (calls.pools, calls.manifests) == (1, 1)
        async with app.client() as client:
            await client.actor(Counter, "warm", tenant="acme").send(add, Add(1))
            pool = client.sender.pool
        backends = await peek.value(BACKENDS)
        for i in range(100):
            async with app.client() as client:
                assert client.sender.pool is pool
                assert await client.actor(Counter, "c", tenant="acme").send(add, Add(1)) == Success(i + 1)
        assert await peek.value(BACKENDS) == backends
        assert (calls.migrations, calls.pools, calls.manifests) == (0, 1, 1)
    await _no_backends_left(peek)


async def test_a_started_app_closes_twice_and_starts_again(database_url: str, peek: Peek) -> None:
    app = counter.make_app(database_url)
    await app.start()
    await app.start()  # starting a started App does nothing
    await app.close()
    await app.close()
    await _no_backends_left(peek)
    async with app, app.client() as client:
        assert await client.actor(Counter, "c", tenant="acme").send(add, Add(2)) == Success(2)
    await app.close()
    await _no_backends_left(peek)


async def test_a_script_client_without_start_starts_and_closes_the_engine(
    database_url: str, peek: Peek, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls(monkeypatch)
    app = counter.make_app(database_url)
    async with app.client() as client:
        assert await client.actor(Counter, "c", tenant="acme").send(add, Add(3)) == Success(3)
    await _no_backends_left(peek)
    async with app.client() as client:
        assert await client.actor(Counter, "c", tenant="acme").send(add, Add(3)) == Success(6)
    assert (calls.pools, calls.manifests) == (2, 2)  # the cost a started App saves
    await _no_backends_left(peek)


async def test_a_configured_database_is_not_migrated_on_start_unless_asked(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls(monkeypatch)
    async with counter.make_app(database_url):
        pass
    assert calls.migrations == 0
    async with akter.App([Counter], database_url=database_url, migrate_on_start=True):
        pass
    assert calls.migrations == 1


async def test_an_unmigrated_configured_database_is_refused_with_what_to_do(
    database_url: str, peek: Peek
) -> None:
    await peek.conn.execute(
        "DELETE FROM akter_schema_migrations"
        " WHERE version = (SELECT max(version) FROM akter_schema_migrations)"
    )
    app = counter.make_app(database_url)
    with pytest.raises(akter.SchemaError, match="run `akter migrate`"):
        await app.start()
    await _no_backends_left(peek)


def test_the_sync_facade_started_once_serves_many_threads(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls(monkeypatch)
    app = counter.make_app(database_url)
    app.start_sync()
    app.start_sync()
    try:
        errors: list[BaseException] = []

        def worker(n: int) -> None:
            try:
                for _ in range(10):
                    with app.sync_client() as client:
                        outcome = client.actor(Counter, f"t{n}", tenant="acme").send(add, Add(1))
                        assert isinstance(outcome, Success)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        with app.sync_client() as client:
            totals = [client.actor(Counter, f"t{n}", tenant="acme").send(add, Add(0)) for n in range(8)]
        assert totals == [Success(10)] * 8
        assert (calls.pools, calls.manifests) == (1, 1)
    finally:
        app.close_sync()
        app.close_sync()
    assert not [t for t in threading.enumerate() if t.name == "akter-engine"]
    with app.running(), app.sync_client() as client:
        assert client.actor(Counter, "t0", tenant="acme").send(add, Add(1)) == Success(11)


async def _listener_backends(peek: Peek) -> list[int]:
    rows = await peek.rows(
        "SELECT pid FROM pg_stat_activity"
        " WHERE application_name = 'akter-results' AND datname = current_database()"
    )
    return [pid for (pid,) in rows]


@pytest.mark.parametrize(
    "finish", ["after the reconnect", "while the listener is down", "after every connection was lost"]
)
async def test_result_keeps_waiting_across_a_lost_listener(
    database_url: str, peek: Peek, clock: testing.Clock, monkeypatch: pytest.MonkeyPatch, finish: str
) -> None:
    # no fallback poll within the test: only the listener (its notifies, its wake after a
    # reconnect) can deliver the result
    monkeypatch.setattr(run_module, "POLL_FALLBACK", 3600.0)
    app = shop.make_app(database_url)
    # a delivery the restart cut short is retried after its claim lease: keep the test short
    settings = akter.RelaySettings(claim_lease=timedelta(seconds=1), backoff_base=timedelta(milliseconds=100))
    async with app, app.relay(settings), app.client() as client:
        handle = client.actor(Shop, "s1", tenant="acme")
        runs = [await handle.start(Ship, Order(id=f"o{i}", wait_s=600)) for i in range(3)]
        waiting = [asyncio.create_task(r.result(timeout=60)) for r in runs]
        listener = client.results
        # the listener counts a connection once it listens on it; its backend shows up in
        # pg_stat_activity a moment before that
        assert await listener.listening(30)
        await until(lambda: _has_listener(peek), bool, "a listener connected")
        (pid,) = await _listener_backends(peek)
        assert listener.connects == 1  # one connection for every waiter
        if finish == "after every connection was lost":
            # the pool's, the relay's and the listener's: what a restart does to a process
            await peek.rows(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        else:
            await peek.value("SELECT pg_terminate_backend(%s)", pid)
        if finish == "after the reconnect":
            await until(lambda: _listener_moved(peek, pid), bool, "the listener reconnected")
        for i in range(3):
            await handle.send(pay, Pay(order=f"o{i}", amount=i))
        if finish == "after every connection was lost":
            # passes the restart cut short resume on their recovery timers (30 s ahead)
            await clock.advance(timedelta(minutes=1))
        outcomes = await asyncio.gather(*waiting)
        assert outcomes == [Success(Shipped(order=f"o{i}", slot=10, paid=i)) for i in range(3)]
        assert listener.connects == 2


async def _has_listener(peek: Peek) -> bool:
    return len(await _listener_backends(peek)) == 1


async def _listener_moved(peek: Peek, old: int) -> bool:
    pids = await _listener_backends(peek)
    return len(pids) == 1 and pids[0] != old


async def test_result_of_a_finished_execution_needs_no_notification(database_url: str) -> None:
    app = shop.make_app(database_url)
    async with app, app.relay() as relay, app.client() as client:
        run = await client.actor(Shop, "s1", tenant="acme").start(Ship, Order(id="done"))
        await relay.idle()
        assert await run.result(timeout=10) == Success(Shipped(order="done", slot=10))
    with pytest.raises(akter.ConfigurationError, match="App was closed"):
        await run.result(timeout=10)


def test_a_started_app_refuses_a_client_of_another_event_loop(database_url: str) -> None:
    app = counter.make_app(database_url)
    with app.running():

        async def borrow() -> None:
            async with app.client():
                pass

        with pytest.raises(akter.ConfigurationError, match="another event loop"):
            asyncio.run(borrow())


async def test_an_app_started_by_an_async_server_serves_its_sync_views(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls(monkeypatch)
    app = counter.make_app(database_url)

    def view(n: int) -> object:  # a sync endpoint, run in the server's thread pool
        with app.sync_client() as client:
            return client.actor(Counter, "v", tenant="acme").send(add, Add(n))

    async with app:
        outcomes = await asyncio.gather(*(asyncio.to_thread(view, 1) for _ in range(5)))
        assert sorted(map(str, outcomes)) == [f"<Success: {n}>" for n in range(1, 6)]
        with pytest.raises(RuntimeError, match="its own event loop"):
            view(1)  # called on the loop itself, it would deadlock: refused instead
    assert (calls.pools, calls.manifests) == (1, 1)


def test_an_engine_left_open_by_an_ended_event_loop_is_replaced(database_url: str) -> None:
    app = counter.make_app(database_url)

    async def send() -> object:
        async with app.client() as client:
            return await client.actor(Counter, "c", tenant="acme").send(add, Add(1))

    async def start_and_forget() -> None:
        await app.start()  # no close(): the loop ends with the engine open

    asyncio.run(start_and_forget())
    assert asyncio.run(send()) == Success(1)


async def test_result_with_no_time_left_still_reads_a_finished_run(database_url: str) -> None:
    app = shop.make_app(database_url)
    async with app, app.relay() as relay, app.client() as client:
        run = await client.actor(Shop, "s1", tenant="acme").start(Ship, Order(id="now"))
        await relay.idle()
        assert await run.result(timeout=0) == Success(Shipped(order="now", slot=10))
        waiting = await client.actor(Shop, "s1", tenant="acme").start(Ship, Order(id="later", wait_s=600))
        with pytest.raises(akter.ResultTimeout):
            await waiting.result(timeout=0)
