"""The actor kernel on a real PostgreSQL: turns, receipts, events, tenants, typed refusals."""

from __future__ import annotations

import asyncio
import logging
import traceback
from datetime import timedelta
from typing import Any

import attrs
import psycopg
import pytest
from returns.result import Failure, Result, Success

import akter
from akter import codec, testing
from akter.errors import CommandConflict, InternalCommand, InvalidActorId, InvalidCommandId, TurnClosed
from tests.apps import counter
from tests.apps.counter import (
    Add,
    Added,
    Counter,
    CounterState,
    Note,
    TooMuch,
    add,
    add_at_most_10,
    explode,
    make_app,
    note,
    reset,
)
from tests.integration.conftest import Peek
from tests.integration.workflow_support import until


async def test_a_command_commits_state_event_and_receipt(database_url: str, peek: Peek) -> None:
    async with make_app(database_url).client() as client:
        shop = client.actor(Counter, "c1", tenant="acme")
        assert await shop.send(add, Add(2)) == Success(2)
        assert await shop.send(add, Add(3)) == Success(5)
    assert await peek.count("actor_receipts", "c1") == 2
    assert await peek.rows("SELECT sequence, tag FROM actor_events ORDER BY sequence") == [
        (1, "Added"),
        (2, "Added"),
    ]
    assert await peek.value("SELECT event_seq FROM actor_generations WHERE actor_id = 'c1'") == 2


async def test_events_of_one_turn_take_consecutive_sequences(database_url: str, peek: Peek) -> None:
    Burst = akter.Actor("Burst", state=CounterState, events=[Added, Note])

    @Burst.command
    def burst(turn: akter.Turn[CounterState], cmd: Add) -> None:
        for i in range(cmd.amount):
            turn.emit(Added(amount=i, total=i))
        turn.emit(Note("it's done"))  # a quote in a value travels as data

    async with akter.App([Burst], database_url=database_url).client() as client:
        handle = client.actor(Burst, "b", tenant="acme")
        first = await handle.send_record(burst, Add(3))
        second = await handle.send_record(burst, Add(0))
    assert [(seq, tag) for seq, tag, _ in first.events] == [
        (1, "Added"),
        (2, "Added"),
        (3, "Added"),
        (4, "Note"),
    ]
    assert [(seq, tag) for seq, tag, _ in second.events] == [(5, "Note")]
    assert await peek.rows("SELECT sequence, tag FROM actor_events ORDER BY sequence") == [
        (1, "Added"),
        (2, "Added"),
        (3, "Added"),
        (4, "Note"),
        (5, "Note"),
    ]
    assert await peek.value("SELECT event_seq FROM actor_generations") == 5
    stored = await peek.value("SELECT value FROM actor_events WHERE sequence = 5")
    assert codec.decode(stored, Note) == Note("it's done")


async def test_same_id_replays_without_running_the_handler(database_url: str, peek: Peek) -> None:
    async with make_app(database_url).client() as client:
        handle = client.actor(Counter, "c1", tenant="acme")
        cid = client.new_command_id()
        first = await handle.send_record(add, Add(4), command_id=cid)
        again = await handle.send_record(add, Add(4), command_id=cid)
    assert (first.outcome, first.replayed) == (Success(4), False)
    assert (again.outcome, again.replayed) == (Success(4), True)
    assert counter.RUNS["add"] == 1
    assert await peek.count("actor_events") == 1


async def test_same_actor_id_in_two_tenants_is_two_actors(database_url: str, peek: Peek) -> None:
    async with make_app(database_url).client() as client:
        await client.actor(Counter, "same", tenant="acme").send(add, Add(1))
        assert await client.actor(Counter, "same", tenant="globex").send(add, Add(7)) == Success(7)
    assert await peek.rows("SELECT tenant, event_seq FROM actor_generations ORDER BY tenant") == [
        ("acme", 1),
        ("globex", 1),
    ]


async def test_declared_failure_rolls_back_and_replays_after_state_changed(
    database_url: str, peek: Peek
) -> None:
    async with make_app(database_url).client() as client:
        handle = client.actor(Counter, "c1", tenant="acme")
        await handle.send(add, Add(8))
        cid = client.new_command_id()
        failed = await handle.send(add_at_most_10, Add(5), command_id=cid)
        assert _failure(failed) == (TooMuch, 10, 13)
        # business writes rolled back: state and events as before the failing command
        assert await peek.value("SELECT event_seq FROM actor_generations") == 1
        await handle.send(add, Add(-8))  # state changes; the failure must still replay
        replayed = await handle.send_record(add_at_most_10, Add(5), command_id=cid)
    assert replayed.replayed
    assert _failure(replayed.outcome) == (TooMuch, 10, 13)
    assert counter.RUNS["add_at_most_10"] == 1
    assert await peek.value("SELECT failed FROM actor_receipts WHERE command_id = %s", cid) is True


