"""The workflow promises at their edges (issue 8): loops over a step, abandoned waits, events out
of time order, a pass deciding while a turn commits, interrupts during an activity, failing
compensations. Each test asserts what a user observes: results, rows read through a second
connection, how often an effect really happened."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from returns.result import Failure, Success

import akter
from akter import codec, testing
from tests.apps import edges
from tests.apps.edges import Abandon, Deadline, Done, Edges, Job, Listen, Loop, Send, Transfer, Undo, note
from tests.apps.relay_procs import RelayProcess
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet, running, until


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    for registry in (edges.CALLS, edges.GATES, edges.THREAD_GATES, edges.THREAD_STARTED, edges.STARTED):
        registry.clear()
    edges.BALANCES.clear()
    edges.OPS.clear()
    yield
    testing.disarm_all()
    for event in edges.THREAD_GATES.values():
        event.set()  # never leave a worker thread blocked


@pytest.fixture
async def env(database_url: str) -> AsyncIterator[tuple[akter.App, Any, Any]]:
    app = edges.make_app(database_url)
    async with running(app) as (relay, client):
        yield app, relay, client


async def exits_of(peek: Peek, step: str) -> list[Any]:
    rows = await peek.rows(
        "SELECT exit FROM actor_workflow_step WHERE step = %s ORDER BY scope, occurrence, attempt", step
    )
    return [None if r[0] is None else codec.decode_primitive(bytes(r[0])) for r in rows]


# ---- 7. each await of a step is a new occurrence ------------------------------------------


async def test_a_loop_of_a_hundred_runs_each_activity_and_sleep_once_with_its_own_arguments(
    env: Any, peek: Peek
) -> None:
    _app, _relay, client = env
    run = await client.actor(Edges, "loop", tenant="acme").start(Loop, Job("item", count=100, seconds=0))
    result = await run.result(timeout=120)
    assert result == Success(Done(",".join(f"item-{i}" for i in range(100))))
    assert all(edges.CALLS[f"item-{i}"] == 1 for i in range(100))
    rows = await peek.rows(
        "SELECT step, count(*), count(DISTINCT occurrence), max(occurrence) FROM actor_workflow_step "
        "GROUP BY step ORDER BY step"
    )
    assert rows == [("echo", 100, 100, 100), ("nap", 100, 100, 100)]
    assert await exits_of(peek, "echo") == [{"ok": f"item-{i}"} for i in range(100)]


async def test_three_one_minute_naps_in_a_loop_each_wait_their_own_minute(
    env: Any, peek: Peek, clock: testing.Clock
) -> None:
    app, relay, client = env
    run = await client.actor(Edges, "naps", tenant="acme").start(Loop, Job("nap", count=3, seconds=60))
    for n in range(1, 4):
        await quiet(app, relay)
        status = await run.poll()
        assert status.status == "suspended", f"nap {n} should still be sleeping"
        pending = await peek.value(
            "SELECT occurrence FROM actor_workflow_step WHERE step = 'nap' AND exit IS NULL"
        )
        assert pending == n
        await clock.advance(timedelta(seconds=61))
    assert await run.result(timeout=60) == Success(Done("nap-0,nap-1,nap-2"))


@pytest.mark.slow
async def test_a_loop_killed_mid_activity_resumes_at_its_exact_occurrence(
    database_url: str, peek: Peek, clock: testing.Clock, tmp_path: Path
) -> None:
    mark = tmp_path / "crashed"
    settings = {"AKTER_TEST_CRASH_AT": "kill-50", "AKTER_TEST_CRASH_MARK": str(mark)}
    dying = RelayProcess(database_url, app="tests.apps.edges:app", **settings)
    survivor: RelayProcess | None = None
    try:
        async with edges.make_app(database_url).client() as client:
            run = await client.actor(Edges, "kill", tenant="acme").start(
                Loop, Job("kill", count=100, seconds=0)
            )
            assert dying.proc.wait(timeout=60) == -9, dying.output()
            assert mark.read_text() == "kill-50"
            # the first fifty occurrences settled; the fifty-first was running when it died
            settled = await peek.value(
                "SELECT count(*) FROM actor_workflow_step WHERE step = 'echo' AND exit IS NOT NULL"
            )
            assert settled == 50
            survivor = RelayProcess(database_url, app="tests.apps.edges:app", **settings)
            await clock.advance(timedelta(seconds=31))  # the recovery timer armed by the attempt
            result = await run.result(timeout=120)
    finally:
        dying.close()
        if survivor is not None:
            survivor.close()
    assert result == Success(Done(",".join(f"kill-{i}" for i in range(100))))
    # occurrence 51 was rerun under its own attempt number; nothing was recorded twice
    rows = await peek.rows(
        "SELECT occurrence, attempt FROM actor_workflow_step WHERE step = 'echo' ORDER BY occurrence"
    )
    assert rows == [(i, 1) for i in range(1, 101)]
    assert await exits_of(peek, "echo") == [{"ok": f"kill-{i}"} for i in range(100)]


# ---- 2. abandoned waits wake nothing -------------------------------------------------------


@pytest.mark.parametrize("name", ["race-lost", "all-abandoned"])
async def test_an_abandoned_wait_is_settled_and_its_events_wake_nothing(
    env: Any, peek: Peek, clock: testing.Clock, name: str
) -> None:
    app, relay, client = env
    actor = client.actor(Edges, name, tenant="acme")
    run = await actor.start(Abandon, Job(name, seconds=5))
    await quiet(app, relay)
    await clock.advance(timedelta(seconds=6))  # the race's short sleep wins (or the all failed)
    await quiet(app, relay)
    assert await exits_of(peek, "hear") == [{"abandoned": {}}]
    assert (await run.poll()).status == "suspended"
    for i in range(20):
        await actor.send(note, Send(name, i))
    # a spinning pass would never let the runner go quiet
    await quiet(app, relay, within=30)
    assert (await run.poll()).status == "suspended"
    due_in = await peek.value(
        "SELECT extract(epoch FROM due_at - akter_now()) FROM actor_outbox WHERE timer_key LIKE 'wf:%%'"
    )
    assert due_in > 23 * 3600, "the timer stays at the day-long sleep"


# ---- 3. events out of time order --------------------------------------------------------------


async def _late_then_in_time(database_url: str, clock: testing.Clock, in_time_value: int) -> Any:
    """Two events before any pass scans them: the first stamped after the wait's deadline, the
    second (a higher sequence) stamped before it, as when the database clock steps back."""
    app = edges.make_app(database_url)
    async with app.client() as client:
        actor = client.actor(Edges, "ooo", tenant="acme")
        start = await clock.now()
        run = await actor.start(Deadline, Job("ooo", timeout=10))
        await clock.set(start + timedelta(seconds=20))
        await actor.send(note, Send("late", 0))
        await clock.set(start + timedelta(seconds=5))
        await actor.send(note, Send("in-time", in_time_value))
    return run


async def test_an_in_time_event_after_a_late_one_still_matches(
    database_url: str, clock: testing.Clock
) -> None:
    await _late_then_in_time(database_url, clock, in_time_value=7)
    app = edges.make_app(database_url)
    async with running(app) as (_relay, client):
        run = client.run(Deadline, (await _only_execution(database_url)), tenant="acme")
        assert await run.result(timeout=60) == Success(Done("note 7"))


async def test_a_late_event_never_makes_the_wait_spin(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    await _late_then_in_time(database_url, clock, in_time_value=0)  # matches nothing
    app = edges.make_app(database_url)
    async with running(app) as (relay, client):
        run = client.run(Deadline, (await _only_execution(database_url)), tenant="acme")
        await quiet(app, relay, within=30)
        assert (await run.poll()).status == "suspended"
        assert await peek.value("SELECT scanned FROM actor_workflow_step WHERE step = 'note'") == 2
        await clock.advance(timedelta(seconds=10))
        assert await run.result(timeout=60) == Success(Done("timeout"))


async def _only_execution(database_url: str) -> str:
    import psycopg

    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute("SELECT execution_id FROM actor_workflow_executions")
        [(eid,)] = await cur.fetchall()
    return str(eid)


# ---- 1. a decision under the fence sees the commit of the turn it waited for -----------------


async def _backend_waiting_on_a_lock(peek: Peek, fragment: str) -> bool:
    rows = await peek.rows(
        "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s", f"%{fragment}%"
    )
    return bool(rows)


async def test_an_event_committed_while_the_suspension_waits_for_the_lock_wakes_the_wait(
    env: Any, peek: Peek
) -> None:
    _app, _relay, client = env
    actor = client.actor(Edges, "lock-race", tenant="acme")
    suspending = testing.pause("workflow.before_suspend", match="lock-race")
    run = await actor.start(Listen, Job("lock-race"))
    await suspending.reached()  # the pass scanned, found nothing, and is about to suspend
    committing = testing.pause("turn.before_commit", match="lock-race")
    sent = asyncio.create_task(actor.send(note, Send("lock-race", 42)))
    await committing.reached()  # the emitting turn holds the actor's row lock, uncommitted
    suspending.release()
    await until(lambda: _backend_waiting_on_a_lock(peek, "akter_wf_suspend"), bool)
    committing.release()
    await sent
    # no clock moves: the suspension saw the event the moment it had the lock
    assert await run.result(timeout=30) == Success(Done("heard 42"))


async def test_an_interrupt_committed_while_the_suspension_waits_for_the_lock_is_not_lost(
    env: Any, peek: Peek
) -> None:
    _app, _relay, client = env
    actor = client.actor(Edges, "lock-interrupt", tenant="acme")
    suspending = testing.pause("workflow.before_suspend", match="lock-interrupt")
    run = await actor.start(Listen, Job("lock-interrupt"))
    await suspending.reached()
    committing = testing.pause("turn.before_commit", match="lock-interrupt")
    interrupting = asyncio.create_task(run.interrupt())
    await committing.reached()  # the interrupt turn holds the row lock, uncommitted
    suspending.release()
    await until(lambda: _backend_waiting_on_a_lock(peek, "akter_wf_suspend"), bool)
    committing.release()
    await interrupting
    # no event and no clock move: only the interrupt, seen by the suspension, ends it
    result = await run.result(timeout=30)
    assert isinstance(result, Failure)
    assert isinstance(result.failure(), akter.Interrupted)


# ---- 5. an interrupt during an activity undoes nothing that is still happening ----------------


async def _nothing() -> None:
    """A probe for conditions held in process (``until`` polls it, then checks the condition)."""


async def _interrupting(app: akter.App, run: Any) -> None:
    """Until the pass running ``run`` has seen the interrupt (a barrier, not a sleep)."""

    def seen() -> bool:
        p = app.workflow_runner._passes.get(run.execution_id)
        return p is not None and p.interrupting

    await until(_nothing, lambda _: seen())


async def test_an_interrupt_cancels_an_async_deposit_then_refunds_the_withdrawal(
    env: Any, peek: Peek
) -> None:
    _app, _relay, client = env
    run = await client.actor(Edges, "t-async", tenant="acme").start(Transfer, Job("async", count=5))
    await asyncio.wait_for(edges.started("deposit").wait(), 30)
    await run.interrupt()
    result = await run.result(timeout=60)
    assert isinstance(result, Failure)
    assert isinstance(result.failure(), akter.Interrupted)
    # the deposit was cancelled before it moved money; only then was the withdrawal refunded
    assert edges.OPS == ["withdraw:alice:5", "refund:alice:5"]
    assert edges.BALANCES == {"alice": 0}
    assert await exits_of(peek, "deposit") == [{"interrupt": {}, "after_interrupt": True}]
    assert "async-notified" not in edges.CALLS


async def test_a_sync_deposit_finishing_after_the_interrupt_is_reversed_once(env: Any, peek: Peek) -> None:
    app, _relay, client = env
    run = await client.actor(Edges, "t-sync", tenant="acme").start(Transfer, Job("sync", count=5))
    await until(_nothing, lambda _: "deposit" in edges.THREAD_STARTED)
    await run.interrupt()
    await _interrupting(app, run)
    assert edges.OPS == ["withdraw:alice:5"], "nothing is undone while the deposit still runs"
    edges.thread_gate("deposit").set()  # the deposit lands after the interrupt arrived
    result = await run.result(timeout=60)
    assert isinstance(result, Failure)
    assert isinstance(result.failure(), akter.Interrupted)
    assert edges.OPS == ["withdraw:alice:5", "deposit:bob:5", "reverse:bob:5", "refund:alice:5"]
    assert edges.BALANCES == {"alice": 0, "bob": 0}
    assert await exits_of(peek, "deposit") == [{"ok": 5, "after_interrupt": True}]
    assert "sync-notified" not in edges.CALLS, "the body never went on past the interrupt"


# ---- 6. compensation failures are visible ---------------------------------------------------


@pytest.mark.parametrize("name", ["raises", "non-effect"])
async def test_a_failing_undo_is_reported_with_the_original_error(env: Any, name: str) -> None:
    _app, _relay, client = env
    run = await client.actor(Edges, f"undo-{name}", tenant="acme").start(Undo, Job(name))
    result = await run.result(timeout=60)
    assert isinstance(result, Failure)
    error = result.failure()
    assert isinstance(error, akter.CompensationFailed)
    assert isinstance(error.original, edges.Refused)  # the declared error, with its class and fields
    assert error.original.reason == "the forward work was refused"
    assert len(error.failures) == 1
    assert ("undo-fails" if name == "raises" else "str") in error.failures[0]
    # the other undo still ran, once
    assert edges.CALLS[f"{name}-undo-1"] == 1
    assert (await run.poll()).outcome == "compensation_failed"


# ---- stored values that do not decode park the execution with a reason ---------------------


@pytest.mark.parametrize(
    "corrupt",
    [
        "UPDATE actor_workflow_executions SET payload = '\\x00'::bytea || convert_to('[1,2]', 'UTF8')",
        "UPDATE actor_workflow_step SET exit = '\\x00'::bytea || convert_to('{\"ok\":', 'UTF8')"
        " WHERE step = 'echo'",
        "UPDATE actor_workflow_step SET exit = '\\x07'::bytea || convert_to('garbage', 'UTF8')"
        " WHERE step = 'echo'",
    ],
)
async def test_a_stored_value_that_does_not_decode_parks_the_execution_with_a_reason(
    env: Any, peek: Peek, clock: testing.Clock, corrupt: str
) -> None:
    app, relay, client = env
    run = await client.actor(Edges, "corrupt", tenant="acme").start(Loop, Job("c", count=2, seconds=60))
    await quiet(app, relay)
    await peek.rows(corrupt + " RETURNING 1")  # type: ignore[arg-type]
    await clock.advance(timedelta(seconds=61))
    status = await until(run.poll, lambda s: s.blocked_reason is not None)
    assert status.status == "suspended"
    assert "does not decode" in status.blocked_reason
    await quiet(app, relay, within=30)  # parked, not crash-looping
    timer = await peek.value(
        "SELECT extract(epoch FROM due_at - akter_now()) FROM actor_outbox WHERE timer_key LIKE 'wf:%%'"
    )
    assert timer > 30, "offered again later, for a runner that can read it"


# ---- akter inspect shows occurrences, abandoned branches and failed cleanups -----------------


async def _inspect(database_url: str, execution_id: str) -> str:
    from click.testing import CliRunner

    from akter.cli.inspect import inspect_group

    args = ["execution", "tests.apps.edges:app", execution_id, "--database-url", database_url]
    result = await asyncio.to_thread(CliRunner().invoke, inspect_group, args)
    assert result.exit_code == 0, result.output
    return result.output


async def test_inspect_shows_each_occurrence_abandoned_waits_and_failed_undos(
    env: Any, database_url: str, clock: testing.Clock
) -> None:
    app, relay, client = env
    looped = await client.actor(Edges, "show-loop", tenant="acme").start(
        Loop, Job("show", count=3, seconds=0)
    )
    await looped.result(timeout=60)
    text = await _inspect(database_url, looped.execution_id)
    assert "echo#1 attempt 1 (activity): ok 'show-0'" in text
    assert "echo#3 attempt 1 (activity): ok 'show-2'" in text
    assert "nap#3 attempt 1 (clock)" in text

    raced = await client.actor(Edges, "show-race", tenant="acme").start(Abandon, Job("show-race", seconds=5))
    await quiet(app, relay)
    await clock.advance(timedelta(seconds=6))
    await quiet(app, relay)
    text = await _inspect(database_url, raced.execution_id)
    assert "hear#1 in branch 1.0 attempt 1 (wait): abandoned" in text

    undone = await client.actor(Edges, "show-undo", tenant="acme").start(Undo, Job("raises"))
    await undone.result(timeout=60)
    text = await _inspect(database_url, undone.execution_id)
    assert "compensation failed after the body ended (error Refused" in text
    assert "forward#2 attempt 1 (activity): ok 'raises-2'" in text


async def test_an_event_that_does_not_decode_parks_the_waiting_execution(
    database_url: str, peek: Peek
) -> None:
    app = edges.make_app(database_url)
    async with app.client() as client:  # no relay yet: nothing scans before the event is spoiled
        actor = client.actor(Edges, "bad-event", tenant="acme")
        run = await actor.start(Listen, Job("bad-event"))
        await actor.send(note, Send("bad-event", 1))
    await peek.rows(
        "UPDATE actor_events SET value = '\\x00'::bytea || convert_to('{\"zzz\":1}', 'UTF8') RETURNING 1"
    )
    async with running(app) as (relay, client):
        status = await until(
            client.run(Listen, run.execution_id, tenant="acme").poll, lambda s: s.blocked_reason
        )
        assert status.status == "suspended"
        assert "event #1 does not decode" in status.blocked_reason
        await quiet(app, relay, within=30)


async def test_a_where_predicate_that_raises_names_the_step_and_the_predicate(env: Any) -> None:
    _app, _relay, client = env
    actor = client.actor(Edges, "picky", tenant="acme")
    run = await actor.start(edges.Picky, Job("picky"))
    await actor.send(note, Send("x", -3))
    result = await run.result(timeout=60)
    assert isinstance(result, Failure)
    error = result.failure()
    assert isinstance(error, akter.Defect)
    assert "only_positive" in str(error)
    assert "picky#1" in str(error)
    assert "negative value -3" in str(error)


# ---- two relays of one App in one process each run their own workflow engine ----------------


async def test_two_relays_of_one_app_in_one_process_each_run_the_executions_they_own(
    database_url: str,
) -> None:
    settings = akter.RelaySettings(heartbeat=timedelta(seconds=0.2), ownership_lease=timedelta(seconds=1))
    app = edges.make_app(database_url)
    async with app.relay(settings) as first, app.relay(settings) as second, app.client() as client:

        async def split() -> tuple[int, int]:
            return len(first.owned()), len(second.owned())

        await until(split, lambda owned: owned[0] > 0 and owned[1] > 0 and sum(owned) == 256)
        runs = [
            await client.actor(Edges, f"two-{i}", tenant="acme").start(
                Loop, Job(f"two-{i}", count=2, seconds=0)
            )
            for i in range(16)
        ]
        results = [await run.result(timeout=60) for run in runs]
    assert results == [Success(Done(f"two-{i}-0,two-{i}-1")) for i in range(16)]


# ---- a refused suspension that brought nothing new is never retried at once ----------------


async def test_a_suspension_refused_with_nothing_new_backs_off_instead_of_spinning(
    env: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from akter.workflow.engine import passes

    refusals: list[int] = []
    waits: list[int | None] = []
    real_suspend, real_wait = passes.Pass._suspend, passes.Pass._await_progress

    async def refuse_five_times(self: passes.Pass, due_ms: int | None) -> bool:
        if len(refusals) < 5:
            refusals.append(self.writes)
            return False  # as if an unscanned event were there, but nothing changes
        return await real_suspend(self, due_ms)

    async def await_progress(self: passes.Pass, due_ms: int | None) -> None:
        waits.append(None if due_ms is None else due_ms - self.now_ms())
        await real_wait(self, due_ms)

    monkeypatch.setattr(passes.Pass, "_suspend", refuse_five_times)
    monkeypatch.setattr(passes.Pass, "_await_progress", await_progress)
    app, relay, client = env
    run = await client.actor(Edges, "no-spin", tenant="acme").start(Listen, Job("no-spin"))
    await until(run.poll, lambda s: s.status == "suspended")
    await quiet(app, relay)
    assert len(refusals) == 5
    assert len(set(refusals)) == 1, "nothing was written between the refusals"
    # after the second refusal with nothing new, each retry waits, and twice as long as before
    delays = [d for d in waits if d is not None]
    assert len(delays) == 4
    assert all(later > earlier for earlier, later in itertools.pairwise(delays))
    assert "refused twice with nothing new" in caplog.text
