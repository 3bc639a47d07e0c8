"""Workflows at the edges of the promises: loops over a step, abandoned waits, events out of time
order, interrupts during an activity, failing compensations. Used in process by
``tests/integration/test_workflow_edges.py`` and by the relay processes it starts
(``akter relay tests.apps.edges:app``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from datetime import timedelta
from pathlib import Path

import attrs
from returns.maybe import Some

import akter


@attrs.frozen
class Book:
    notes: int = 0


@attrs.frozen
class Note:
    name: str
    value: int = 0


@attrs.frozen
class Send:
    name: str
    value: int = 0


@attrs.frozen
class Job:
    name: str
    count: int = 3
    seconds: int = 1
    timeout: int = 10


@attrs.frozen
class Done:
    summary: str


@attrs.frozen
class Refused(Exception):
    reason: str


@attrs.frozen
class Effects:
    texts: tuple[str, ...] = ()


@attrs.frozen
class Effect:
    text: str


Edges = akter.Actor("Edges", state=Book, events=[Note])
Ledger = akter.Actor("EdgeLedger", state=Effects)


@Edges.command
def note(turn: akter.Turn[Book], cmd: Send) -> None:
    turn.emit(Note(name=cmd.name, value=cmd.value))


@Ledger.command
def record(turn: akter.Turn[Effects], cmd: Effect) -> int:
    """Records one effect per command id: a rerun attempt with the same derived id replays it."""
    turn.state = Effects(texts=(*turn.state.texts, cmd.text))
    return len(turn.state.texts)


#: process-local counters and gates
CALLS: dict[str, int] = {}
GATES: dict[str, asyncio.Event] = {}
THREAD_GATES: dict[str, threading.Event] = {}
THREAD_STARTED: dict[str, threading.Event] = {}
STARTED: dict[str, asyncio.Event] = {}


def started(name: str) -> asyncio.Event:
    return STARTED.setdefault(name, asyncio.Event())


def gate(name: str) -> asyncio.Event:
    return GATES.setdefault(name, asyncio.Event())


def thread_gate(name: str) -> threading.Event:
    return THREAD_GATES.setdefault(name, threading.Event())


def _count(name: str) -> None:
    CALLS[name] = CALLS.get(name, 0) + 1


def echo(text: str) -> str:
    """Counts its calls; kills its own process (a real crash, mid-activity) once, when ``text``
    is ``$AKTER_TEST_CRASH_AT`` and the marker file ``$AKTER_TEST_CRASH_MARK`` does not exist."""
    _count(text)
    mark = os.environ.get("AKTER_TEST_CRASH_MARK")
    if mark and text == os.environ.get("AKTER_TEST_CRASH_AT") and not Path(mark).exists():
        Path(mark).write_text(text)
        os.kill(os.getpid(), signal.SIGKILL)
    return text


#: the bank, process-local: account -> balance, and every operation that reached it, in order
BALANCES: dict[str, int] = {}
OPS: list[str] = []


def _apply(kind: str, account: str, amount: int) -> int:
    sign = -1 if kind in ("withdraw", "reverse") else 1
    BALANCES[account] = BALANCES.get(account, 0) + sign * amount
    OPS.append(f"{kind}:{account}:{amount}")
    return BALANCES[account]


async def bank(kind: str, account: str, amount: int) -> int:
    return _apply(kind, account, amount)


async def gated_bank(kind: str, account: str, amount: int) -> int:
    """An async operation held at a gate until the test opens it: cancellable."""
    _count(kind)
    started(kind).set()
    await gate(kind).wait()
    return _apply(kind, account, amount)


def blocking_bank(kind: str, account: str, amount: int) -> int:
    """A sync operation (a worker thread) held until the test opens its gate: not cancellable."""
    _count(kind)
    THREAD_STARTED.setdefault(kind, threading.Event()).set()
    thread_gate(kind).wait(timeout=60)
    return _apply(kind, account, amount)


def fails(text: str) -> str:
    _count(text)
    raise RuntimeError(f"{text} failed")


# ---- a loop over one activity and one sleep ------------------------------------------------

Loop = Edges.workflow("Loop", input=Job, output=Done)
echo_step = Loop.activity("echo", success=str)
nap = Loop.sleep("nap")


@Loop.body
async def loop(wf: akter.WorkflowContext, job: Job) -> Done:
    seen = []
    for i in range(job.count):
        seen.append(await echo_step(echo, f"{job.name}-{i}"))
        await nap(timedelta(seconds=job.seconds))
    return Done(",".join(seen))


# ---- waits given up by a race or an all -----------------------------------------------------

Abandon = Edges.workflow("Abandon", input=Job, output=Done)
hear = Abandon.wait("hear", Note)
short = Abandon.sleep("short")
long = Abandon.sleep("long")
either = Abandon.race("hear-or-short")
boom = Abandon.activity("boom", success=str)


@Abandon.body
async def abandon(wf: akter.WorkflowContext, job: Job) -> Done:
    if job.name.startswith("all"):
        with contextlib.suppress(akter.Defect):
            await akter.all(hear(where=lambda n: n.name == job.name), boom(fails, f"{job.name}-boom"))
    else:
        await either.run(hear(where=lambda n: n.name == job.name), short(timedelta(seconds=job.seconds)))
    await long(timedelta(days=1))
    return Done("slept")


# ---- a wait with a deadline, for events out of time order ---------------------------------

Deadline = Edges.workflow("Deadline", input=Job, output=Done)
until_note = Deadline.wait("note", Note)


@Deadline.body
async def deadline(wf: akter.WorkflowContext, job: Job) -> Done:
    got = await until_note(where=lambda n: n.value > 0, timeout=timedelta(seconds=job.timeout))
    return Done(f"note {got.unwrap().value}" if isinstance(got, Some) else "timeout")


# ---- a wait whose predicate raises --------------------------------------------------------

Picky = Edges.workflow("Picky", input=Job, output=Done)
picky_note = Picky.wait("picky", Note)


def only_positive(n: Note) -> bool:
    if n.value < 0:
        raise ValueError(f"negative value {n.value}")
    return n.value > 0


@Picky.body
async def picky(wf: akter.WorkflowContext, job: Job) -> Done:
    got = await picky_note(where=only_positive)
    return Done(f"note {got.unwrap().value}")


# ---- a wait with no deadline, for the suspension race ---------------------------------------

Listen = Edges.workflow("Listen", input=Job, output=Done)
listen_note = Listen.wait("note", Note)


@Listen.body
async def listen(wf: akter.WorkflowContext, job: Job) -> Done:
    got = await listen_note(where=lambda n: n.name == job.name)
    return Done(f"heard {got.unwrap().value}")


# ---- a money transfer interrupted while its deposit runs ----------------------------------

Transfer = Edges.workflow("Transfer", input=Job, output=Done)
withdraw = Transfer.activity("withdraw", success=int)
deposit = Transfer.activity("deposit", success=int)
refund = Transfer.activity("refund", success=int)
reverse = Transfer.activity("reverse", success=int)
notify = Transfer.activity("notify", success=str)


@Transfer.body
async def transfer(wf: akter.WorkflowContext, job: Job) -> Done:
    amount = job.count
    move = blocking_bank if job.name.startswith("sync") else gated_bank
    await wf.compensate(
        withdraw(bank, "withdraw", "alice", amount), undo=lambda _: refund(bank, "refund", "alice", amount)
    )
    await wf.compensate(
        deposit(move, "deposit", "bob", amount), undo=lambda _: reverse(bank, "reverse", "bob", amount)
    )
    await notify(echo, f"{job.name}-notified")
    return Done("moved")


# ---- compensations that fail ------------------------------------------------------------------

Undo = Edges.workflow("Undo", input=Job, output=Done, errors=[Refused])
forward = Undo.activity("forward", success=str)
undo_fails = Undo.activity("undo-fails", success=str)
undo_ok = Undo.activity("undo-ok", success=str)


@Undo.body
async def undo(wf: akter.WorkflowContext, job: Job) -> Done:
    await wf.compensate(forward(echo, f"{job.name}-1"), undo=lambda _: undo_ok(echo, f"{job.name}-undo-1"))
    if job.name == "non-effect":
        await wf.compensate(forward(echo, f"{job.name}-2"), undo=lambda _: "not an effect")
    else:
        await wf.compensate(
            forward(echo, f"{job.name}-2"), undo=lambda _: undo_fails(fails, f"{job.name}-undo-2")
        )
    raise Refused("the forward work was refused")


# ---- the model workflow of the state-machine test ---------------------------------------------

Model = Edges.workflow("Model", input=Job, output=Done)
effect = Model.activity("effect", success=int, retry=akter.Retry(times=3))
heard = Model.wait("heard", Note)
rest = Model.sleep("rest")


async def ledger_effect(text: str) -> int:
    """One real effect, recorded by the ledger under the attempt's derived command id."""
    ledger = akter.activity_context().client.actor(Ledger, "ledger")
    return int((await ledger.send(record, Effect(text))).unwrap())


@Model.body
async def model(wf: akter.WorkflowContext, job: Job) -> Done:
    await effect(ledger_effect, f"{job.name}-1")
    got = await heard(where=lambda n: n.name == job.name, timeout=timedelta(seconds=job.timeout))
    await rest(timedelta(seconds=job.seconds))
    await effect(ledger_effect, f"{job.name}-2")
    return Done("heard" if isinstance(got, Some) else "timeout")


app = akter.App([Edges, Ledger])


def make_app(database_url: str) -> akter.App:
    return akter.App([Edges, Ledger], database_url=database_url)