async def test_defect_rolls_everything_back(database_url: str, peek: Peek) -> None:
    async with make_app(database_url).client() as client:
        handle = client.actor(Counter, "c1", tenant="acme")
        with pytest.raises(akter.Defect, match="RuntimeError: the handler has a bug") as info:
            await handle.send(explode, Add(1))
        assert isinstance(info.value.__cause__, RuntimeError)
    for table in ("actor_receipts", "actor_events", "actor_state", "actor_generations"):
        assert await peek.count(table) == 0, table


async def test_emitting_an_undeclared_event_is_a_defect_at_the_emit(database_url: str, peek: Peek) -> None:
    Quiet = akter.Actor("Quiet", state=CounterState, events=[Added])

    @Quiet.command
    def chatter(turn: akter.Turn[CounterState], cmd: Add) -> None:
        turn.state = CounterState(count=cmd.amount)
        turn.emit(Note("not declared on Quiet"))

    async with akter.App([Quiet], database_url=database_url).client() as client:
        with pytest.raises(akter.Defect, match="Quiet does not declare event type Note") as info:
            await client.actor(Quiet, "q1", tenant="acme").send(chatter, Add(1))
    # raised by the emit itself, so the traceback names the handler's line, not the kernel's
    frames = [frame.f_code.co_name for frame, _ in traceback.walk_tb(info.value.__traceback__)]
    assert frames[-2:] == ["chatter", "emit"]
    assert info.value.error_type == "UndeclaredEvent"
    for table in ("actor_receipts", "actor_events", "actor_state"):
        assert await peek.count(table) == 0, table


async def test_conflicting_payload_or_command_is_refused(database_url: str, peek: Peek) -> None:
    async with make_app(database_url).client() as client:
        handle = client.actor(Counter, "c1", tenant="acme")
        cid = client.new_command_id()
        await handle.send(add, Add(1), command_id=cid)
        with pytest.raises(CommandConflict, match="another payload"):
            await handle.send(add, Add(2), command_id=cid)
        with pytest.raises(CommandConflict, match="'add'"):
            await handle.send(add_at_most_10, Add(1), command_id=cid)
    assert counter.RUNS["add"] == 1
    assert await peek.count("actor_receipts") == 1


async def test_another_caller_presenting_a_known_id_is_denied(database_url: str, peek: Peek) -> None:
    async with make_app(database_url).client() as client:
        cid = client.new_command_id()
        await client.actor(Counter, "c1", tenant="acme", caller=akter.User("alice")).send(
            add, Add(1), command_id=cid
        )
        mallory = client.actor(Counter, "c1", tenant="acme", caller=akter.User("mallory"))
        with pytest.raises(akter.AccessDenied, match="another caller"):
            await mallory.send(add, Add(1), command_id=cid)
    assert counter.RUNS["add"] == 1


async def test_access_policy_refuses_before_anything_is_written(database_url: str, peek: Peek) -> None:
    Guarded = akter.Actor("Guarded", state=CounterState, access=akter.users_only)

    @Guarded.command
    def bump(turn: akter.Turn[CounterState], cmd: Add) -> None:
        turn.state = CounterState(count=cmd.amount)

    async with akter.App([Guarded], database_url=database_url).client() as client:
        with pytest.raises(akter.AccessDenied):
            await client.actor(Guarded, "g", tenant="acme").send(bump, Add(1))
        assert await client.actor(Guarded, "g", tenant="acme", caller=akter.User("u")).send(
            bump, Add(1)
        ) == Success(None)
    assert await peek.count("actor_receipts") == 1


async def test_internal_command_from_a_user_writes_nothing(database_url: str, peek: Peek) -> None:
    async with make_app(database_url).client(caller=akter.User("alice")) as client:
        with pytest.raises(InternalCommand):
            await client.actor(Counter, "c1", tenant="acme").send(reset, Add(0))
        system = client.actor(Counter, "c1", tenant="acme", caller=akter.System("test"))
        assert await system.send(reset, Add(3)) == Success(None)
    assert counter.RUNS["reset"] == 1
    assert await peek.count("actor_receipts") == 1


