"""A parent rests while a child it no longer awaits finishes; it reads an interrupted child as a
client reads it; a keyed workflow is refused as a child.

A child that no branch awaits (started and not awaited yet, or awaited by a race's losing
branch) keeps nothing awake when it finishes (invariant 13): its parent suspends, the relay goes
idle, and a later await reads the child's result. What a user observes is read through a
second connection (``peek``)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import attrs
import pytest
from returns.result import Success

import akter
from akter import testing
from tests.apps import family
from tests.apps.family import Fulfil, Line, Release, Stock, Warehouse
from tests.integration.conftest import Peek
from tests.integration.test_children import _fresh, children_of  # noqa: F401 -- _fresh: autouse
from tests.integration.workflow_support import quiet, running, until


@attrs.frozen
class Go:
    sku: str


Foreman = akter.Actor("Foreman", state=Stock, events=[Go])


@Foreman.command
def go(turn: akter.Turn[Stock], cmd: Go) -> None:
    turn.emit(cmd)


# started, then awaited only after a nap (the child finishes during it)
Later = Foreman.workflow("Later", input=Line, output=str)
later_line = Later.child("line", Fulfil)
later_nap = Later.sleep("nap")


@Later.body
async def later(wf: akter.WorkflowContext, line: Line) -> str:
    child = await later_line.start(line.warehouse, line)
    await later_nap(timedelta(hours=1))
    return f"{await child.result()}"


# a child awaited in a race that a sleep wins, never awaited again
Lost = Foreman.workflow("Lost", input=Line, output=str)
lost_line = Lost.child("line", Fulfil)
lost_short = Lost.sleep("short")
lost_first = Lost.race("child-or-short")
lost_go = Lost.wait("go", Go)


@Lost.body
async def lost(wf: akter.WorkflowContext, line: Line) -> str:
    child = await lost_line.start(line.warehouse, line)
    await lost_first.run(child.result(), lost_short(timedelta(seconds=30)))
    got = await lost_go(where=lambda e: e.sku == line.sku)
    return f"went {got.unwrap().sku}"


# two children: one started and never awaited, the other awaited
Pair = Foreman.workflow("Pair", input=Line, output=str)
pair_line = Pair.child("line", Fulfil)


@Pair.body
async def pair(wf: akter.WorkflowContext, line: Line) -> str:
    await pair_line.start("w-quick", Line(f"{line.sku}-quick", "w-quick"))
    slow = await pair_line.start(line.warehouse, line)
    return f"{await slow.result()}"


# a child awaited, its outcome kept over a nap: the last pass reads it from the parent's record
Kept = Foreman.workflow("Kept", input=Line, output=str)
kept_line = Kept.child("line", Fulfil)
kept_nap = Kept.sleep("nap")


@Kept.body
async def kept(wf: akter.WorkflowContext, line: Line) -> str:
    child = await kept_line.start(line.warehouse, line)
    outcome = await child.result()
    await kept_nap(timedelta(seconds=30))
    return f"{child.execution_id}: {outcome}"


@pytest.fixture
async def env(database_url: str) -> AsyncIterator[tuple[akter.App, Any, Any]]:
    app = akter.App([Foreman, Warehouse], database_url=database_url)
    async with running(app) as (relay, client):
        yield app, relay, client


async def status_of(peek: Peek, eid: str) -> str:
    return str(await peek.value("SELECT status FROM actor_workflow_executions WHERE execution_id = %s", eid))


async def test_a_child_started_and_awaited_after_a_sleep_lets_its_parent_rest_meanwhile(
    env: Any, peek: Peek, clock: testing.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    app, relay, client = env
    caplog.set_level(logging.WARNING, "akter")
    run = await client.actor(Foreman, "f-1", tenant="acme").start(Later, Line("a", "w-a"))
    await until(
        lambda: children_of(peek, run.execution_id), lambda k: k == [("w-a", "finished", "succeeded")]
    )
    # the child's finish resumed its parent, which awaits nothing but its nap: it suspends
    await quiet(app, relay, within=30)
    assert await status_of(peek, run.execution_id) == "suspended"
    assert "suspension refused" not in caplog.text
    # after the nap the body awaits the child: its result is there to read
    await clock.advance(timedelta(hours=1, seconds=1))
    assert await run.result(timeout=60) == Success("<Success: Shipped(sku='a', by='Anonymous()')>")
    assert family.PICKS == {"a": 1}


async def test_a_child_that_lost_a_race_wakes_nothing_when_it_finishes(
    env: Any, peek: Peek, clock: testing.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    app, relay, client = env
    caplog.set_level(logging.WARNING, "akter")
    foreman = client.actor(Foreman, "f-2", tenant="acme")
    run = await foreman.start(Lost, Line("b", "w-b", mode="hold"))
    await until(lambda: children_of(peek, run.execution_id), lambda k: k == [("w-b", "suspended", None)])
    await quiet(app, relay)
    await clock.advance(timedelta(seconds=31))  # the sleep wins the race
    race = "SELECT exit IS NOT NULL FROM actor_workflow_step WHERE execution_id = %s AND kind = 'race'"
    await until(lambda: peek.value(race, run.execution_id), bool)
    await quiet(app, relay)
    # the child finishes; no branch of its parent awaits it any more
    await client.actor(Warehouse, "w-b", tenant="acme").send(family.release, Release("b"))
    await until(
        lambda: children_of(peek, run.execution_id), lambda k: k == [("w-b", "finished", "succeeded")]
    )
    await quiet(app, relay, within=30)
    assert await status_of(peek, run.execution_id) == "suspended"
    assert "suspension refused" not in caplog.text
    # what it does wait for still wakes it
    await foreman.send(go, Go("b"))
    assert await run.result(timeout=60) == Success("went b")


async def test_a_finished_child_not_awaited_lets_its_parent_wait_for_the_one_it_awaits(
    env: Any, peek: Peek, caplog: pytest.LogCaptureFixture
) -> None:
    app, relay, client = env
    caplog.set_level(logging.WARNING, "akter")
    run = await client.actor(Foreman, "f-3", tenant="acme").start(Pair, Line("c", "w-c", mode="hold"))
    await until(
        lambda: children_of(peek, run.execution_id),
        lambda k: k == [("w-c", "suspended", None), ("w-quick", "finished", "succeeded")],
    )
    await quiet(app, relay, within=30)
    assert await status_of(peek, run.execution_id) == "suspended"
    assert "suspension refused" not in caplog.text
    await client.actor(Warehouse, "w-c", tenant="acme").send(family.release, Release("c"))
    assert await run.result(timeout=60) == Success("<Success: Shipped(sku='c', by='Anonymous()')>")
    assert family.PICKS == {"c-quick": 1, "c": 1}


async def test_a_parent_reads_an_interrupted_child_as_a_client_reads_it(
    env: Any, peek: Peek, clock: testing.Clock
) -> None:
    app, relay, client = env
    run = await client.actor(Foreman, "f-4", tenant="acme").start(Kept, Line("d", "w-d", mode="hold"))
    kids = await until(
        lambda: children_of(peek, run.execution_id), lambda k: k == [("w-d", "suspended", None)]
    )
    assert kids
    child_id = await peek.value(
        "SELECT child_id FROM actor_workflow_step WHERE execution_id = %s", run.execution_id
    )
    ann = client.actor(Warehouse, "w-d", tenant="acme", caller=akter.User("ann"))
    await ann.run(Fulfil, child_id).interrupt(reason="stock count")
    read = await client.run(Fulfil, child_id, tenant="acme").result(timeout=60)
    error = read.failure()
    assert isinstance(error, akter.Interrupted)
    assert (error.by, error.reason, str(error)) == (
        "user:ann",
        "stock count",
        "interrupted by user:ann: stock count",
    )
    # the parent recorded the child's outcome, then sleeps; its last pass replays that record
    recorded = "SELECT exit IS NOT NULL FROM actor_workflow_step WHERE execution_id = %s AND kind = 'child'"
    await until(lambda: peek.value(recorded, run.execution_id), bool)
    await quiet(app, relay)
    await clock.advance(timedelta(seconds=31))
    assert await run.result(timeout=60) == Success(f"{child_id}: {read}")
    assert f"{read}" == "<Failure: interrupted by user:ann: stock count>"


def test_a_workflow_with_a_key_is_refused_as_a_child() -> None:
    desk = akter.Actor("KeyedDesk", state=Stock)
    keyed = desk.workflow("Keyed", input=Line, output=str, key=lambda line: line.sku)
    parent = desk.workflow("Parent", input=Line, output=str)
    with pytest.raises(akter.DeclarationError) as refused:
        parent.child("keyed", keyed)
    assert refused.value.problems == [
        "<workflow KeyedDesk.Keyed> declares key=, which a child cannot apply (a child's key is derived "
        "from its parent's start); declare a workflow without key= for children, or send the keyed start "
        "from an activity"
    ]
    assert "keyed" not in parent.steps
