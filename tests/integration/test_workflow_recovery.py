"""Crashes, stale runners and interrupts: a crash anywhere loses nothing and duplicates nothing.

Process tests start real ``akter relay tests.apps.flows:app`` processes and SIGKILL them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from returns.result import Failure, Success

import akter
from akter import testing
from akter.workflow import runner as runner_module
from tests.apps import flows
from tests.apps.flows import Book, Done, Flows, Job, Settle
from tests.apps.relay_procs import RelayProcess
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet, running, until

APP = "tests.apps.flows:app"


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    flows.CALLS.clear()
    flows.GATES.clear()
    yield
    testing.disarm_all()


@pytest.fixture
def relays(database_url: str) -> Iterator[Callable[..., RelayProcess]]:
    """Starts ``akter relay tests.apps.flows:app`` processes; all are killed at teardown."""
    started: list[RelayProcess] = []

    def start(**settings: str) -> RelayProcess:
        started.append(RelayProcess(database_url, app=APP, **settings))
        return started[-1]

    yield start
    for proc in started:
        proc.close()


@pytest.fixture
async def env(database_url: str) -> AsyncIterator[tuple[akter.App, Any, Any]]:
    app = flows.make_app(database_url)
    async with running(app) as (relay, client):
        yield app, relay, client


async def ledger_attempts(peek: Peek) -> list[tuple[Any, ...]]:
    return await peek.rows("SELECT attempt, exit IS NULL FROM actor_workflow_step WHERE step = 'ledger'")


@pytest.mark.slow
async def test_a_relay_killed_during_a_sleep_is_replaced_by_another(
    database_url: str, peek: Peek, clock: testing.Clock, relays: Callable[..., RelayProcess]
) -> None:
    first = relays()
    async with flows.make_app(database_url).client() as client:
        run = await client.actor(Flows, "p1", tenant="acme").start(Settle, Job("slept", seconds=600))
        await until(run.poll, lambda s: s.status == "suspended")
        assert first.kill() == -9
        relays()
        await clock.advance(timedelta(seconds=601))
        result = await run.result(timeout=60)
    assert result == Success(Done("ledger 2; principal Anonymous(); tenant acme"))
    assert await peek.count("actor_receipts", "ledger-slept") == 2


@pytest.mark.slow
async def test_a_runner_killed_mid_activity_is_rerun_with_the_same_derived_ids(
    database_url: str, peek: Peek, clock: testing.Clock, relays: Callable[..., RelayProcess]
) -> None:
    dying = relays(faults="workflow.before_settle=crash")
    async with flows.make_app(database_url).client() as client:
        run = await client.actor(Flows, "p2", tenant="acme").start(Settle, Job("twice", seconds=0))
        assert dying.wait(timeout=30) == -9, dying.output()
        # the activity ran and its commands landed, but its attempt was never settled
        assert await peek.count("actor_receipts", "ledger-twice") == 2
        assert await ledger_attempts(peek) == [(1, True)]
        relays()
        await clock.advance(timedelta(seconds=31))  # the recovery timer armed with the attempt
        result = await run.result(timeout=60)
    assert result == Success(Done("ledger 2; principal Anonymous(); tenant acme"))
    # the rerun repeated both derived ids: the receiver recorded each effect once
    assert await peek.count("actor_receipts", "ledger-twice") == 2
    state = await peek.value("SELECT state FROM actor_state WHERE actor_id = 'ledger-twice'")
    assert b'"effects":["twice-a","twice-b"]' in bytes(state)
    assert await ledger_attempts(peek) == [(1, False)]


@pytest.mark.slow
async def test_a_rerun_past_the_retry_window_needs_attention_and_sends_nothing(
    database_url: str, peek: Peek, clock: testing.Clock, relays: Callable[..., RelayProcess]
) -> None:
    dying = relays(faults="workflow.before_settle=crash")
    async with flows.make_app(database_url).client(akter.User("ops")) as client:
        run = await client.actor(Flows, "p7", tenant="acme").start(Settle, Job("late", seconds=0))
        assert dying.wait(timeout=30) == -9, dying.output()
        await clock.advance(timedelta(hours=25))  # past the derived ids' expiry
        relays()
        await until(run.poll, lambda s: s.status == "needs_attention")
        # nothing was sent again, and nothing recorded by guesswork: the attempt waits for a person
        assert await ledger_attempts(peek) == [(1, True)]
        acted = await client.resolve(run.execution_id, result=2)  # the operator checked: it did
        assert acted.done, acted.message
        result = await run.result(timeout=60)
    assert result == Success(Done("ledger 2; principal User(subject='ops'); tenant acme"))
    # the receiver still holds the first attempt's two effects, and no others
    state = await peek.value("SELECT state FROM actor_state WHERE actor_id = 'ledger-late'")
    assert b'"effects":["late-a","late-b"]' in bytes(state)
    # and no receipt since the clock moved: nothing reached the receiver again
    fresh = "SELECT count(*) FROM actor_receipts WHERE actor_id = 'ledger-late' AND expires_at > akter_now()"
    assert await peek.value(fresh) == 0
    assert await ledger_attempts(peek) == [(1, False)]


@pytest.mark.slow
async def test_tenant_and_principal_come_from_the_record_after_access_was_lost(
    database_url: str, peek: Peek, clock: testing.Clock, relays: Callable[..., RelayProcess]
) -> None:
    async with flows.make_app(database_url).client(caller=akter.User("alice")) as client:
        run = await client.actor(Flows, "p3", tenant="globex").start(Settle, Job("alice", seconds=60))
        relays(AKTER_TEST_REVOKED="alice")  # alice lost access: only the recorded principal remains
        await until(run.poll, lambda s: s.status == "suspended")
        await clock.advance(timedelta(seconds=61))
        result = await run.result(timeout=60)
    assert result == Success(Done("ledger 2; principal User(subject='alice'); tenant globex"))
    state = bytes(await peek.value("SELECT state FROM actor_state WHERE actor_id = 'ledger-alice'"))
    assert b"globex|system:workflow:user:alice" in state


async def test_a_stale_generation_cannot_settle_and_the_run_still_finishes(
    env: Any, peek: Peek, clock: testing.Clock
) -> None:
    app, relay, client = env
    gate = testing.pause("workflow.before_settle")
    run = await client.actor(Flows, "p4", tenant="acme").start(Settle, Job("stale", seconds=0))
    await gate.reached()
    # another activation takes the actor (as a new owner would)
    await peek.rows(
        "UPDATE actor_generations SET generation = generation + 1 WHERE actor_id = 'p4' RETURNING 1"
    )
    gate.release()
    await quiet(app, relay)
    assert await peek.rows("SELECT attempt, exit IS NULL FROM actor_workflow_step WHERE step = 'ledger'") == [
        (1, True)
    ]
    await clock.advance(timedelta(seconds=31))
    assert await run.result(timeout=60) == Success(Done("ledger 2; principal Anonymous(); tenant acme"))
    assert await peek.count("actor_receipts", "ledger-stale") == 2


async def test_a_resume_while_a_fenced_pass_waits_for_a_handover_runs_one_pass_not_two(
    env: Any, peek: Peek, clock: testing.Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the window a fenced pass's loop waits for a handed-over generation, made wide: the test
    # ends it itself, with a resume
    monkeypatch.setattr(runner_module, "HANDOFF_WAIT", 60.0)
    app, relay, client = env
    runner = app.workflow_runner
    gate = testing.pause("workflow.before_settle")
    run = await client.actor(Flows, "p9", tenant="acme").start(Settle, Job("twice", seconds=0))
    await gate.reached()
    await peek.rows(
        "UPDATE actor_generations SET generation = generation + 1 WHERE actor_id = 'p9' RETURNING 1"
    )
    gate.release()
    # the pass could not settle and ended; its loop is alive, waiting between passes
    await until(
        lambda: asyncio.sleep(0, (run.execution_id in runner._passes, runner.quiet())),
        lambda seen: seen == (False, False),
    )
    # the recovery timer falls due: the relay's resume turn takes a generation for this runner
    await clock.advance(timedelta(seconds=31))
    assert await run.result(timeout=60) == Success(Done("ledger 2; principal Anonymous(); tenant acme"))
    await quiet(app, relay)
    # the attempt ran before the fence and once more in the one pass that resumed it
    assert flows.CALLS["twice"] == 2


async def test_interrupting_a_running_execution_compensates_once(env: Any, peek: Peek) -> None:
    app, relay, client = env
    run = await client.actor(Flows, "p5", tenant="acme").start(Book, Job("run", seconds=600))
    await until(
        lambda: peek.value("SELECT count(*) FROM actor_workflow_step WHERE step = 'hold'"), lambda n: n == 1
    )
    await run.interrupt()
    result = await run.result(timeout=60)
    assert isinstance(result, Failure)
    assert isinstance(result.failure(), akter.Interrupted)
    await quiet(app, relay)
    assert flows.CALLS["run-undo"] == 1
    assert await peek.value("SELECT count(*) FROM actor_workflow_step WHERE exit IS NULL") == 0
    assert await peek.value("SELECT count(*) FROM actor_outbox WHERE timer_key LIKE 'wf:%%'") == 0


async def test_an_interrupt_racing_completion_yields_exactly_one_outcome(env: Any, peek: Peek) -> None:
    app, relay, client = env
    run = await client.actor(Flows, "p6", tenant="acme").start(Book, Job("racy", seconds=0))
    await until(
        lambda: peek.value("SELECT count(*) FROM actor_workflow_step WHERE step = 'hold'"), lambda n: n == 1
    )
    flows.gate("racy-hold").set()
    await asyncio.gather(run.interrupt(), asyncio.sleep(0))
    result = await run.result(timeout=60)
    await quiet(app, relay)
    status = await run.poll()
    # one terminal outcome: what result() returned is what the record says
    assert status.outcome == ("succeeded" if isinstance(result, Success) else "interrupted")
    if isinstance(result, Success):
        assert "racy-undo" not in flows.CALLS
    else:
        assert isinstance(result.failure(), akter.Interrupted)
        assert flows.CALLS["racy-undo"] == 1
    assert await peek.value("SELECT count(*) FROM actor_workflow_step WHERE exit IS NULL") == 0
    assert await peek.value("SELECT count(*) FROM actor_outbox WHERE timer_key LIKE 'wf:%%'") == 0
