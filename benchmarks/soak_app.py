"""The akter app that ``benchmarks/soak.py`` runs under chaos (``akter relay soak_app:app``).

One workflow, ``Soak``, on ``Shop`` actors: an activity, a short durable sleep, an activity, a
wait for a ``Go`` event that the soak driver sends, and a last activity. Every activity's real
effect is one command to a ``Ledger`` actor sent through ``akter.activity_context().client``, so
its command id is derived (execution, step, attempt, ordinal): a rerun of an attempt whose runner
was killed repeats the id and the ledger's receipt absorbs it. Each logical effect has a ledger
actor of its own (``<job>.<step>``) and each committed ledger turn emits one ``Booked`` event, so
``actor_generations.event_seq`` of a ledger actor is the number of times that effect really
happened: 1 is right, 0 is a lost effect, 2 or more a duplicated one. The soak reads it with SQL.

Some jobs' ``charge`` fails on its first attempt *before* sending anything (a defect), so the
retry path runs under chaos too without making a second effect.
"""

from __future__ import annotations

import os
from datetime import timedelta

import attrs
from returns.maybe import Some

import akter

#: the activity steps of ``Soak``, in order: each makes one ledger effect per execution
EFFECTS = ("reserve", "charge", "ship")
#: jobs whose ``charge`` fails once before its effect (every FLAKY-th job)
FLAKY = 7
TENANT = "soak"
#: a job whose ``ship`` books its effect twice (a second command, so a second id): the soak's
#: self-check that a duplicate is seen (``--plant-duplicate``); -1, the default, plants none
PLANTED = int(os.environ.get("AKTER_SOAK_PLANT_DUPLICATE", "-1"))


@attrs.frozen
class Till:
    opened: int = 0


@attrs.frozen
class Go:
    n: int


@attrs.frozen
class Job:
    n: int
    #: the durable sleep between reserve and charge, in milliseconds
    nap_ms: int
    #: how long the wait for ``Go`` may take before the execution fails with ``NoGo``
    wait_s: int


@attrs.frozen
class Shipped:
    n: int


@attrs.frozen(auto_exc=True)
class NoGo(Exception):  # the wait timed out: the soak counts it as an anomaly (the event was sent)
    n: int


@attrs.frozen
class Tally:
    booked: int = 0


@attrs.frozen
class Booked:
    job: int
    effect: str
    attempt: int


@attrs.frozen
class Book:
    job: int
    effect: str
    attempt: int


Shop = akter.Actor("Shop", state=Till, events=[Go])
Ledger = akter.Actor("Ledger", state=Tally, events=[Booked])


@Shop.command
def go(turn: akter.Turn[Till], cmd: Go) -> None:
    turn.emit(cmd)


@Ledger.command
def book(turn: akter.Turn[Tally], cmd: Book) -> int:
    turn.state = Tally(booked=turn.state.booked + 1)
    turn.emit(Booked(job=cmd.job, effect=cmd.effect, attempt=cmd.attempt))
    return turn.state.booked


def job_key(job: Job) -> str:
    return f"j{job.n}"


def ledger_id(n: int, effect: str) -> str:
    return f"j{n}.{effect}"


async def effect(n: int, name: str) -> int:
    """The real effect of an activity: one ledger command with a derived id."""
    ctx = akter.activity_context()
    if name == "charge" and n % FLAKY == 0 and ctx.attempt == 1:
        raise RuntimeError(f"job {n}: charge fails on its first attempt (before its effect)")
    ledger = ctx.client.actor(Ledger, ledger_id(n, name))
    outcome = await ledger.send(book, Book(job=n, effect=name, attempt=ctx.attempt))
    if n == PLANTED and name == "ship":
        outcome = await ledger.send(book, Book(job=n, effect=name, attempt=ctx.attempt))
    return int(outcome.unwrap())


retry = akter.Retry.exponential(timedelta(milliseconds=200), times=5, cap=timedelta(seconds=2))
Soak = Shop.workflow("Soak", input=Job, output=Shipped, errors=[NoGo], key=job_key)
reserve = Soak.activity("reserve", success=int, retry=retry)
nap = Soak.sleep("nap")
charge = Soak.activity("charge", success=int, retry=retry)
gate = Soak.wait("go", Go)
ship = Soak.activity("ship", success=int, retry=retry)


@Soak.body
async def soak(wf: akter.WorkflowContext, job: Job) -> Shipped:
    await reserve(effect, job.n, "reserve")
    await nap(timedelta(milliseconds=job.nap_ms))
    await charge(effect, job.n, "charge")
    match await gate(where=lambda e: e.n == job.n, timeout=timedelta(seconds=job.wait_s)):
        case Some(_):
            pass
        case _:
            raise NoGo(n=job.n)
    await ship(effect, job.n, "ship")
    return Shipped(n=job.n)


#: what ``akter relay soak_app:app`` runs (AKTER_DATABASE_URL names the database)
app = akter.App([Shop, Ledger])
