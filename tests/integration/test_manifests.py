"""Manifests at run time: stored when a runtime opens, recorded by every start, and what runners
of other code do with an execution — leave it alone when they cannot replay it, move it onto
their own manifest when they can — and ``wf.version`` choosing old or new paths."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from returns.result import Success

from akter import testing
from akter.workflow.core import manifest
from tests.apps import depot
from tests.apps.depot import Order, Shipped
from tests.integration.conftest import Peek


@pytest.fixture(autouse=True)
def _calls() -> None:
    depot.CALLS.clear()


def ship_of(variant: str) -> Any:
    return depot.VARIANTS[variant][0].workflows["Ship"]


async def settle(app: Any, relay: Any) -> None:
    """Until nothing is due and no pass runs (a pass may make something due, and back)."""
    async with asyncio.timeout(30):
        while True:
            await relay.idle()
            await app.workflow_runner.idle()
            await relay.idle()
            if not app.workflow_runner._tasks:
                return


async def start(url: str, variant: str, *orders: str) -> list[str]:
    """Start ``orders`` with ``variant``'s code and run them until they park; their ids."""
    app = depot.make_app(variant, url)
    actor = depot.VARIANTS[variant][0]
    async with app.relay() as relay, app.client() as client:
        runs = [
            await client.actor(actor, "d1", tenant="acme").start(ship_of(variant), Order(id=o))
            for o in orders
        ]
        await settle(app, relay)
    return [r.execution_id for r in runs]


async def test_a_runtime_stores_its_manifests_and_a_start_records_its_hash(
    database_url: str, peek: Peek
) -> None:
    ship = ship_of("after")
    _, digest = manifest.of(ship)
    async with depot.make_app("after", database_url).client():
        rows = await peek.rows(
            "SELECT actor_type, workflow, manifest_hash, manifest FROM actor_workflow_manifests"
        )
        assert rows == [("Depot", "Ship", digest, manifest.derive(ship))]
    [eid] = await start(database_url, "after", "o1")
    assert await peek.rows("SELECT execution_id, manifest_hash, versions FROM actor_workflow_executions") == [
        (eid, digest, {"notify": 1})
    ]


async def test_code_that_cannot_replay_leaves_it_and_code_that_can_moves_it_onto_its_manifest_and_finishes(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    eids = await start(database_url, "before", "o1", "o2")
    steps = (
        "SELECT step, attempt, exit IS NOT NULL FROM actor_workflow_step ORDER BY execution_id, step, attempt"
    )
    recorded = await peek.rows(steps)
    assert recorded == [("nap", 1, False), ("reserve", 1, True)] * 2

    refusing = depot.make_app("step_removed", database_url)
    async with refusing.relay() as relay:
        await clock.advance(timedelta(hours=1, seconds=1))
        await settle(refusing, relay)
    assert (
        await peek.rows("SELECT status, outcome, blocked_reason FROM actor_workflow_executions")
        == [("suspended", None, "step 'ship' (an activity) is no longer declared")] * 2
    )
    assert await peek.rows(steps) == recorded

    # ``after`` adds a step (``notify``) no execution has reached: it can replay them.
    app = depot.make_app("after", database_url)
    async with app.relay() as relay, app.client() as client:
        await clock.advance(timedelta(seconds=61))  # the refusing runner's recheck interval
        for order, eid in zip(("o1", "o2"), eids, strict=True):
            result = await client.run(ship_of("after"), eid, tenant="acme").result(timeout=20)
            assert result == Success(Shipped(order=order, slot=10, carrier="post", notified=False))
        await settle(app, relay)
    assert (
        await peek.rows(
            "SELECT status, outcome, blocked_reason, manifest_hash FROM actor_workflow_executions"
        )
        == [("finished", "succeeded", None, manifest.of(ship_of("after"))[1])] * 2
    )
    # reserve was not rerun; the old executions took the old path (no notify: they predate it)
    assert depot.CALLS == {"reserve:o1": 1, "reserve:o2": 1, "ship:o1": 1, "ship:o2": 1}
    assert await peek.rows("SELECT step, count(*) FROM actor_workflow_step GROUP BY step ORDER BY step") == [
        ("nap", 2), ("reserve", 2), ("ship", 2)
    ]  # fmt: skip


async def test_version_markers_old_executions_take_the_old_path_new_ones_the_new_and_both_finish(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    [old] = await start(database_url, "before", "old")
    app = depot.make_app("after", database_url)
    async with app.relay() as relay, app.client() as client:
        handle = client.actor(depot.VARIANTS["after"][0], "d1", tenant="acme")
        new = await handle.start(ship_of("after"), Order(id="new"))
        # a repeated keyed start attaches to the old execution and never rewrites its markers
        again = await handle.start(ship_of("after"), Order(id="old"))
        assert again.execution_id == old
        await settle(app, relay)
        markers = "SELECT key, versions FROM actor_workflow_executions ORDER BY key"
        assert await peek.rows(markers) == [("new", {"notify": 1}), ("old", {})]
        await clock.advance(timedelta(hours=1, seconds=1))
        assert await again.result(timeout=20) == Success(Shipped(order="old", slot=10, carrier="post"))
        assert await new.result(timeout=20) == Success(
            Shipped(order="new", slot=10, carrier="post", notified=True)
        )
    assert depot.CALLS == {"reserve:old": 1, "reserve:new": 1, "ship:old": 1, "ship:new": 1, "notify:new": 1}
    assert await peek.rows(markers) == [("new", {"notify": 1}), ("old", {})]
