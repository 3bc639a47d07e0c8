"""Actors for the outbox and relay tests: a ``Sender`` that stages intents as told, and a
``Receiver`` that records what reached it. ``app`` is what ``akter relay tests.apps.relay_app:app``
runs in the processes the tests start (its database comes from ``AKTER_DATABASE_URL``)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import attrs

import akter


@attrs.frozen
class SenderState:
    staged: int = 0


@attrs.frozen
class ReceiverState:
    got: tuple[int, ...] = ()


@attrs.frozen
class Ping:
    n: int


@attrs.frozen
class Got:
    n: int


@attrs.frozen
class Stage:
    """What the sender's turn stages: ``count`` pings ``n, n+1, ...`` to ``target``."""

    target: str
    n: int = 0
    count: int = 1
    command: str = "receive"
    after_ms: int | None = None
    at: datetime | None = None
    key: str | None = None
    cancel: str | None = None
    fail: bool = False
    explode: bool = False


@attrs.frozen(auto_exc=True)
class Refused(Exception):
    reason: str


Sender = akter.Actor("Sender", state=SenderState)
Receiver = akter.Actor("Receiver", state=ReceiverState, events=[Got])

#: (command id, caller, n) of every receiver turn that ran in this process
DELIVERIES: list[tuple[str, akter.Caller, int]] = []
#: how many more times ``flaky`` fails with a defect before it succeeds (in this process)
FLAKY: dict[str, int] = {"failures": 0}


@Receiver.command
def receive(turn: akter.Turn[ReceiverState], ping: Ping) -> int:
    DELIVERIES.append((turn.command_id, turn.caller, ping.n))
    turn.state = ReceiverState(got=(*turn.state.got, ping.n))
    turn.emit(Got(ping.n))
    return len(turn.state.got)


@Receiver.command
def flaky(turn: akter.Turn[ReceiverState], ping: Ping) -> None:
    DELIVERIES.append((turn.command_id, turn.caller, ping.n))
    if FLAKY["failures"] > 0:
        FLAKY["failures"] -= 1
        raise RuntimeError(f"flaky receiver failed on {ping.n}")
    turn.state = ReceiverState(got=(*turn.state.got, ping.n))


@Receiver.command(errors=[Refused])
def refuse(turn: akter.Turn[ReceiverState], ping: Ping) -> None:
    DELIVERIES.append((turn.command_id, turn.caller, ping.n))
    raise Refused(reason=f"no {ping.n}")


RECEIVER_COMMANDS: dict[str, akter.Command[ReceiverState, Ping, Any]] = {
    "receive": receive,
    "flaky": flaky,
    "refuse": refuse,
}


@Sender.command(errors=[Refused])
def stage(turn: akter.Turn[SenderState], cmd: Stage) -> int:
    if cmd.cancel is not None:
        turn.cancel(cmd.cancel)
    command = RECEIVER_COMMANDS[cmd.command]
    after = None if cmd.after_ms is None else timedelta(milliseconds=cmd.after_ms)
    for i in range(cmd.count):
        turn.send(cmd.target, command, Ping(cmd.n + i), after=after, at=cmd.at, key=cmd.key)
    turn.state = SenderState(staged=turn.state.staged + cmd.count)
    if cmd.fail:
        raise Refused(reason="the sender changed its mind")
    if cmd.explode:
        raise RuntimeError("the sender has a bug")
    return turn.state.staged


app = akter.App([Sender, Receiver])


def make_app(database_url: str) -> akter.App:
    return akter.App([Sender, Receiver], database_url=database_url)
