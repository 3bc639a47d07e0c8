"""Workflows for the deterministic helpers, deadlines, keyed-start policies and continue-as-new.
Used in process by ``tests/integration/test_composed.py`` and by the relay processes it starts
(``akter relay tests.apps.composed:app``)."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from pathlib import Path

import attrs
from returns.maybe import Nothing

import akter


@attrs.frozen
class Tally:
    count: int = 0


@attrs.frozen
class Ping:
    n: int


@attrs.frozen
class Probe:
    name: str
    path: str = ""


@attrs.frozen
class Seen:
    now: str
    uuid: str
    random: float


@attrs.frozen
class Order:
    id: str
    amount: int


@attrs.frozen
class Counted:
    n: int
    total: int = 0
    every: int = 100
    pings: int = 0


Desk = akter.Actor("Desk", state=Tally, events=[Ping])


@Desk.command
def ping(turn: akter.Turn[Tally], cmd: Ping) -> None:
    turn.emit(cmd)


# ---- deterministic helpers ---------------------------------------------------------------------

Clocked = Desk.workflow("Clocked", input=Probe, output=Seen)
note = Clocked.activity("note", success=str)
nap = Clocked.sleep("nap")


def _write(path: str, line: str) -> str:
    if path:
        with Path(path).open("a") as out:
            out.write(line + "\n")
    return line


@Clocked.body
async def clocked(wf: akter.WorkflowContext, probe: Probe) -> Seen:
    wf.log.info("clocked %s starts", probe.name)
    now = await wf.now()
    ident = wf.uuid4()
    rnd = wf.random()
    line = await note(_write, probe.path, f"{now.isoformat()}|{ident}|{rnd!r}")
    wf.log.info("clocked %s noted %s", probe.name, line)
    await nap(timedelta(minutes=5))
    wf.log.info("clocked %s woke", probe.name)
    return Seen(now.isoformat(), str(ident), rnd)


# ---- deadlines ---------------------------------------------------------------------------------

#: released by a test: the gated activity of Bounded returns once set
GATES: dict[str, threading.Event] = {}
UNDONE: list[str] = []

Bounded = Desk.workflow("Bounded", input=Probe, output=str, timeout=timedelta(hours=1))
book = Bounded.activity("book", success=str)
unbook = Bounded.activity("unbook", success=str)
hold = Bounded.activity("hold", success=str)
linger = Bounded.sleep("linger")


async def _booked(name: str) -> str:
    return f"booked {name}"


def _undo(value: str) -> str:
    UNDONE.append(value)
    return value


async def _held(name: str) -> str:
    gate = GATES.setdefault(name, threading.Event())
    while not gate.is_set():  # noqa: ASYNC110 -- a thread's event: the attempt stays cancellable
        await asyncio.sleep(0.01)
    return f"held {name}"


def _unbook(value: str) -> akter.ActivityStep[str]:
    return unbook(_undo, value)  # type: ignore[return-value]


@Bounded.body
async def bounded(wf: akter.WorkflowContext, probe: Probe) -> str:
    await wf.compensate(book(_booked, probe.name), _unbook)
    if probe.path == "hold":
        return await hold(_held, probe.name)
    await linger(timedelta(days=2))
    return "lingered"


# ---- keyed starts --------------------------------------------------------------------------------

Refusing = Desk.workflow("Refusing", input=Order, output=int, key=lambda o: o.id)
Attaching = Desk.workflow(
    "Attaching", input=Order, output=int, key=lambda o: o.id, key_reuse=akter.KeyReuse.ATTACH
)
Rerunning = Desk.workflow(
    "Rerunning", input=Order, output=int, key=lambda o: o.id, key_reuse=akter.KeyReuse.NEW_RUN
)
refuse_wait = Refusing.sleep("wait")


@attrs.frozen
class Two:
    first: Order
    second: Order


@Desk.command
def start_two(turn: akter.Turn[Tally], cmd: Two) -> None:
    turn.start(Refusing, cmd.first)
    turn.start(Refusing, cmd.second)


@Refusing.body
async def refusing(wf: akter.WorkflowContext, order: Order) -> int:
    if order.amount < 0:
        await refuse_wait(timedelta(days=1))
    return order.amount


@Attaching.body
async def attaching(wf: akter.WorkflowContext, order: Order) -> int:
    return order.amount


@Rerunning.body
async def rerunning(wf: akter.WorkflowContext, order: Order) -> int:
    return order.amount * 10 + wf.run_number


# ---- continue-as-new ---------------------------------------------------------------------------

Looping = Desk.workflow("Looping", input=Counted, output=Counted, key=lambda c: "loop")
tick = Looping.sleep("tick")
pinged = Looping.wait("pinged", Ping)


@Looping.body
async def looping(wf: akter.WorkflowContext, c: Counted) -> Counted:
    if c.total == 0:  # one ping per run, waited for after the cursor the last run left
        got = await pinged(timeout=timedelta(days=1))
        pings = c.pings + (0 if got == Nothing else 1)
        if pings == 2:
            return attrs.evolve(c, pings=pings)
        return wf.continue_as_new(attrs.evolve(c, pings=pings))
    n = c.n
    for _ in range(c.every):
        if n == c.total:
            return attrs.evolve(c, n=n)
        await tick(timedelta(0))
        n += 1
    return wf.continue_as_new(attrs.evolve(c, n=n))


# ---- a start with a timeout is a start, for the access policy ----------------------------------


def _admins_start(caller: akter.Caller, command: akter.Command) -> bool:  # type: ignore[type-arg]
    if command is Guarded.start_command:
        return isinstance(caller, akter.User) and caller.subject == "admin"
    return True


Gate = akter.Actor("Gate", state=Tally, access=_admins_start)
Guarded = Gate.workflow("Guarded", input=Probe, output=str)


@Guarded.body
async def guarded(wf: akter.WorkflowContext, probe: Probe) -> str:
    return probe.name


app = akter.App([Desk, Gate])


def make_app(database_url: str) -> akter.App:
    return akter.App([Desk, Gate], database_url=database_url)
