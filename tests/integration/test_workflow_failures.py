"""Bad input and bad bodies: each a clear typed error; nothing is lost and nothing guessed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from returns.result import Failure, Success

import akter
from akter.errors import EffectDefect, InvalidExecutionKey
from akter.ids import ExecutionId
from tests.apps import flows
from tests.apps.flows import Book, Broken, Done, Flows, Job, Racing
from tests.apps.shop import Order, Ship, Shop
from tests.apps.shop import make_app as shop_app
from tests.integration.conftest import Peek
from tests.integration.workflow_support import running


@pytest.fixture
async def env(database_url: str) -> AsyncIterator[tuple[akter.App, Any, Any]]:
    app = flows.make_app(database_url)
    async with running(app) as (relay, client):
        yield app, relay, client


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("asyncio", "awaited a bare yield"),
        ("send", "activity_context() is only available inside an activity"),
        ("unregistered", "unregistered step 'made-inside'"),
    ],
)
async def test_a_body_that_leaves_the_effect_world_fails_with_effect_defect(
    env: Any, name: str, message: str
) -> None:
    _, _, client = env
    run = await client.actor(Flows, "f1", tenant="acme").start(Broken, Job(name))
    result = await run.result(timeout=60)
    assert isinstance(result, Failure), result
    assert isinstance(result.failure(), akter.Defect | EffectDefect)
    assert message in str(result.failure())
    assert (await run.poll()).outcome == "defect"
    assert "from body" not in flows.CALLS  # nothing was sent from the body


async def test_a_bug_in_the_body_is_a_recorded_defect(env: Any) -> None:
    _, _, client = env
    run = await client.actor(Flows, "f1", tenant="acme").start(Broken, Job("bug"))
    result = await run.result(timeout=60)
    assert isinstance(result, Failure)
    assert "a bug in the body" in str(result.failure())


async def test_a_healthy_body_of_the_same_workflow_succeeds(env: Any) -> None:
    _, _, client = env
    run = await client.actor(Flows, "f1", tenant="acme").start(Broken, Job("ok"))
    assert await run.result(timeout=60) == Success(Done("ok"))


async def test_oversized_key_is_refused_with_its_byte_count(database_url: str, peek: Peek) -> None:
    async with shop_app(database_url).client() as client:
        with pytest.raises(InvalidExecutionKey) as info:
            await client.actor(Shop, "s1", tenant="acme").start(Ship, Order(id="é" * 129))
    assert info.value.size == 258
    assert await peek.count("actor_workflow_executions") == 0
    assert await peek.count("actor_receipts") == 0


async def test_malformed_foreign_and_other_member_ids_are_refused(env: Any) -> None:
    _, _, client = env
    handle = client.actor(Flows, "f1", tenant="acme")
    run = await handle.start(Book, Job("ids", seconds=1))
    for bad in ["", "x1.!!!", "v1.1.2.3", "x1." + "A" * 2000, run.execution_id + "A"]:
        with pytest.raises(akter.InvalidExecutionId):
            client.run(Book, bad, tenant="acme")
    with pytest.raises(akter.InvalidExecutionId, match="another tenant"):
        client.run(Book, run.execution_id, tenant="globex")
    with pytest.raises(akter.InvalidExecutionId, match="is not of"):
        client.run(Racing, run.execution_id, tenant="acme")
    with pytest.raises(akter.InvalidExecutionId, match="not owned by"):
        client.actor(Flows, "f2", tenant="acme").run(Book, run.execution_id)
    assert client.run(Book, run.execution_id, tenant="acme").execution_id == run.execution_id


async def test_interrupting_an_unknown_execution_is_refused_and_changes_nothing(env: Any, peek: Peek) -> None:
    _, _, client = env
    handle = client.actor(Flows, "f1", tenant="acme")
    run = await handle.start(Book, Job("gone", seconds=1))
    del run
    other_id = ExecutionId(handle.ref, "Racing", "never-started")
    other = akter.Run(client.sender, client.results, Racing, other_id)
    with pytest.raises(akter.InvalidExecutionId):
        await other.interrupt()
    assert await peek.value("SELECT count(*) FROM actor_workflow_executions WHERE interrupt") == 0
    assert (
        await peek.value("SELECT count(*) FROM actor_receipts WHERE command LIKE 'akter.wf.interrupt%%'") == 0
    )
    with pytest.raises(akter.InvalidExecutionId):
        await other.poll()
    # let the started execution's held activity finish: leaving the relay drains what runs
    flows.gate("gone-hold").set()
