"""Optimistic turns (``akter.actor.cache``, ``sql/functions/akter_turn_check.sql``): a turn on an actor
this process remembers runs its handler on the remembered state and sends lock, check, hooks and write in
one round trip. These tests attack the memory: every way it can be wrong must end in the turn a
two-round-trip turn would have committed, seen through a second connection."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
from returns.result import Success

import akter
from akter import testing
from akter.actor.cache import ActorCache
from akter.store import session
from tests.apps import counter
from tests.apps.counter import Add, Counter, TooMuch, add, add_at_most_10
from tests.integration.conftest import Peek
from tests.integration.workflow_support import until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _cache(client: Any) -> ActorCache:
    cache = client.sender.options.cache
    assert isinstance(cache, ActorCache)
    return cache


@attrs.frozen
class Clocked:
    at: str = ""


@attrs.frozen
class Ping:
    n: int


Stamp = akter.Actor("Stamp", state=Clocked)


@Stamp.command
def stamp(turn: akter.Turn[Clocked], cmd: Ping) -> str:
    turn.state = Clocked(at=turn.now.isoformat())
    return turn.now.isoformat()


@Stamp.command
def remind(turn: akter.Turn[Clocked], cmd: Ping) -> None:
    # never reads turn.now: the intent's due time comes from the turn's clock all the same
    turn.send(turn.ref, stamp, Ping(cmd.n), after=timedelta(minutes=1))


async def test_two_processes_writing_one_actor_never_lose_an_update(database_url: str, peek: Peek) -> None:
    """Stale memory in both engines, alternately; and each stale run's handler runs again only
    because the state it loads differs."""
    one, two = (
        akter.App([Counter], database_url=database_url),
        akter.App([Counter], database_url=database_url),
    )
    async with one.client() as a, two.client() as b:
        ha, hb = a.actor(Counter, "c1", tenant="acme"), b.actor(Counter, "c1", tenant="acme")
        # each engine remembers the state its last turn left, which the other one then moves
        totals = [(await (ha if i % 3 else hb).send(add, Add(1))).unwrap() for i in range(30)]
        assert totals == list(range(1, 31))
        # the memory was right whenever the same engine wrote twice in a row, wrong otherwise
        assert _cache(a).hits > 0
        assert _cache(a).misses > 0
    assert await peek.rows("SELECT array_agg(sequence ORDER BY sequence) FROM actor_events") == [
        (list(range(1, 31)),)
    ]


async def test_concurrent_senders_in_two_processes_keep_events_gap_free(
    database_url: str, peek: Peek
) -> None:
    one, two = (
        akter.App([Counter], database_url=database_url),
        akter.App([Counter], database_url=database_url),
    )
    async with one.client() as a, two.client() as b:
        handles = [c.actor(Counter, "c1", tenant="acme") for c in (a, b)]
        results = await asyncio.gather(*(handles[i % 2].send(add, Add(1)) for i in range(40)))
    assert sorted(r.unwrap() for r in results) == list(range(1, 41))
    assert await peek.value("SELECT count(*) FROM actor_receipts") == 40


async def test_an_actor_created_elsewhere_is_not_taken_for_a_new_one(database_url: str, peek: Peek) -> None:
    one, two = (
        akter.App([Counter], database_url=database_url),
        akter.App([Counter], database_url=database_url),
    )
    async with one.client() as a, two.client() as b:
        assert await b.actor(Counter, "c1", tenant="acme").send(add, Add(5)) == Success(5)
        # ``a`` knows the database clock from a turn of its own (a process's first turn loads)
        await a.actor(Counter, "c0", tenant="acme").send(add, Add(1))
        # ``a`` never saw c1 and guesses it does not exist: the lock proves it wrong
        assert await a.actor(Counter, "c1", tenant="acme").send(add, Add(1)) == Success(6)
        assert _cache(a).misses == 1
    assert await peek.value("SELECT count(*) FROM actor_generations") == 2


async def test_a_state_written_outside_any_turn_is_read_not_overwritten(
    database_url: str, peek: Peek
) -> None:
    async with akter.App([Counter], database_url=database_url).client() as client:
        handle = client.actor(Counter, "c1", tenant="acme")
        await handle.send(add, Add(1))
        # an operator's repair (or a restore) changes the state without a turn: no version moves
        async with akter.App([Counter], database_url=database_url).client() as other:
            await other.actor(Counter, "c2", tenant="acme").send(add, Add(41))
        await peek.rows(
            "UPDATE actor_state SET state = (SELECT state FROM actor_state WHERE actor_id = 'c2')"
            " WHERE actor_id = 'c1' RETURNING 1"
        )
        assert await handle.send(add, Add(1)) == Success(42)


async def test_a_declared_failure_is_decided_on_the_real_state(database_url: str, peek: Peek) -> None:
    one, two = (
        akter.App([Counter], database_url=database_url),
        akter.App([Counter], database_url=database_url),
    )
    async with one.client() as a, two.client() as b:
        ha, hb = a.actor(Counter, "c1", tenant="acme"), b.actor(Counter, "c1", tenant="acme")
        assert await ha.send(add_at_most_10, Add(4)) == Success(4)
        # ``a`` remembers 4, where +4 is fine; 6 more elsewhere make it too much
        assert await hb.send(add, Add(6)) == Success(10)
        refused = (await ha.send(add_at_most_10, Add(4))).failure()
        assert isinstance(refused, TooMuch)
        assert refused.asked == 14
        # and the other way round: ``a`` remembers 10, where +1 is too much; the real 1 is not
        assert await hb.send(add, Add(-9)) == Success(1)
        assert await ha.send(add_at_most_10, Add(1)) == Success(2)
    assert await peek.value("SELECT count(*) FROM actor_receipts WHERE failed") == 1
    assert await peek.value("SELECT count(*) FROM actor_events") == 4


async def test_a_handler_that_reads_the_clock_gets_the_database_clock(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    async with akter.App([Stamp], database_url=database_url).client() as client:
        handle = client.actor(Stamp, "s1", tenant="acme")
        await handle.send(stamp, Ping(1))
        # the process remembers s1 and its estimate of the clock; the database clock jumps
        await clock.advance(timedelta(days=3))
        at = datetime.fromisoformat((await handle.send(stamp, Ping(2))).unwrap())
        database_now = await peek.value("SELECT akter_now()")
        assert abs((database_now - at).total_seconds()) < 60


async def test_a_delayed_send_is_due_on_the_database_clock_after_it_moved(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    async with akter.App([Stamp], database_url=database_url).client() as client:
        handle = client.actor(Stamp, "s1", tenant="acme")
        await handle.send(stamp, Ping(1))
        await clock.advance(timedelta(days=3))
        await handle.send(remind, Ping(2))
    lead = await peek.value("SELECT due_at - akter_now() FROM actor_outbox")
    assert timedelta(seconds=0) < lead <= timedelta(minutes=1)


async def test_a_retried_id_replays_without_running_the_handler(database_url: str, peek: Peek) -> None:
    async with akter.App([Counter], database_url=database_url).client() as client:
        handle = client.actor(Counter, "c1", tenant="acme")
        await handle.send(add, Add(1))
        cid = client.new_command_id()
        assert await handle.send(add, Add(2), command_id=cid) == Success(3)
        before = counter.RUNS["add"]
        assert await handle.send(add, Add(2), command_id=cid) == Success(3)
        assert counter.RUNS["add"] == before
    assert await peek.value("SELECT count(*) FROM actor_receipts") == 2


async def test_the_memory_is_bounded(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The estimate of the database clock trails it by the last batch's server time, which on a
    # loaded machine can pass the check's 10 ms and refuse a turn (rightly: it then takes two
    # round trips). The clock check has tests of its own; this one counts guesses, so it keeps
    # the clock out of the count.
    monkeypatch.setattr(session, "BEHIND_MS", 600_000)
    app = akter.App([Counter], database_url=database_url)
    async with app.client() as client:
        cache = _cache(client)
        cache.max_entries = 5
        for i in range(12):
            await client.actor(Counter, f"c{i}", tenant="acme").send(add, Add(1))
        assert len(cache) == 5
        # each new actor was guessed new, rightly: the first too, on the session's estimate of
        # the clock, which the engine read as it started
        assert cache.hits == 12
        assert cache.misses == 0
        # the oldest were forgotten: their next turn takes two round trips and is still right
        assert await client.actor(Counter, "c0", tenant="acme").send(add, Add(1)) == Success(2)
        # and the states' bytes are bounded in all, whatever the count
        cache.max_entries, cache.max_total_bytes = 1000, 3 * max(cache.total_bytes // 5, 1)
        for i in range(12, 20):
            await client.actor(Counter, f"c{i}", tenant="acme").send(add, Add(1))
        assert cache.total_bytes <= cache.max_total_bytes
        assert 1 <= len(cache) <= 3


async def test_a_clock_jump_costs_a_round_trip_not_a_second_handler_run(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    async with akter.App([Counter], database_url=database_url).client() as client:
        handle = client.actor(Counter, "c1", tenant="acme")
        await handle.send(add, Add(1))
        await clock.advance(timedelta(hours=5))
        runs, misses = counter.RUNS["add"], _cache(client).misses
        assert await handle.send(add, Add(1)) == Success(2)
        # the check refused the estimate; the loaded state was the one the handler ran on, so
        # its outcome stood and it did not run again
        assert counter.RUNS["add"] == runs + 1
        assert _cache(client).misses == misses + 1
        # and the estimate is right again: the next turn is one round trip
        hits = _cache(client).hits
        assert await handle.send(add, Add(1)) == Success(3)
        assert _cache(client).hits == hits + 1
    lag = await peek.value("SELECT akter_now() - max(created_at) FROM actor_receipts")
    assert lag < timedelta(minutes=1)


async def test_a_stale_version_over_the_same_state_reuses_the_run_and_numbers_events_right(
    database_url: str, peek: Peek
) -> None:
    one, two = (akter.App([Counter], database_url=database_url) for _ in range(2))
    async with one.client() as a, two.client() as b:
        ha, hb = a.actor(Counter, "c1", tenant="acme"), b.actor(Counter, "c1", tenant="acme")
        await ha.send(add, Add(1))
        # another engine's turn moves the version and the event sequence, not the state
        assert await hb.send(add, Add(0)) == Success(1)
        runs = counter.RUNS["add"]
        assert await ha.send(add, Add(1)) == Success(2)
        assert counter.RUNS["add"] == runs + 1
    assert await peek.rows("SELECT sequence, command_id IS NOT NULL FROM actor_events ORDER BY 1") == [
        (1, True),
        (2, True),
        (3, True),
    ]


async def test_a_start_after_the_clock_jumped_past_the_retry_window_goes_through(
    database_url: str, clock: testing.Clock
) -> None:
    from tests.apps import flows

    async with flows.make_app(database_url).client() as client:
        handle = client.actor(flows.Flows, "f1", tenant="acme")
        await handle.start(flows.Settle, flows.Job("first", seconds=600))
        await clock.advance(timedelta(hours=25))
        # the process's clock estimate is a day behind: the start's id is minted by the send,
        # which mints it again when the database finds it expired
        run = await handle.start(flows.Settle, flows.Job("second", seconds=600))
        assert (await run.poll()).status in {"running", "suspended"}


async def test_an_optimistic_turn_before_its_commit_is_invisible_and_a_rival_waits_for_it(
    database_url: str, peek: Peek, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the turn held before its commit must be the optimistic one; on a loaded machine the clock
    # estimate, corrected as the first turn's batch (its commit included) came back, can trail by
    # more than the check's 10 ms and rightly send it the two-round-trip way: keep the clock out
    monkeypatch.setattr(session, "BEHIND_MS", 600_000)
    one, two = (akter.App([Counter], database_url=database_url) for _ in range(2))
    async with one.client() as a, two.client() as b:
        ha, hb = a.actor(Counter, "c1", tenant="acme"), b.actor(Counter, "c1", tenant="acme")
        await ha.send(add, Add(1))
        hits = _cache(a).hits
        gate = testing.pause("turn.before_commit", match="c1")
        mine = asyncio.create_task(ha.send(add, Add(1)))  # remembered: one batch, held before COMMIT
        await gate.reached()
        assert await peek.value("SELECT count(*) FROM actor_receipts") == 1
        rival = asyncio.create_task(hb.send(add, Add(10)))  # blocks on the row lock the batch holds
        await until(lambda: peek.value("SELECT count(*) FROM pg_locks WHERE NOT granted"), lambda n: n >= 1)
        gate.release()
        assert await mine == Success(2)
        assert await rival == Success(12)
        assert _cache(a).hits == hits + 1
    assert await peek.rows("SELECT array_agg(sequence ORDER BY sequence) FROM actor_events") == [([1, 2, 3],)]


@pytest.mark.slow
async def test_a_process_killed_inside_an_optimistic_batch_leaves_nothing(
    database_url: str, peek: Peek
) -> None:
    env = {**os.environ, "AKTER_FAULTS": "turn.before_commit=crash@k2", "PYTHONPATH": str(ROOT)}
    died = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "tests.apps.send_twice", database_url, "k1", "k2"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert died.returncode == -signal.SIGKILL, died.stderr
    # k2's row was created under its lock by the check, inside the batch that died: nothing stays
    assert await peek.rows("SELECT actor_id FROM actor_generations ORDER BY 1") == [("k1",)]
    assert await peek.value("SELECT count(*) FROM actor_receipts") == 1
    async with akter.App([Counter], database_url=database_url).client() as client:
        assert await client.actor(Counter, "k2", tenant="acme").send(add, Add(5)) == Success(5)
