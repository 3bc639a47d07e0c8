"""Workflows that exercise the interpreter's corners: races, akter.all, waits, gated activities,
derived command ids, defects. Used in process by the tests and by the relay processes they start
(``akter relay tests.apps.flows:app``)."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta

import attrs
from returns.maybe import Nothing, Some

import akter


@attrs.frozen
class Board:
    effects: tuple[str, ...] = ()
    callers: tuple[str, ...] = ()


@attrs.frozen
class Signal:
    name: str
    value: int = 0


@attrs.frozen
class Emit:
    name: str
    value: int = 0


@attrs.frozen
class Job:
    name: str
    seconds: int = 60
    seconds2: int = 120


@attrs.frozen
class Done:
    summary: str


@attrs.frozen
class Effect:
    text: str


def _policy(caller: akter.Caller, command: akter.Command) -> bool:  # type: ignore[type-arg]
    """Users listed in AKTER_TEST_REVOKED have lost access (read when the command arrives)."""
    revoked = os.environ.get("AKTER_TEST_REVOKED", "").split(",")
    return not (isinstance(caller, akter.User) and caller.subject in revoked)


Flows = akter.Actor("Flows", state=Board, events=[Signal], access=_policy)
Ledger = akter.Actor("Ledger", state=Board, access=_policy)


@Flows.command
def emit(turn: akter.Turn[Board], cmd: Emit) -> None:
    turn.emit(Signal(name=cmd.name, value=cmd.value))


@Ledger.command
def record(turn: akter.Turn[Board], cmd: Effect) -> int:
    """One effect per command id: a rerun attempt with the same derived id replays this."""
    caller = turn.caller
    behalf = caller.on_behalf_of if isinstance(caller, akter.System) else None
    who = f"{caller.key}:{behalf.key if behalf is not None else '-'}"
    turn.state = Board(
        effects=(*turn.state.effects, cmd.text), callers=(*turn.state.callers, f"{turn.ref.tenant}|{who}")
    )
    return len(turn.state.effects)


#: process-local gates that hold an activity until a test opens them, by name
GATES: dict[str, asyncio.Event] = {}
CALLS: dict[str, int] = {}


def gate(name: str) -> asyncio.Event:
    return GATES.setdefault(name, asyncio.Event())


async def held(name: str) -> str:
    CALLS[name] = CALLS.get(name, 0) + 1
    await gate(name).wait()
    return name


def plain(name: str) -> str:
    CALLS[name] = CALLS.get(name, 0) + 1
    return name


async def write_ledger(name: str) -> int:
    """Sends two commands with derived ids; a rerun of the attempt repeats both ids."""
    ctx = akter.activity_context()
    CALLS[name] = CALLS.get(name, 0) + 1
    ledger = ctx.client.actor(Ledger, f"ledger-{name}")
    try:
        await ledger.send(record, Effect(f"{name}-a"))
        result = await ledger.send(record, Effect(f"{name}-b"))
    except akter.ActivityOutcomeUnknown:
        if SWALLOW_UNKNOWN:
            return -1  # user code that hides the error: the outcome stays unknown all the same
        raise
    return int(result.unwrap())


#: set by a test: write_ledger catches ActivityOutcomeUnknown and returns normally
SWALLOW_UNKNOWN = False


# ---- races and all ------------------------------------------------------------------------

Racing = Flows.workflow("Racing", input=Job, output=Done)
signal_in = Racing.wait("signal", Signal)
deadline = Racing.sleep("deadline")
first = Racing.race("signal-or-deadline")
slow = Racing.activity("slow", success=str)


@Racing.body
async def racing(wf: akter.WorkflowContext, job: Job) -> Done:
    outcome = await first.run(
        signal_in(where=lambda s: s.name == job.name), deadline(timedelta(seconds=job.seconds))
    )
    label = f"signal {outcome.unwrap().value}" if isinstance(outcome, Some) else "deadline"
    after = await slow(plain, f"{job.name}-after")
    return Done(f"{label}; {after}")


Both = Flows.workflow("Both", input=Job, output=Done)
nap_a = Both.sleep("nap-a")
nap_b = Both.sleep("nap-b")
left = Both.activity("left", success=str)
right = Both.activity("right", success=str)


@Both.body
async def both(wf: akter.WorkflowContext, job: Job) -> Done:
    a, b = await akter.all(left(plain, f"{job.name}-left"), right(plain, f"{job.name}-right"))
    await akter.all(nap_a(timedelta(seconds=job.seconds)), nap_b(timedelta(seconds=job.seconds2)))
    return Done(f"{a}+{b}")


# ---- waits beside activities, sequential waits -------------------------------------------

Watch = Flows.workflow("Watch", input=Job, output=Done)
before = Watch.activity("before", success=str)
beside = Watch.activity("beside", success=str)
w1 = Watch.wait("first", Signal)
w2 = Watch.wait("second", Signal)


@Watch.body
async def watch(wf: akter.WorkflowContext, job: Job) -> Done:
    await before(held, f"{job.name}-before")
    got, _ = await akter.all(w1(where=lambda s: s.name == job.name), beside(held, f"{job.name}-beside"))
    second = await w2(where=lambda s: s.name == job.name, timeout=timedelta(seconds=job.seconds))
    values = [m.unwrap().value for m in (got, second) if m is not Nothing]
    return Done(",".join(str(v) for v in values) + ("" if second is not Nothing else ";timeout"))


# ---- derived ids, interrupts with compensation ---------------------------------------------

Book = Flows.workflow("Book", input=Job, output=Done)
# an unknown outcome fails this one at once (``on_unknown="fail"``); Settle's ledger step keeps the
# default: its execution needs attention, and a person resolves it
ledger_step = Book.activity("ledger", success=int, retry=akter.Retry(times=2), on_unknown="fail")
hold = Book.activity("hold", success=str)
undo = Book.activity("undo", success=str)
rest = Book.sleep("rest")


@Book.body
async def book(wf: akter.WorkflowContext, job: Job) -> Done:
    n = await wf.compensate(
        ledger_step(write_ledger, job.name), undo=lambda _: undo(plain, f"{job.name}-undo")
    )
    await hold(held, f"{job.name}-hold")
    await rest(timedelta(seconds=job.seconds))
    return Done(f"ledger {n}; principal {wf.principal!r}; tenant {wf.ref.tenant}")


@Flows.command
def kickoff(turn: akter.Turn[Board], cmd: Emit) -> str:
    """Starts a Racing execution and emits the signal it waits for, in one turn."""
    execution_id = turn.start(Racing, Job(cmd.name, seconds=600))
    turn.emit(Signal(name=cmd.name, value=cmd.value))
    if cmd.value < 0:
        raise ValueError("a negative signal: the whole turn, start included, rolls back")
    return execution_id


# ---- recovery across processes ---------------------------------------------------------------

Settle = Flows.workflow("Settle", input=Job, output=Done)
settle_nap = Settle.sleep("nap")
settle_ledger = Settle.activity("ledger", success=int)


@Settle.body
async def settle(wf: akter.WorkflowContext, job: Job) -> Done:
    if job.seconds:
        await settle_nap(timedelta(seconds=job.seconds))
    n = await settle_ledger(write_ledger, job.name)
    return Done(f"ledger {n}; principal {wf.principal!r}; tenant {wf.ref.tenant}")


# ---- defects -----------------------------------------------------------------------------

Broken = Flows.workflow("Broken", input=Job, output=Done)
fine = Broken.activity("fine", success=str)


@Broken.body
async def broken(wf: akter.WorkflowContext, job: Job) -> Done:
    if job.name == "asyncio":
        await asyncio.sleep(0)
    elif job.name == "send":
        await akter.activity_context().client.actor(Ledger, "x").send(record, Effect("from body"))
    elif job.name == "unregistered":
        await Broken.activity("made-inside")(plain, "x")
    elif job.name == "bug":
        raise ZeroDivisionError("a bug in the body")
    return Done(await fine(plain, job.name))


app = akter.App([Flows, Ledger])


def make_app(database_url: str) -> akter.App:
    return akter.App([Flows, Ledger], database_url=database_url)
