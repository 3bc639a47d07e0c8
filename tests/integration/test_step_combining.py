"""Step boundaries of several passes written in one round trip (``akter/workflow/engine/combine.py``,
``akter_wf_begin_many.sql``): each boundary keeps its own fence, a failed combined write leaves every pass
as a failed single write would, and a pass interrupted while its boundary waits sends nothing.

The tests put two passes' boundaries in one combined write deterministically: a holder's write is
paused in flight (``workflow.before_combined_write``), the others' boundaries queue behind it, and
the next write carries them all."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from returns.result import Failure, Success

import akter
from akter import testing
from akter.faults import Pause
from akter.workflow.engine import combine
from tests.apps import combining
from tests.apps.combining import Chain, Job, Steps
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet, relay_processes, running, until

HOLDER = "holder"


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    combining.CALLS.clear()
    combining.GATED.clear()
    combining.GATES.clear()
    yield
    testing.disarm_all()


@pytest.fixture
async def env(database_url: str) -> AsyncIterator[tuple[akter.App, Any, Any]]:
    app = combining.make_app(database_url)
    async with running(app) as (relay, client):
        yield app, relay, client


async def steps(peek: Peek, run: Any) -> list[tuple[Any, ...]]:
    """The execution's step rows: (step, attempt, settled)."""
    return await peek.rows(
        "SELECT step, attempt, exit IS NOT NULL FROM actor_workflow_step WHERE execution_id = %s"
        " ORDER BY started_at, step",
        str(run.execution_id),
    )


async def queued_behind_a_holder(
    app: akter.App, client: Any, names: list[str]
) -> tuple[dict[str, Any], Pause]:
    """Start the holder and ``names``; return once every one of ``names`` has its second step's
    boundary (which settles its first step) waiting in the combiner behind the holder's combined
    write, paused in flight. The returned pause holds the holder's write."""
    combining.GATED.update([HOLDER, *names])
    runs = {}
    for name in [HOLDER, *names]:
        runs[name] = await client.actor(Steps, name, tenant="acme").start(Chain, Job(name))

    async def first_steps_running() -> int:
        return sum(combining.CALLS.get(f"{n}-first", 0) for n in runs)

    await until(first_steps_running, lambda n: n == len(runs))
    held = testing.pause("workflow.before_combined_write", match=HOLDER)
    combining.gate(HOLDER).set()
    await held.reached()
    for name in names:
        combining.gate(name).set()
    combiner = combine.of(app.workflow_runner.sender.pool, app.tuning.combine_most)

    async def waiting() -> int:
        return len(combiner.waiting)

    await until(waiting, lambda n: n == len(names))
    return runs, held


async def combined(app: akter.App, client: Any, names: list[str]) -> tuple[dict[str, Any], Pause]:
    """As ``queued_behind_a_holder``, then let the holder's write go: the next combined write
    carries the boundaries of all ``names`` and is paused before it is sent (the pause returned)."""
    runs, held = await queued_behind_a_holder(app, client, names)
    together = testing.pause("workflow.before_combined_write", match=names[0])
    held.release()
    await together.reached()
    # all taken into that write (the holder's own next boundary may wait behind it)
    assert not {
        w.boundary.params["actor_id"]
        for w in combine.of(app.workflow_runner.sender.pool, app.tuning.combine_most).waiting
    } & set(names)
    return runs, together


def done(name: str) -> Success[str]:
    return Success(f"{name}-first {name}-second {name}-third")


async def test_a_rival_taking_one_generation_makes_only_that_pass_stale(
    env: Any, peek: Peek, clock: testing.Clock
) -> None:
    app, relay, client = env
    runs, together = await combined(app, client, ["rival-1", "rival-2"])
    # another activation takes rival-1's actor while its boundary is combined with rival-2's
    await peek.rows(
        "UPDATE actor_generations SET generation = generation + 1 WHERE actor_id = 'rival-1' RETURNING 1"
    )
    together.release()
    assert await runs["rival-2"].result(timeout=60) == done("rival-2")
    # rival-2's boundary was written (seen through a second connection); rival-1's wrote nothing:
    # its first step is still pending, its second never written
    assert await steps(peek, runs["rival-2"]) == [("first", 1, True), ("second", 1, True), ("third", 1, True)]
    assert await steps(peek, runs["rival-1"]) == [("first", 1, False)]
    assert combining.CALLS["rival-2-first"] == 1
    assert "rival-1-second" not in combining.CALLS
    # the new activation (here: this runner again, from the recovery timer) reruns the attempt
    # whose exit was never written, and goes on. (Quiet first: the fenced-out pass waits for a
    # handed-over generation for a while, and a resume meanwhile would start a second pass.)
    await quiet(app, relay)
    await clock.advance(timedelta(seconds=31))
    assert await runs["rival-1"].result(timeout=60) == done("rival-1")
    assert await steps(peek, runs["rival-1"]) == [("first", 1, True), ("second", 1, True), ("third", 1, True)]
    assert (combining.CALLS["rival-1-second"], combining.CALLS["rival-1-third"]) == (1, 1), combining.CALLS
    assert await runs[HOLDER].result(timeout=60) == done(HOLDER)