async def test_expired_id_is_refused_even_after_its_receipt_was_pruned(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    async with make_app(database_url).client() as client:
        handle = client.actor(Counter, "c1", tenant="acme")
        cid = client.new_command_id()
        await handle.send(add, Add(1), command_id=cid)
        await clock.advance(timedelta(hours=25))
        with pytest.raises(akter.CommandExpired):
            await handle.send(add, Add(1), command_id=cid)
        await peek.rows("DELETE FROM actor_receipts RETURNING 1")
        with pytest.raises(akter.CommandExpired):
            await handle.send(add, Add(1), command_id=cid)
        # the expired id never reached the handler
        assert counter.RUNS["add"] == 1
        # a fresh id minted after the jump is on the database clock and goes through
        assert await handle.send(add, Add(1)) == Success(2)
    assert await peek.count("actor_receipts") == 1


async def test_oversized_state_rolls_back_with_a_typed_error(database_url: str, peek: Peek) -> None:
    async with make_app(database_url).client() as client:
        handle = client.actor(Counter, "c1", tenant="acme")
        await handle.send(note, Note("small"))
        with pytest.raises(akter.StateTooLarge) as info:
            await handle.send(note, Note("x" * 5000))
    assert (info.value.limit, info.value.size > 5000) == (4096, True)
    assert await peek.count("actor_receipts") == 1


async def test_corrupt_state_row_is_a_typed_error_and_the_bytes_are_kept(
    database_url: str, peek: Peek
) -> None:
    async with make_app(database_url).client() as client:
        handle = client.actor(Counter, "c1", tenant="acme")
        await handle.send(add, Add(1))
        await peek.rows("UPDATE actor_state SET state = '\\x01deadbeef'::bytea RETURNING 1")
        with pytest.raises(akter.CorruptRecord, match="zstd"):
            await handle.send(add, Add(1))
        await peek.rows("UPDATE actor_state SET state = '\\x007b7d'::bytea RETURNING 1")  # {} misses nothing
        await peek.rows(
            """UPDATE actor_state SET state = '\\x007b22636f756e74223a2278227d'::bytea RETURNING 1"""
        )
        with pytest.raises(akter.CorruptRecord, match="CounterState"):
            await handle.send(add, Add(1))
    assert bytes(await peek.value("SELECT state FROM actor_state")) == b'\x00{"count":"x"}'
    assert await peek.count("actor_receipts") == 1


@pytest.mark.parametrize(
    ("actor_id", "tenant", "error"),
    [
        ("", "acme", InvalidActorId),
        ("x" * 513, "acme", InvalidActorId),
        ("é" * 257, "acme", InvalidActorId),
        ("ok", "", InvalidActorId),
        ("nul\x00", "acme", InvalidActorId),
    ],
)
async def test_malformed_actor_ids_are_typed_errors(
    database_url: str, peek: Peek, actor_id: str, tenant: str, error: type[Exception]
) -> None:
    async with make_app(database_url).client() as client:
        with pytest.raises(error):
            client.actor(Counter, actor_id, tenant=tenant)
    assert await peek.count("actor_generations") == 0


@pytest.mark.parametrize(
    "bad",
    ["", "v2.1.2.00000000000000000000000000000000", "v1.5.4.0123456789abcdef0123456789abcdef", "v1.1.2.xyz"],
)
async def test_malformed_command_ids_are_typed_errors(database_url: str, peek: Peek, bad: str) -> None:
    async with make_app(database_url).client() as client:
        with pytest.raises(InvalidCommandId):
            await client.actor(Counter, "c1", tenant="acme").send(add, Add(1), command_id=bad)
    assert await peek.count("actor_generations") == 0


async def test_wrong_payload_type_is_refused(database_url: str, peek: Peek) -> None:
    async with make_app(database_url).client() as client:
        handle = client.actor(Counter, "c1", tenant="acme")
        with pytest.raises(akter.InvalidInput, match="takes a Add, got Note"):
            await handle.send(add, Note("x"))  # type: ignore[misc]  # the wrong type is the point
    assert await peek.count("actor_generations") == 0


async def test_uncommitted_turn_is_invisible_to_a_second_connection(database_url: str, peek: Peek) -> None:
    async with make_app(database_url).client() as client:
        gate = testing.pause("turn.before_commit", match="c1")
        task = asyncio.create_task(client.actor(Counter, "c1", tenant="acme").send(add, Add(1)))
        await gate.reached()
        for table in ("actor_receipts", "actor_events", "actor_state", "actor_generations"):
            assert await peek.count(table) == 0, table
        gate.release()
        assert await task == Success(1)
    assert await peek.count("actor_events") == 1


async def test_concurrent_duplicate_deliveries_commit_once(database_url: str, peek: Peek) -> None:
    async with make_app(database_url).client() as client:
        first = client.actor(Counter, "c1", tenant="acme")
        cid = client.new_command_id()
        gate = testing.pause("turn.before_commit", match="c1")
        a = asyncio.create_task(first.send_record(add, Add(1), command_id=cid))
        await gate.reached()  # a holds the row lock on its connection, uncommitted
        b = asyncio.create_task(first.send_record(add, Add(1), command_id=cid))
        # b runs on a second pooled connection and blocks on the lock until a commits
        await until(
            lambda: peek.value(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype IN ('transactionid','tuple')"
            ),
            lambda n: n >= 1,
        )
        gate.release()
        ra, rb = await a, await b
    assert (ra.replayed, rb.replayed) == (False, True)
    assert ra.outcome == rb.outcome == Success(1)
    assert counter.RUNS["add"] == 1
    assert await peek.count("actor_receipts") == 1
    assert await peek.count("actor_events") == 1


async def test_concurrent_turns_never_lose_an_update(database_url: str, peek: Peek) -> None:
    async with make_app(database_url).client() as client:
        handle = client.actor(Counter, "c1", tenant="acme")
        results = await asyncio.gather(*(handle.send(add, Add(1)) for _ in range(20)))
    assert sorted(r.unwrap() for r in results) == list(range(1, 21))
    assert await peek.rows("SELECT array_agg(sequence ORDER BY sequence) FROM actor_events") == [
        (list(range(1, 21)),)
    ]


async def test_lock_timeout_is_retried_without_entering_the_handler(
    database_url: str, peek: Peek, caplog: pytest.LogCaptureFixture
) -> None:
    app = akter.App([Counter], database_url=database_url, lock_timeout=timedelta(milliseconds=50))
    async with app.client() as client:
        handle = client.actor(Counter, "c1", tenant="acme")
        await handle.send(add, Add(1))
        async with await psycopg.AsyncConnection.connect(database_url) as rival:
            await rival.execute("SELECT 1 FROM actor_generations WHERE actor_id = 'c1' FOR UPDATE")
            with caplog.at_level(logging.INFO, logger="akter.turn"):
                task = asyncio.create_task(handle.send(add, Add(1)))
                await until(lambda: _busy_retries(caplog), lambda n: n >= 2)
                # at most one optimistic run before the lock, none while the rival holds the row
                runs = counter.RUNS["add"]
                assert runs in {1, 2}
                await until(lambda: _busy_retries(caplog), lambda n: n >= 4)
                assert counter.RUNS["add"] == runs
                # the rival's own turn-like write: events stay gap-free around it
                await rival.commit()
            assert await task == Success(2)
    assert await peek.rows("SELECT array_agg(sequence ORDER BY sequence) FROM actor_events") == [([1, 2],)]


async def test_a_busy_actor_past_the_deadline_is_actor_busy(database_url: str, peek: Peek) -> None:
    app = akter.App(
        [Counter],
        database_url=database_url,
        lock_timeout=timedelta(milliseconds=20),
        busy_timeout=timedelta(milliseconds=200),
    )
    async with app.client() as client:
        handle = client.actor(Counter, "c1", tenant="acme")
        await handle.send(add, Add(1))
        async with await psycopg.AsyncConnection.connect(database_url) as rival:
            await rival.execute("SELECT 1 FROM actor_generations WHERE actor_id = 'c1' FOR UPDATE")
            with pytest.raises(akter.ActorBusy):
                await handle.send(add, Add(1))
    # what a user observes: only the first send committed. (How often the pure handler ran is
    # not a promise: a turn retried inside its busy budget may run it again before committing.)
    assert await peek.count("actor_receipts", "c1") == 1


async def test_turn_capabilities_end_with_the_turn(database_url: str) -> None:
    Leaky = akter.Actor("Leaky", state=CounterState, events=[Added])
    leaked: list[akter.Turn[CounterState]] = []

    @Leaky.command
    def keep(turn: akter.Turn[CounterState], cmd: Add) -> None:
        leaked.append(turn)

    async with akter.App([Leaky], database_url=database_url).client() as client:
        await client.actor(Leaky, "l", tenant="acme").send(keep, Add(1))
    with pytest.raises(TurnClosed):
        leaked[0].emit(Added(amount=1, total=1))
    with pytest.raises(TurnClosed):
        leaked[0].state = CounterState()


def test_sync_client(database_url: str) -> None:
    with make_app(database_url).sync_client() as client:
        handle = client.actor(Counter, "c1", tenant="acme")
        assert handle.send(add, Add(2)) == Success(2)
        cid = client.new_command_id()
        assert _failure(handle.send(add_at_most_10, Add(20), command_id=cid)) == (TooMuch, 10, 22)
        assert _failure(handle.send(add_at_most_10, Add(20), command_id=cid)) == (TooMuch, 10, 22)
    assert counter.RUNS["add_at_most_10"] == 1


def _failure(outcome: Result[Any, Exception]) -> tuple[object, ...]:
    """The declared error of a Failure as (class, fields): attrs exceptions compare by identity."""
    assert isinstance(outcome, Failure), outcome
    error = outcome.failure()
    return (type(error), *attrs.astuple(error))


async def _busy_retries(caplog: pytest.LogCaptureFixture) -> int:
    return sum("is busy" in r.getMessage() for r in caplog.records)
