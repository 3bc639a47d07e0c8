"""Composing real programs: ``wf.now()``/``wf.uuid4()``/``wf.random()``/``wf.log``, execution
deadlines, keyed-start policies and continue-as-new, on real PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from returns.result import Failure, Success

import akter
from akter import codec, inspect, testing
from akter.cli import main
from akter.ids import ExecutionId
from akter.operate.timeline import render_timeline
from tests.apps import composed
from tests.apps.composed import (
    Attaching,
    Bounded,
    Clocked,
    Counted,
    Desk,
    Looping,
    Order,
    Ping,
    Probe,
    Refusing,
    Rerunning,
    Seen,
)
from tests.apps.relay_procs import RelayProcess
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet, running, until

APP = "tests.apps.composed:app"


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    composed.GATES.clear()
    composed.UNDONE.clear()
    yield
    for gate in composed.GATES.values():
        gate.set()
    testing.disarm_all()


@pytest.fixture
async def env(database_url: str) -> AsyncIterator[tuple[akter.App, Any, Any]]:
    app = composed.make_app(database_url)
    async with running(app) as (relay, client):
        yield app, relay, client


@pytest.fixture
def relays(database_url: str) -> Iterator[Callable[..., RelayProcess]]:
    started: list[RelayProcess] = []

    def start(**settings: str) -> RelayProcess:
        started.append(RelayProcess(database_url, app=APP, **settings))
        return started[-1]

    yield start
    for proc in started:
        proc.close()


async def step_rows(peek: Peek, eid: str) -> list[tuple[Any, ...]]:
    return await peek.rows(
        "SELECT step, occurrence, kind, exit IS NULL FROM actor_workflow_step WHERE execution_id = %s"
        " ORDER BY started_at, step",
        eid,
    )


# ---- deterministic helpers ---------------------------------------------------------------------


@pytest.mark.slow
async def test_now_uuid_and_random_are_the_same_after_a_crash_and_replay(
    database_url: str, peek: Peek, clock: testing.Clock, relays: Callable[..., RelayProcess], tmp_path: Path
) -> None:
    noted = tmp_path / "noted.txt"
    dying = relays(faults="workflow.before_settle=crash")
    async with composed.make_app(database_url).client() as client:
        run = await client.actor(Desk, "d1", tenant="acme").start(Clocked, Probe("crash", str(noted)))
        assert dying.wait(timeout=30) == -9, dying.output()
        # the activity ran once with what the body read, and its attempt was never settled
        first = noted.read_text().splitlines()
        assert len(first) == 1
        await clock.advance(timedelta(minutes=1))  # a moment passes: a new now() would differ
        relays()
        await clock.advance(timedelta(seconds=31))  # the recovery timer armed with the attempt
        await until(run.poll, lambda s: s.status == "suspended")
        await clock.advance(timedelta(minutes=6))
        result = await run.result(timeout=60)
    lines = noted.read_text().splitlines()
    # the rerun attempt was called with exactly the values of the first: replayed, not re-read
    assert lines == [first[0], first[0]]
    seen = result.unwrap()
    assert isinstance(seen, Seen)
    assert f"{seen.now}|{seen.uuid}|{seen.random!r}" == first[0]
    # now() is one recorded step; uuid4() and random() wrote nothing
    rows = await step_rows(peek, run.execution_id)
    assert [(step, kind) for step, _, kind, _ in rows] == [
        ("@now", "clock"),
        ("note", "activity"),
        ("nap", "clock"),
    ]


async def test_wf_log_emits_once_and_never_on_replay(
    env: tuple[akter.App, Any, Any], clock: testing.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    app, relay, client = env
    caplog.set_level(logging.INFO, logger="akter.workflow.body")
    run = await client.actor(Desk, "d2", tenant="acme").start(Clocked, Probe("logged"))
    await until(run.poll, lambda s: s.status == "suspended")
    await clock.advance(timedelta(minutes=6))  # the next pass replays now, note and nap
    assert isinstance((await run.result(timeout=60)).unwrap(), Seen)
    await quiet(app, relay)
    messages = [r.getMessage() for r in caplog.records if r.name == "akter.workflow.body"]
    assert messages[0] == "clocked logged starts"
    assert messages[1].startswith("clocked logged noted ")
    assert messages[2:] == ["clocked logged woke"]
    assert all(r.execution == run.execution_id for r in caplog.records if r.name == "akter.workflow.body")  # type: ignore[attr-defined]


async def inspected(peek: Peek, app: akter.App, execution_id: str) -> str:
    """What ``akter inspect`` prints of the execution."""
    view = await inspect.read_execution(peek.conn, app, ExecutionId.parse(execution_id))
    assert view is not None
    return inspect.render_execution(view)


# ---- deadlines ---------------------------------------------------------------------------------


async def test_a_declared_deadline_interrupts_a_suspended_execution_and_compensates(
    env: tuple[akter.App, Any, Any], peek: Peek, clock: testing.Clock
) -> None:
    app, relay, client = env
    run = await client.actor(Desk, "d3", tenant="acme").start(Bounded, Probe("sleepy"))
    await until(run.poll, lambda s: s.status == "suspended")
    deadline = await peek.value(
        "SELECT deadline_at - started_at FROM actor_workflow_executions WHERE execution_id = %s",
        run.execution_id,
    )
    assert deadline == timedelta(hours=1)
    timeline = await client.timeline(run.execution_id)
    assert timeline.deadline_at is not None
    assert "  deadline   " in render_timeline(timeline)
    assert "  deadline   " in await inspected(peek, app, run.execution_id)
    assert await peek.value("SELECT count(*) FROM actor_outbox WHERE timer_key LIKE 'wfdl:%%'") == 1
    await clock.advance(timedelta(minutes=61))
    result = await run.result(timeout=60)
    assert isinstance(result, Failure)
    error = result.failure()
    assert isinstance(error, akter.Interrupted)
    assert error.by == "system:deadline"
    assert error.reason == "deadline of 1:00:00 passed"
    assert composed.UNDONE == ["booked sleepy"]  # the compensation ran, once
    await quiet(app, relay)
    assert await peek.value("SELECT count(*) FROM actor_outbox WHERE timer_key LIKE 'wfdl:%%'") == 0


async def test_a_start_timeout_fires_while_an_activity_runs(
    env: tuple[akter.App, Any, Any], peek: Peek, clock: testing.Clock
) -> None:
    app, relay, client = env
    run = await client.actor(Desk, "d4", tenant="acme").start(
        Bounded, Probe("busy", "hold"), timeout=timedelta(minutes=10)
    )
    # the gated activity is running (pending) when the deadline passes
    await until(
        lambda: peek.value(
            "SELECT count(*) FROM actor_workflow_step"
            " WHERE execution_id = %s AND step = 'hold' AND exit IS NULL",
            run.execution_id,
        ),
        lambda n: n == 1,
    )
    await clock.advance(timedelta(minutes=11))
    result = await run.result(timeout=60)
    assert isinstance(result, Failure)
    assert isinstance(result.failure(), akter.Interrupted)
    assert result.failure().reason == "deadline of 0:10:00 passed"  # type: ignore[attr-defined]
    # the in-flight attempt was cancelled and recorded as interrupted, then the undo ran
    exits = await peek.rows(
        "SELECT step, exit IS NOT NULL FROM actor_workflow_step WHERE execution_id = %s ORDER BY started_at",
        run.execution_id,
    )
    assert ("hold", True) in exits
    assert composed.UNDONE == ["booked busy"]
    await quiet(app, relay)


async def test_a_finished_execution_leaves_no_deadline_behind(
    env: tuple[akter.App, Any, Any], peek: Peek
) -> None:
    app, relay, client = env
    composed.GATES.setdefault("quick", threading.Event()).set()
    run = await client.actor(Desk, "d5", tenant="acme").start(Bounded, Probe("quick", "hold"))
    assert await run.result(timeout=60) == Success("held quick")
    await quiet(app, relay)
    assert await peek.value("SELECT count(*) FROM actor_outbox WHERE timer_key LIKE 'wfdl:%%'") == 0


@pytest.mark.slow
async def test_a_deadline_fires_after_the_relay_that_armed_it_was_killed(
    database_url: str, clock: testing.Clock, relays: Callable[..., RelayProcess]
) -> None:
    first = relays()
    async with composed.make_app(database_url).client() as client:
        run = await client.actor(Desk, "d6", tenant="acme").start(Bounded, Probe("orphan"))
        await until(run.poll, lambda s: s.status == "suspended")
        assert first.kill() == -9
        relays()
        await clock.advance(timedelta(minutes=61))
        result = await run.result(timeout=60)
    assert isinstance(result, Failure)
    assert result.failure().by == "system:deadline"  # type: ignore[attr-defined]


async def test_a_timeout_must_be_a_positive_timedelta(env: tuple[akter.App, Any, Any]) -> None:
    _, _, client = env
    with pytest.raises(akter.InvalidInput):
        await client.actor(Desk, "d7", tenant="acme").start(Bounded, Probe("x"), timeout=timedelta(0))
    with pytest.raises(akter.DeclarationError):
        Desk.workflow("Never", input=Probe, timeout=timedelta(seconds=-1))


# ---- keyed starts --------------------------------------------------------------------------------


async def test_an_open_keyed_execution_attaches_the_same_input_and_refuses_another(
    env: tuple[akter.App, Any, Any], peek: Peek
) -> None:
    _, _, client = env
    desk = client.actor(Desk, "k1", tenant="acme")
    first = await desk.start(Refusing, Order("o1", -1))
    await until(first.poll, lambda s: s.status == "suspended")
    again = await desk.start(Refusing, Order("o1", -1))
    assert again.execution_id == first.execution_id
    with pytest.raises(akter.ExecutionKeyConflict) as refused:
        await desk.start(Refusing, Order("o1", 7))
    assert refused.value.execution_id == first.execution_id
    assert not refused.value.finished
    assert await peek.count("actor_workflow_executions", "k1") == 1
    payload = await peek.value("SELECT payload FROM actor_workflow_executions WHERE actor_id = 'k1'")
    assert codec.decode(bytes(payload), Order) == Order("o1", -1)


async def test_a_finished_keyed_execution_follows_its_policy(
    env: tuple[akter.App, Any, Any], peek: Peek
) -> None:
    _, _, client = env
    desk = client.actor(Desk, "k2", tenant="acme")
    # the same input attaches to the finished execution, whatever the policy
    done = await desk.start(Refusing, Order("o2", 5))
    assert await done.result(timeout=60) == Success(5)
    same = await desk.start(Refusing, Order("o2", 5))
    assert same.execution_id == done.execution_id
    assert await same.result(timeout=60) == Success(5)
    # REFUSE (the default): another input is a typed conflict
    with pytest.raises(akter.ExecutionKeyConflict) as refused:
        await desk.start(Refusing, Order("o2", 6))
    assert refused.value.finished
    # ATTACH: another input returns the finished execution, as before
    kept = await desk.start(Attaching, Order("o3", 1))
    assert await kept.result(timeout=60) == Success(1)
    attached = await desk.start(Attaching, Order("o3", 2))
    assert attached.execution_id == kept.execution_id
    assert await attached.result(timeout=60) == Success(1)
    # NEW_RUN: another input starts the next run under the same id; the old run is recorded
    old = await desk.start(Rerunning, Order("o4", 1))
    assert await old.result(timeout=60) == Success(11)
    new = await desk.start(Rerunning, Order("o4", 2))
    assert new.execution_id == old.execution_id
    assert await new.result(timeout=60) == Success(22)
    assert await old.result(timeout=60) == Success(22)  # a handle follows the latest run
    runs = await peek.rows(
        "SELECT run_number, outcome FROM actor_workflow_runs WHERE execution_id = %s", old.execution_id
    )
    assert runs == [(1, "succeeded")]


# ---- continue-as-new ---------------------------------------------------------------------------


async def test_a_thousand_iterations_through_continue_as_new_keep_each_run_bounded(
    env: tuple[akter.App, Any, Any], peek: Peek
) -> None:
    """Ten runs of a hundred steps: what every pass of a run loads stays that size however long
    the execution lives (``benchmarks/continue_as_new.py`` measures it over thousands of iterations,
    against one run that grows)."""
    app, relay, client = env
    run = await client.actor(Desk, "loop", tenant="acme").start(Looping, Counted(0, total=1_000, every=100))
    result = await run.result(timeout=120)
    assert result == Success(Counted(1_000, total=1_000, every=100))
    runs = await peek.rows(
        "SELECT run_number, outcome, steps FROM actor_workflow_runs"
        " WHERE execution_id = %s ORDER BY run_number",
        run.execution_id,
    )
    # ten runs of a hundred steps each: what every pass of a run loads stays that size
    assert [r[0] for r in runs] == list(range(1, 11))
    assert {r[1] for r in runs} == {"continued"}
    assert {r[2] for r in runs} == {100}
    assert (
        await peek.value(
            "SELECT run_number FROM actor_workflow_executions WHERE execution_id = %s", run.execution_id
        )
        == 11
    )
    assert (
        await peek.value("SELECT count(*) FROM actor_workflow_step WHERE execution_id = %s", run.execution_id)
        == 0
    )
    await quiet(app, relay)


async def test_an_event_between_two_runs_is_not_lost(env: tuple[akter.App, Any, Any], peek: Peek) -> None:
    app, relay, client = env
    desk = client.actor(Desk, "pings", tenant="acme")
    run = await desk.start(Looping, Counted(0))
    # both events land before the second run exists: its wait starts at the cursor the first left
    await desk.send(composed.ping, Ping(1))
    await desk.send(composed.ping, Ping(2))
    assert await run.result(timeout=60) == Success(Counted(0, pings=2))
    assert await peek.rows(
        "SELECT run_number, outcome, steps FROM actor_workflow_runs WHERE execution_id = %s", run.execution_id
    ) == [(1, "continued", 1)]
    cursor = await peek.value(
        "SELECT event_cursor FROM actor_workflow_executions WHERE execution_id = %s", run.execution_id
    )
    assert cursor == 2
    # the timeline shows the current run and links the one before it
    timeline = await client.timeline(run.execution_id)
    assert timeline.run_number == 2
    assert [(r.run_number, r.outcome, r.steps) for r in timeline.runs] == [(1, "continued", 1)]
    assert [e.step for e in timeline.entries] == ["pinged#1"]
    assert "run        2 (the runs before it: 1)" in render_timeline(timeline)
    assert "  run        2 (continued as new 1 times)" in await inspected(peek, app, run.execution_id)
    await quiet(app, relay)


async def test_the_replay_and_deploy_checks_accept_recorded_builtin_steps_and_later_runs(
    database_url: str, clock: testing.Clock
) -> None:
    app = composed.make_app(database_url)
    async with running(app) as (relay, client):
        desk = client.actor(Desk, "checked", tenant="acme")
        clocked = await desk.start(Clocked, Probe("checked"))  # parks in nap with @now recorded
        await until(clocked.poll, lambda s: s.status == "suspended")
        looping = await desk.start(Looping, Counted(0))  # run 2 waits for its ping
        await desk.send(composed.ping, Ping(1))
        await until(looping.poll, lambda s: s.status == "suspended")
        await quiet(app, relay)

    def cli(*args: str) -> Any:
        return CliRunner().invoke(main, [*args, APP, "--database-url", database_url])

    replayed = await asyncio.to_thread(cli, "workflows", "replay")
    assert replayed.exit_code == 0, replayed.output
    assert "Desk.Clocked: 1 of 1 replayed (1 open" in replayed.output
    assert "Desk.Looping: 1 of 1 replayed (1 open" in replayed.output
    checked = await asyncio.to_thread(cli, "workflows", "check")
    assert checked.exit_code == 0, checked.output


async def test_a_deadline_bounds_the_whole_chain_of_runs(
    env: tuple[akter.App, Any, Any], peek: Peek, clock: testing.Clock
) -> None:
    app, relay, client = env
    desk = client.actor(Desk, "chain", tenant="acme")
    run = await desk.start(Looping, Counted(0), timeout=timedelta(minutes=10))
    await desk.send(composed.ping, Ping(1))  # run 1 takes it and continues as new
    await until(
        lambda: peek.value(
            "SELECT run_number FROM actor_workflow_executions WHERE execution_id = %s", run.execution_id
        ),
        lambda n: n == 2,
    )
    await until(run.poll, lambda s: s.status == "suspended")
    await clock.advance(timedelta(minutes=11))
    result = await run.result(timeout=60)
    assert isinstance(result, Failure)
    assert result.failure().reason == "deadline of 0:10:00 passed"  # type: ignore[attr-defined]
    await quiet(app, relay)


async def test_a_start_with_a_timeout_is_judged_by_the_policy_as_a_start(database_url: str) -> None:
    app = composed.make_app(database_url)
    async with running(app) as (_, client):
        with pytest.raises(akter.AccessDenied):
            await client.actor(composed.Gate, "g", tenant="acme").start(
                composed.Guarded, Probe("x"), timeout=timedelta(minutes=1)
            )
    async with app.client(caller=akter.User("admin")) as admin:
        run = await admin.actor(composed.Gate, "g", tenant="acme").start(
            composed.Guarded, Probe("y"), timeout=timedelta(minutes=1)
        )
        async with app.relay():
            assert await run.result(timeout=60) == Success("y")


async def test_two_keyed_starts_in_one_turn_are_judged_against_each_other(
    env: tuple[akter.App, Any, Any], peek: Peek
) -> None:
    _, _, client = env
    desk = client.actor(Desk, "k3", tenant="acme")
    with pytest.raises(akter.ExecutionKeyConflict):
        await desk.send(composed.start_two, composed.Two(Order("o5", -1), Order("o5", 2)))
    assert await peek.count("actor_workflow_executions", "k3") == 0  # the turn wrote nothing
    await desk.send(composed.start_two, composed.Two(Order("o5", -1), Order("o5", -1)))
    assert await peek.count("actor_workflow_executions", "k3") == 1
