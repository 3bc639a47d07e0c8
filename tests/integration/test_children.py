"""Child executions across actors: start, await, fan-out with a limit, lifetimes, crashes.

What a user observes is read through a second connection (``peek``): the child executions,
their parents, the receipts of the internal start command."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from returns.result import Success

import akter
from akter import codec, testing
from akter.cli.inspect import inspect_group
from akter.inspect.children import ChildProgress
from akter.operate.timeline import render_timeline
from tests.apps import family
from tests.apps.family import Detached, Line, One, Order, OrderIn, Orders, Release, Rounds, Summary, Warehouse
from tests.apps.relay_procs import RelayProcess
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet, relay_processes, running, until

APP = "tests.apps.family:app"


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    family.PICKS.clear()
    yield
    testing.disarm_all()


@pytest.fixture
async def env(database_url: str) -> AsyncIterator[tuple[akter.App, Any, Any]]:
    app = family.make_app(database_url)
    async with running(app) as (relay, client):
        yield app, relay, client


async def children_of(peek: Peek, parent: str) -> list[tuple[Any, ...]]:
    return await peek.rows(
        "SELECT actor_id, status, outcome FROM actor_workflow_executions WHERE parent_id = %s"
        " ORDER BY actor_id, execution_id",
        parent,
    )


async def test_a_parent_runs_children_on_other_actors_and_gets_typed_results(
    env: Any, peek: Peek, database_url: str
) -> None:
    app, relay, client = env
    lines = (Line("a", "w-1"), Line("b", "w-2", mode="oos"), Line("c", "w-1"))
    run = await client.actor(Orders, "o-1", tenant="acme").start(Order, OrderIn(lines))
    result = await run.result(timeout=60)
    assert result == Success(Summary(("a by Anonymous()", "c by Anonymous()"), ("OutOfStock: b",)))
    kids = await children_of(peek, run.execution_id)
    assert kids == [
        ("w-1", "finished", "succeeded"),
        ("w-1", "finished", "succeeded"),
        ("w-2", "finished", "failed"),
    ]
    # the parent recorded each child's id and outcome as a step of its own
    steps = await peek.rows(
        "SELECT kind, child_type, exit IS NOT NULL FROM actor_workflow_step WHERE execution_id = %s",
        run.execution_id,
    )
    assert sorted(steps) == [("child", "Warehouse", True)] * 3
    timeline = await client.timeline(run.execution_id)
    assert timeline.view.children == ChildProgress(started=3, finished=3, failed=1, running=0, recorded=3)
    assert "children   3 started, 3 finished (1 failed), 0 running" in render_timeline(timeline)
    child_id = await peek.value(
        "SELECT child_id FROM actor_workflow_step WHERE execution_id = %s LIMIT 1", run.execution_id
    )
    child = await client.timeline(child_id)
    assert child.view.parent_id == run.execution_id
    # akter inspect prints the same
    shown = await asyncio.to_thread(
        CliRunner().invoke,
        inspect_group,
        ["execution", APP, run.execution_id, "--database-url", database_url],
    )
    assert shown.exit_code == 0, shown.output
    assert "children   3 started, 3 finished (1 failed), 0 running, 3 recorded by the parent" in shown.output
    shown = await asyncio.to_thread(
        CliRunner().invoke, inspect_group, ["execution", APP, child_id, "--database-url", database_url]
    )
    assert f"parent     {run.execution_id}" in shown.output
    await quiet(app, relay)


async def test_a_child_acts_for_the_parents_principal(env: Any, peek: Peek) -> None:
    _, _, client = env
    run = await client.actor(Orders, "o-2", tenant="acme", caller=akter.User("ann")).start(
        Order, OrderIn((Line("a", "w-9"),))
    )
    assert await run.result(timeout=60) == Success(Summary(("a by User(subject='ann')",), ()))
    tenants = await peek.rows("SELECT DISTINCT tenant FROM actor_workflow_executions")
    assert tenants == [("acme",)]


async def test_replaying_a_parent_starts_its_child_once(env: Any, peek: Peek, clock: testing.Clock) -> None:
    app, relay, client = env
    run = await client.actor(Orders, "o-3", tenant="acme").start(One, Line("x", "w-3"))
    # the parent ran a pass to start the child, another to record its result (a replay of the
    # start), and suspended in its sleep; the next pass replays both
    await until(run.poll, lambda s: s.status == "suspended" and bool(family.PICKS))
    await quiet(app, relay)
    await clock.advance(timedelta(seconds=31))
    result = await run.result(timeout=60)
    assert isinstance(result, Success)
    assert result.unwrap().endswith("<Success: Shipped(sku='x', by='Anonymous()')>")
    assert await children_of(peek, run.execution_id) == [("w-3", "finished", "succeeded")]
    starts = await peek.value(
        "SELECT count(*) FROM actor_receipts WHERE command = 'akter.wf.start_child' AND actor_id = 'w-3'"
    )
    assert starts == 1
    assert family.PICKS == {"x": 1}


async def test_an_interrupted_parent_interrupts_its_three_running_children(env: Any, peek: Peek) -> None:
    app, relay, client = env
    lines = tuple(Line(f"h{i}", f"w-h{i}", mode="hold") for i in range(3))
    run = await client.actor(Orders, "o-4", tenant="acme").start(Order, OrderIn(lines))
    await until(
        lambda: children_of(peek, run.execution_id),
        lambda kids: [k[1] for k in kids] == ["suspended"] * 3,
    )
    timeline = await client.timeline(run.execution_id)
    assert timeline.view.children == ChildProgress(started=3, finished=0, failed=0, running=3, recorded=0)
    assert timeline.waiting.count("waiting for child ship-line#1 in branch 1.") == 3
    await run.interrupt()
    assert isinstance((await run.result(timeout=60)).failure(), akter.Interrupted)
    kids = await until(
        lambda: children_of(peek, run.execution_id),
        lambda kids: all(k[1] == "finished" for k in kids),
    )
    assert [k[2] for k in kids] == ["interrupted"] * 3
    reasons = await peek.rows(
        "SELECT interrupt_reason FROM actor_workflow_executions WHERE parent_id = %s", run.execution_id
    )
    assert reasons == [(f"its parent {run.execution_id} was interrupted",)] * 3
    assert family.PICKS == {}
    await quiet(app, relay)


async def test_children_declared_run_on_outlive_their_interrupted_parent(env: Any, peek: Peek) -> None:
    app, relay, client = env
    lines = (Line("r1", "w-r1", mode="hold"),)
    run = await client.actor(Orders, "o-5", tenant="acme").start(Detached, OrderIn(lines))
    await until(
        lambda: children_of(peek, run.execution_id), lambda kids: [k[1] for k in kids] == ["suspended"]
    )
    await run.interrupt()
    assert isinstance((await run.result(timeout=60)).failure(), akter.Interrupted)
    await quiet(app, relay)
    assert await children_of(peek, run.execution_id) == [("w-r1", "suspended", None)]
    # the child finishes after its parent: its resume of the finished parent changes nothing
    await client.actor(Warehouse, "w-r1", tenant="acme").send(family.release, Release("r1"))
    kids = await until(lambda: children_of(peek, run.execution_id), lambda kids: kids[0][1] == "finished")
    assert kids == [("w-r1", "finished", "succeeded")]
    await quiet(app, relay)
    status = await run.poll()
    assert status.outcome == "interrupted"


async def test_two_hundred_children_with_a_limit_of_ten_never_have_more_in_flight(
    env: Any, peek: Peek
) -> None:
    app, relay, client = env
    lines = tuple(Line(f"s{i}", f"w-{i % 7}") for i in range(200))
    run = await client.actor(Orders, "o-6", tenant="acme").start(Order, OrderIn(lines, limit=10))
    result = await run.result(timeout=300)
    assert isinstance(result, Success)
    assert len(result.unwrap().shipped) == 200
    # in flight, from the database: a child counts from its start turn's commit to its finish
    spans = await peek.rows(
        "SELECT started_at, finished_at FROM actor_workflow_executions WHERE parent_id = %s",
        run.execution_id,
    )
    assert len(spans) == 200
    edges = sorted([(s, 1) for s, _ in spans] + [(f, -1) for _, f in spans], key=lambda e: (e[0], e[1]))
    most = running_now = 0
    for _, delta in edges:
        running_now += delta
        most = max(most, running_now)
    assert 1 < most <= 10
    await quiet(app, relay)


@pytest.fixture
def relays(database_url: str) -> Iterator[Callable[..., RelayProcess]]:
    with relay_processes(database_url, APP) as start:
        yield start


@pytest.mark.slow
async def test_a_parent_waits_on_a_child_whose_runner_dies_mid_activity(
    database_url: str, peek: Peek, clock: testing.Clock, relays: Callable[..., RelayProcess]
) -> None:
    dying = relays(faults="workflow.before_settle=crash@w-crash")
    async with family.make_app(database_url).client() as client:
        run = await client.actor(Orders, "o-7", tenant="acme").start(Order, OrderIn((Line("k", "w-crash"),)))
        assert dying.wait(timeout=30) == -9, dying.output()
        # the child's activity ran; its attempt was never settled
        pending = await peek.rows(
            "SELECT s.attempt, s.exit IS NULL FROM actor_workflow_step s"
            " JOIN actor_workflow_executions e"
            " ON e.execution_id = s.execution_id AND e.routing_key = s.routing_key"
            " WHERE e.parent_id = %s",
            run.execution_id,
        )
        assert pending == [(1, True)]
        relays()
        await clock.advance(timedelta(seconds=31))  # the child's recovery timer
        result = await run.result(timeout=60)
    assert result == Success(Summary(("k by Anonymous()",), ()))
    assert await children_of(peek, run.execution_id) == [("w-crash", "finished", "succeeded")]


async def test_a_recorded_child_result_that_does_not_decode_parks_the_parent_with_the_reason(
    env: Any, peek: Peek, clock: testing.Clock
) -> None:
    app, relay, client = env
    run = await client.actor(Orders, "o-8", tenant="acme").start(One, Line("y", "w-8"))
    await until(run.poll, lambda s: s.status == "suspended" and bool(family.PICKS))
    await quiet(app, relay)
    # the parent recorded its child's outcome and sleeps; that record is then damaged
    await peek.rows(
        "UPDATE actor_workflow_step SET exit = %s WHERE execution_id = %s AND kind = 'child' RETURNING 1",
        codec.encode({"ok": {"not": "a Shipped"}}),
        run.execution_id,
    )
    await clock.advance(timedelta(seconds=31))
    status = await until(run.poll, lambda s: s.blocked_reason is not None)
    assert status.status == "suspended"
    assert "recorded history does not decode" in status.blocked_reason
    assert family.PICKS == {"y": 1}
    await quiet(app, relay)


async def test_a_child_whose_start_arrives_after_its_parent_was_interrupted_is_interrupted(
    env: Any, peek: Peek
) -> None:
    app, relay, client = env
    # the child's start is held on its way to the warehouse until the parent has ended
    held = testing.pause("relay.before_delivery", match="w-late")
    run = await client.actor(Orders, "o-9", tenant="acme").start(
        Order, OrderIn((Line("l1", "w-late", mode="hold"),))
    )
    await held.reached()
    # and so is the interrupt the parent's finish sends the child: the relay claims it at once
    # (a test deleting it from the outbox would race that claim, and lose it now and then: the
    # claimed row is still there to delete, and its delivery goes on all the same)
    parents = testing.pause("relay.before_delivery", match="w-late")
    await run.interrupt()
    assert isinstance((await run.result(timeout=60)).failure(), akter.Interrupted)
    await parents.reached()
    held.release()
    # the start turn finds its parent ended interrupted: the child interrupts itself, while the
    # parent's interrupt has still not arrived
    kids = await until(
        lambda: children_of(peek, run.execution_id), lambda kids: bool(kids) and kids[0][1] == "finished"
    )
    assert kids == [("w-late", "finished", "interrupted")]
    interrupts = (
        "SELECT failed FROM actor_receipts WHERE actor_id = 'w-late'"
        " AND command = 'akter.wf.interrupt:Fulfil' ORDER BY created_at"
    )
    assert await peek.rows(interrupts) == [(False,)]  # the child's own, from its start turn
    # the parent's arrives last and finds the child finished: it changes nothing
    parents.release()
    await quiet(app, relay)
    assert await peek.rows(interrupts) == [(False,), (False,)]
    assert await children_of(peek, run.execution_id) == [("w-late", "finished", "interrupted")]
    reason = await peek.value(
        "SELECT interrupt_reason FROM actor_workflow_executions WHERE parent_id = %s", run.execution_id
    )
    assert reason == f"its parent {run.execution_id} was interrupted"
    assert family.PICKS == {}


async def test_each_run_of_a_continued_parent_starts_its_own_child(env: Any, peek: Peek) -> None:
    app, relay, client = env
    run = await client.actor(Orders, "o-r", tenant="acme").start(family.Rounds_, Rounds("r", left=2))
    ids = (await run.result(timeout=60)).unwrap().split()
    # the same start in three runs: three children, none attached to an earlier run's (their
    # starts are delivered through the outbox, the last one perhaps after the parent finished)
    assert len(set(ids)) == 3
    await quiet(app, relay)
    children = await peek.rows(
        "SELECT execution_id FROM actor_workflow_executions WHERE parent_id = %s ORDER BY 1", run.execution_id
    )
    assert sorted(c for (c,) in children) == sorted(ids)
