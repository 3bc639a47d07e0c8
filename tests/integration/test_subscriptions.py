"""Live subscriptions: an actor's events as they commit, across a database restart, and
``wait_for`` the first match."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import attrs
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from returns.maybe import Nothing, Some

import akter
from akter import testing
from akter.actor import subscribe
from tests.apps.counter import Add, Added, CounterState, Note


def readers_are_users(caller: akter.Caller, member: Any) -> bool:
    return getattr(member, "kind", "command") != "events" or isinstance(caller, akter.User)


Feed = akter.Actor("Feed", state=CounterState, events=[Added, Note], access=readers_are_users)


@Feed.command
def burst(turn: akter.Turn[CounterState], cmd: Add) -> int:
    total = turn.state.count
    for _ in range(cmd.amount):
        total += 1
        turn.emit(Added(amount=1, total=total))
    turn.state = attrs.evolve(turn.state, count=total)
    return total


@Feed.command
def say(turn: akter.Turn[CounterState], cmd: Note) -> None:
    turn.emit(cmd)


USER = akter.User("reader")


@pytest.fixture(autouse=True)
def _only_notifications_wake(monkeypatch: pytest.MonkeyPatch) -> None:
    # no fallback read within a test: only a notification, or the listener's wake after a
    # reconnect, can deliver what a subscriber has not seen yet
    monkeypatch.setattr(subscribe, "POLL_FALLBACK", 3600.0)


def _app(database_url: str) -> akter.App:
    return akter.App([Feed], database_url=database_url)


async def test_a_subscriber_sees_every_event_once_in_order_across_a_database_restart(
    database_url: str,
) -> None:
    watcher, writer = _app(database_url), _app(database_url)
    seen: list[int] = []
    totals: list[int] = []
    three_hundred = asyncio.Event()
    restarted = asyncio.Event()
    async with watcher, writer, watcher.client(USER) as reading, writer.client() as writing:
        feed = reading.actor(Feed, "f1", tenant="acme")

        async def watch() -> None:
            async for event in feed.events():
                seen.append(event.sequence)
                assert isinstance(event.value, Added)
                totals.append(event.value.total)
                if len(seen) == 300:
                    three_hundred.set()
                if len(seen) == 1000:
                    return

        async def emit() -> None:
            target = writing.actor(Feed, "f1", tenant="acme")
            for turn in range(200):
                if turn == 60:
                    await restarted.wait()
                await target.send(burst, Add(5))

        watching = asyncio.create_task(watch())
        emitting = asyncio.create_task(emit())
        await three_hundred.wait()
        # what a restart does to the processes: every session of the database ends at once
        # and new ones are refused for a while (the writer's sends retry meanwhile)
        dbname = conninfo_to_dict(database_url)["dbname"]
        admin_url = make_conninfo(database_url, dbname="postgres")
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
            await admin.execute(f'ALTER DATABASE "{dbname}" WITH ALLOW_CONNECTIONS false')
            try:
                await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (dbname,)
                )
            finally:
                await admin.execute(f'ALTER DATABASE "{dbname}" WITH ALLOW_CONNECTIONS true')
        restarted.set()
        await asyncio.wait_for(asyncio.gather(watching, emitting), 60)
        assert (await watcher.engine()).results.connects == 2
    assert seen == list(range(1, 1001))
    assert totals == list(range(1, 1001))


async def test_wait_for_returns_an_event_committed_before_the_call(database_url: str) -> None:
    async with _app(database_url) as app, app.client(USER) as client:
        feed = client.actor(Feed, "f1", tenant="acme")
        await feed.send(say, Note("first"))
        await feed.send(burst, Add(2))
        await feed.send(say, Note("second"))
        assert await feed.wait_for(Note, timeout=0) == Some(Note("first"))
        assert await feed.wait_for(Note, where=lambda n: n.text == "second", timeout=0) == Some(
            Note("second")
        )
        assert await feed.wait_for(Added, where=lambda a: a.total == 2) == Some(Added(amount=1, total=2))
        assert await feed.wait_for(Note, after=4, timeout=0.05) == Nothing
        assert await feed.wait_for(Note, where=lambda n: n.text == "third", timeout=0.05) == Nothing


async def test_wait_for_is_woken_by_an_event_committed_after_the_call(database_url: str) -> None:
    async with _app(database_url) as app, app.client(USER) as client:
        feed = client.actor(Feed, "f1", tenant="acme")
        gate = testing.pause("turn.before_commit", match="f1")
        sending = asyncio.create_task(feed.send(say, Note("late")))
        await gate.reached()  # written, not committed: nothing to see yet
        waiting = asyncio.create_task(feed.wait_for(Note, timeout=60))
        assert await feed.wait_for(Note, timeout=0) == Nothing
        gate.release()
        await sending
        assert await waiting == Some(Note("late"))


async def test_reading_events_is_under_the_access_policy(database_url: str) -> None:
    async with _app(database_url) as app, app.client() as client:
        feed = client.actor(Feed, "f1", tenant="acme")
        await feed.send(say, Note("hello"))
        with pytest.raises(akter.AccessDenied, match="may not read the events of Feed"):
            feed.events()
        with pytest.raises(akter.AccessDenied):
            await feed.wait_for(Note, timeout=0)
        reader = client.actor(Feed, "f1", tenant="acme", caller=USER)
        with pytest.raises(akter.InvalidInput, match="declares no event type"):
            await reader.wait_for(CounterState, timeout=0)
        with pytest.raises(akter.InvalidInput, match="after must be an event sequence"):
            reader.events(after=-1)


def test_the_sync_client_iterates_events_and_waits(database_url: str) -> None:
    app = _app(database_url)
    with app.running(), app.sync_client(USER) as client:
        feed = client.actor(Feed, "f1", tenant="acme")
        feed.send(burst, Add(3))
        got: list[tuple[int, object]] = []
        stream = feed.events(after=1)

        def later() -> None:
            with app.sync_client() as other:
                other.actor(Feed, "f1", tenant="acme").send(say, Note("from a thread"))

        for event in stream:
            got.append((event.sequence, event.value))
            if event.sequence == 3:
                thread = threading.Thread(target=later)
                thread.start()
            if event.sequence == 4:
                break
        thread.join()
        assert got == [
            (2, Added(amount=1, total=2)),
            (3, Added(amount=1, total=3)),
            (4, Note("from a thread")),
        ]
        assert feed.wait_for(Note, timeout=0) == Some(Note("from a thread"))
