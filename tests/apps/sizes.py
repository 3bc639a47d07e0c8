"""An actor type with default size caps, whose commands, events, workflow input and activity
result carry a blob of a size the test chooses: what the size tests push over the caps."""

from __future__ import annotations

import attrs

import akter


@attrs.frozen
class BoxState:
    n: int = 0


@attrs.frozen
class Blob:
    size: int = 0
    text: str = ""

    @classmethod
    def of(cls, size: int) -> Blob:
        return cls(size=size, text="x" * size)


@attrs.frozen
class Stored:  # an event
    text: str


Box = akter.Actor("Box", state=BoxState, events=[Stored])
#: a receiver with a small payload cap, for intents staged by a Box turn
Small = akter.Actor("Small", state=BoxState, max_payload_bytes=1024)


@Small.command
def take(turn: akter.Turn[BoxState], blob: Blob) -> None:
    turn.state = BoxState(n=turn.state.n + 1)


@Box.command
def keep(turn: akter.Turn[BoxState], blob: Blob) -> int:
    """Stores nothing big: only the payload is large."""
    turn.state = BoxState(n=turn.state.n + 1)
    return turn.state.n


@Box.command
def emit(turn: akter.Turn[BoxState], blob: Blob) -> None:
    """Emits an event as large as asked."""
    turn.state = BoxState(n=turn.state.n + 1)
    turn.emit(Stored("x" * blob.size))


@Box.command
def forward(turn: akter.Turn[BoxState], blob: Blob) -> None:
    """Stages an intent carrying a payload as large as asked to a ``Small``."""
    turn.state = BoxState(n=turn.state.n + 1)
    turn.send(akter.ActorRef(turn.ref.tenant, "Small", "s1"), take, Blob.of(blob.size))


Fill = Box.workflow("Fill", input=Blob, output=int)
fetch = Fill.activity("fetch", success=Blob)


@Box.command
def start_fill(turn: akter.Turn[BoxState], blob: Blob) -> str:
    """Starts ``Fill`` from a turn, with an input as large as asked."""
    turn.state = BoxState(n=turn.state.n + 1)
    return turn.start(Fill, Blob.of(blob.size))


def make_blob(size: int) -> Blob:
    return Blob.of(size)


@Fill.body
async def fill(wf: akter.WorkflowContext, blob: Blob) -> int:
    """An activity whose result is as large as the input's ``size`` asks (the input itself stays
    small: its text is empty)."""
    got = await fetch(make_blob, blob.size)
    return len(got.text)


def make_app(database_url: str) -> akter.App:
    return akter.App([Box, Small], database_url=database_url)