async def test_a_combined_write_whose_connection_drops_leaves_every_pass_to_retry(
    env: Any, peek: Peek, clock: testing.Clock, database_url: str
) -> None:
    app, relay, client = env
    runs, together = await combined(app, client, ["drop-1", "drop-2"])
    async with await psycopg.AsyncConnection.connect(database_url) as locker:
        # a transaction holds drop-2's generation row: the combined write waits on it, mid-way
        await locker.execute("SELECT 1 FROM actor_generations WHERE actor_id = 'drop-2' FOR UPDATE")
        together.release()
        pid = await until(
            lambda: peek.value(
                "SELECT pid FROM pg_stat_activity WHERE query LIKE '%%akter_wf_begin_many%%'"
                " AND wait_event_type = 'Lock'"
            ),
            lambda v: v is not None,
        )
        assert await peek.value("SELECT pg_terminate_backend(%s)", pid)
        await locker.rollback()
    await quiet(app, relay)
    # nothing of the combined write committed: both first steps still pending, for a rerun
    for name in ("drop-1", "drop-2"):
        assert await steps(peek, runs[name]) == [("first", 1, False)], name
    await clock.advance(timedelta(seconds=31))
    for name in ("drop-1", "drop-2"):
        assert await runs[name].result(timeout=60) == done(name)
        # the same pending row reused; each later step written and run once
        assert await steps(peek, runs[name]) == [("first", 1, True), ("second", 1, True), ("third", 1, True)]
        assert combining.CALLS[f"{name}-second"] == combining.CALLS[f"{name}-third"] == 1


async def test_a_rivals_lock_on_one_combined_boundary_fails_only_that_pass(
    env: Any, peek: Peek, clock: testing.Clock, database_url: str
) -> None:
    app, relay, client = env
    runs, together = await combined(app, client, ["lock-1", "lock-2"])
    async with await psycopg.AsyncConnection.connect(database_url) as locker:
        # a rival holds lock-2's generation row past the lock timeout: the combined write fails
        # on it, having committed nothing; lock-1's boundary is written all the same, alone
        await locker.execute("SELECT 1 FROM actor_generations WHERE actor_id = 'lock-2' FOR UPDATE")
        together.release()
        assert await runs["lock-1"].result(timeout=60) == done("lock-1")
        assert await steps(peek, runs["lock-2"]) == [("first", 1, False)]
        await locker.rollback()
    await quiet(app, relay)
    # lock-2's pass met the lock alone and ended; its recovery timer runs it again
    assert await steps(peek, runs["lock-2"]) == [("first", 1, False)]
    await clock.advance(timedelta(seconds=31))
    assert await runs["lock-2"].result(timeout=60) == done("lock-2")
    assert combining.CALLS["lock-1-first"] == 1
    assert combining.CALLS["lock-2-second"] == combining.CALLS["lock-2-third"] == 1


async def test_a_pass_interrupted_while_its_boundary_waits_sends_nothing_of_it(env: Any, peek: Peek) -> None:
    app, relay, client = env
    runs, held = await queued_behind_a_holder(app, client, ["stop"])
    combiner = combine.of(app.workflow_runner.sender.pool, app.tuning.combine_most)
    await runs["stop"].interrupt()
    result = await runs["stop"].result(timeout=60)
    assert isinstance(result, Failure)
    assert isinstance(result.failure(), akter.Interrupted)
    # its boundary left the combiner unsent; the first step's settle went with the finish
    assert [w.boundary.params["actor_id"] for w in combiner.waiting] == []
    held.release()
    assert await runs[HOLDER].result(timeout=60) == done(HOLDER)
    await quiet(app, relay)
    assert await steps(peek, runs["stop"]) == [("first", 1, True)]
    assert "stop-second" not in combining.CALLS
    execution = await peek.value(
        "SELECT count(*) FROM actor_outbox WHERE timer_key = %s", f"wf:{runs['stop'].execution_id}"
    )
    assert execution == 0  # no recovery timer armed behind the finish


@pytest.mark.slow
async def test_a_process_killed_in_a_combined_write_reruns_no_recorded_body(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    """A real SIGKILL right after a combined write committed, its rows not handed to the passes:
    a new process reruns every execution, and no activity body whose exit was recorded runs
    again (the bodies count their runs in a table, through connections of their own)."""
    await peek.conn.execute("CREATE TABLE combining_calls (label text)")
    names = [f"kill-{i}" for i in range(8)]
    with relay_processes(database_url, "tests.apps.combining:app") as relays:
        dying = relays(faults="workflow.after_combined_write=crash@kill-5")
        async with combining.make_app(database_url).client() as client:
            runs = {}
            for name in names:
                runs[name] = await client.actor(Steps, name, tenant="acme").start(Chain, Job(name))
            assert dying.wait(timeout=30) == -9, dying.output()
            recorded_then = {
                f"{name}-{step}"
                for name in names
                for step, _, settled in await steps(peek, runs[name])
                if settled
            }
            calls_then = dict(await peek.rows("SELECT label, count(*) FROM combining_calls GROUP BY label"))
            relays()
            await clock.advance(timedelta(seconds=31))  # the recovery timers the boundaries armed
            for name in names:
                assert await runs[name].result(timeout=60) == done(name)
    calls = dict(await peek.rows("SELECT label, count(*) FROM combining_calls GROUP BY label"))
    for label in recorded_then:
        assert calls[label] == calls_then[label] == 1, label
    for name in names:
        assert await steps(peek, runs[name]) == [("first", 1, True), ("second", 1, True), ("third", 1, True)]
        for step in ("first", "second", "third"):
            assert calls[f"{name}-{step}"] >= 1
