"""A small actor used by akter's own tests (and by the processes those tests start)."""

from __future__ import annotations

import attrs

import akter


@attrs.frozen
class CounterState:
    count: int = 0
    notes: tuple[str, ...] = ()


@attrs.frozen
class Added:
    amount: int
    total: int


@attrs.frozen
class Add:
    amount: int


@attrs.frozen
class Note:
    text: str


@attrs.frozen(auto_exc=True)
class TooMuch(Exception):
    limit: int
    asked: int


Counter = akter.Actor("Counter", state=CounterState, events=[Added], max_state_bytes=4096)

#: how many times each handler body really ran in this process
RUNS: dict[str, int] = {}


def _ran(name: str) -> None:
    RUNS[name] = RUNS.get(name, 0) + 1


@Counter.command
def add(turn: akter.Turn[CounterState], cmd: Add) -> int:
    _ran("add")
    total = turn.state.count + cmd.amount
    turn.state = attrs.evolve(turn.state, count=total)
    turn.emit(Added(amount=cmd.amount, total=total))
    return total


@Counter.command(errors=[TooMuch])
def add_at_most_10(turn: akter.Turn[CounterState], cmd: Add) -> int:
    _ran("add_at_most_10")
    total = turn.state.count + cmd.amount
    turn.state = attrs.evolve(turn.state, count=total)
    turn.emit(Added(amount=cmd.amount, total=total))
    if total > 10:
        raise TooMuch(limit=10, asked=total)
    return total


@Counter.command
def note(turn: akter.Turn[CounterState], cmd: Note) -> None:
    _ran("note")
    turn.state = attrs.evolve(turn.state, notes=(*turn.state.notes, cmd.text))


@Counter.command
def explode(turn: akter.Turn[CounterState], cmd: Add) -> None:
    _ran("explode")
    turn.state = attrs.evolve(turn.state, count=-1)
    turn.emit(Added(amount=0, total=-1))
    raise RuntimeError("the handler has a bug")


@Counter.command(internal=True)
def reset(turn: akter.Turn[CounterState], cmd: Add) -> None:
    _ran("reset")
    turn.state = CounterState(count=cmd.amount)


def make_app(database_url: str) -> akter.App:
    return akter.App([Counter], database_url=database_url)
