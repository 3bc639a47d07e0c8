"""Whatever payload ``turn.send`` accepts, the relay can decode and deliver: a command that takes
``None``, plain values and collections arrive as they were sent; a payload that would not decode
at delivery is refused in the sender's handler, where the bug is, and nothing is staged."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest
from returns.result import Success

import akter
from tests.apps.relay_app import Ping
from tests.integration.conftest import Peek


@attrs.frozen
class Seen:
    payloads: tuple[str, ...] = ()


@attrs.frozen
class Forward:
    """Which of ``PAYLOADS`` the sender stages for the receiver."""

    case: str


Sender = akter.Actor("PayloadSender", state=Seen)
Receiver = akter.Actor("PayloadReceiver", state=Seen)


def _seen(turn: akter.Turn[Seen], payload: object) -> None:
    turn.state = Seen((*turn.state.payloads, repr(payload)))


@Receiver.command
def nothing(turn: akter.Turn[Seen], payload: None) -> None:
    _seen(turn, payload)


@Receiver.command
def number(turn: akter.Turn[Seen], payload: int) -> None:
    _seen(turn, payload)


@Receiver.command
def numbers(turn: akter.Turn[Seen], payload: list[int]) -> None:
    _seen(turn, payload)


@Receiver.command
def maybe_ping(turn: akter.Turn[Seen], payload: Ping | None) -> None:
    _seen(turn, payload)


#: case -> (receiver command, payload the sender stages)
PAYLOADS: dict[str, tuple[akter.Command[Seen, Any, None], object]] = {
    "none": (nothing, None),
    "int": (number, 7),
    "list": (numbers, [1, 2]),
    "optional-some": (maybe_ping, Ping(3)),
    "optional-none": (maybe_ping, None),
    "undecodable": (numbers, "abc"),
}


@Sender.command
def forward(turn: akter.Turn[Seen], cmd: Forward) -> None:
    command, payload = PAYLOADS[cmd.case]
    turn.send("r1", command, payload)


@pytest.fixture
async def app(database_url: str) -> AsyncIterator[akter.App]:
    app = akter.App([Sender, Receiver], database_url=database_url)
    yield app
    await app.close()


@pytest.mark.parametrize("case", ["none", "int", "list", "optional-some", "optional-none"])
async def test_every_payload_send_accepts_is_delivered(app: akter.App, peek: Peek, case: str) -> None:
    async with app.client() as client, app.relay() as relay:
        sent = await client.actor(Sender, "s1", tenant="acme").send(forward, Forward(case))
        assert sent == Success(None)
        async with asyncio.timeout(20):
            await relay.idle()
    assert await peek.rows("SELECT attempts, last_error FROM actor_outbox") == []
    state = bytes(await peek.value("SELECT state FROM actor_state WHERE actor_id = 'r1'"))
    assert akter.codec.decode(state, Seen) == Seen((repr(PAYLOADS[case][1]),))


async def test_a_payload_that_would_not_decode_at_delivery_is_refused_in_the_handler(
    app: akter.App, peek: Peek
) -> None:
    async with app.client() as client:
        with pytest.raises(akter.Defect, match=r"list\[int\] cannot be stored"):
            await client.actor(Sender, "s1", tenant="acme").send(forward, Forward("undecodable"))
    assert await peek.count("actor_outbox") == 0
    assert await peek.count("actor_receipts") == 0
