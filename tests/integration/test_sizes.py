"""Size caps: an oversized command payload, event, staged intent, workflow input or activity
result gets its typed error and nothing of it is written. Every count is read through a second
connection (``peek``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from returns.result import Failure, Success

import akter
from akter import codec
from tests.apps import sizes
from tests.apps.sizes import Blob, Box, Fill, Small, emit, forward, keep, start_fill, take
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet

MIB = 1024 * 1024


@pytest.fixture
async def app(database_url: str) -> AsyncIterator[akter.App]:
    app = sizes.make_app(database_url)
    yield app
    await app.close()


def _blob_encoding_to(size: int) -> Blob:
    """A Blob whose canonical JSON is exactly ``size`` bytes."""
    n = size
    while len(codec.canonical_json(codec.to_primitive(Blob.of(n)))) > size:
        n -= 1
    blob = Blob.of(n)
    assert len(codec.canonical_json(codec.to_primitive(blob))) == size
    return blob


async def test_a_payload_over_the_cap_is_refused_at_the_door_and_writes_nothing(
    app: akter.App, peek: Peek
) -> None:
    async with app.client() as client:
        box = client.actor(Box, "b1", tenant="acme")
        with pytest.raises(akter.PayloadTooLarge) as info:
            await box.send(keep, Blob.of(MIB))
        assert isinstance(info.value, akter.InvalidInput)
        assert info.value.limit == 256 * 1024
        assert info.value.size > MIB
        small = client.actor(Small, "s1", tenant="acme")
        assert await small.send(take, _blob_encoding_to(1024)) == Success(None)  # at the cap: fine
        with pytest.raises(akter.PayloadTooLarge, match="over its limit of 1024"):
            await small.send(take, _blob_encoding_to(1025))
    assert await peek.count("actor_generations", "b1") == 0
    assert await peek.count("actor_receipts", "b1") == 0
    assert await peek.count("actor_receipts", "s1") == 1  # only the send at the cap


async def test_an_event_over_the_cap_rolls_the_turn_back(app: akter.App, peek: Peek) -> None:
    async with app.client() as client:
        box = client.actor(Box, "b1", tenant="acme")
        with pytest.raises(akter.EventTooLarge) as info:
            await box.send(emit, Blob(size=MIB))  # a small payload, a large event
        assert (info.value.tag, info.value.limit) == ("Stored", 256 * 1024)
        assert await box.send(emit, Blob(size=10)) == Success(None)  # the actor is unharmed
    assert await peek.count("actor_events", "b1") == 1
    assert await peek.count("actor_receipts", "b1") == 1
    assert await peek.value("SELECT sum(octet_length(value)) FROM actor_events") < 100


async def test_a_turn_staging_an_intent_over_the_receivers_cap_fails_and_stages_nothing(
    app: akter.App, peek: Peek
) -> None:
    async with app.client() as client:
        box = client.actor(Box, "b1", tenant="acme")
        with pytest.raises(akter.Defect, match="PayloadTooLarge") as info:
            await box.send(forward, Blob(size=2000))  # Small takes at most 1024 bytes
        assert info.value.error_type == "PayloadTooLarge"
        assert await box.send(forward, Blob(size=100)) == Success(None)
    assert await peek.count("actor_outbox") == 1
    assert await peek.count("actor_receipts", "b1") == 1


async def test_a_workflow_input_over_the_cap_starts_nothing(app: akter.App, peek: Peek) -> None:
    async with app.client() as client:
        box = client.actor(Box, "b1", tenant="acme")
        with pytest.raises(akter.PayloadTooLarge, match=r"Box\.Fill"):
            await box.start(Fill, Blob.of(MIB))
        with pytest.raises(akter.Defect, match="PayloadTooLarge"):
            await box.send(start_fill, Blob(size=MIB))  # Turn.start in a handler
    assert await peek.count("actor_workflow_executions") == 0
    assert await peek.count("actor_outbox") == 0
    assert await peek.count("actor_receipts") == 0


async def test_an_activity_result_over_the_cap_is_the_attempts_defect(app: akter.App, peek: Peek) -> None:
    async with app.relay() as relay, app.client() as client:
        run = await client.actor(Box, "b1", tenant="acme").start(Fill, Blob(size=MIB))
        result = await run.result(timeout=60)
        await quiet(app, relay)
    assert isinstance(result, Failure)
    error = result.failure()
    assert isinstance(error, akter.Defect)
    assert error.error_type == "ResultTooLarge"
    assert "Box.Fill.fetch" in str(error)
    [(exit_, size)] = await peek.rows("SELECT exit, octet_length(exit) FROM actor_workflow_step")
    assert size < 1000  # the attempt records why, never the value
    assert codec.decode_primitive(bytes(exit_))["defect"]["type"] == "ResultTooLarge"
    assert await peek.value("SELECT outcome FROM actor_workflow_executions") == "defect"
