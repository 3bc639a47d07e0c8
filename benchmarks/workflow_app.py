"""The akter app that ``benchmarks/workflows.py`` measures (and ``akter relay workflow_app:app`` runs).

Every activity is a trivial ``async def`` (no worker-thread hop), so what is measured is the
engine: the step rows, the fences, the timers, the passes. ``ON_STAMP`` tells the benchmark, in
the process that runs the passes, when a stamping activity's body ran (``time.perf_counter``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import timedelta

import attrs
from returns.maybe import Some

import akter

#: step activities per workflow in the throughput phases, and steps in the replay phase
STEPS = 10
LONG_STEPS = 1000
#: waits after the 1,000 steps, each resumed by its own event (n = LONG_EVENT_BASE + k)
LONG_WAITS = 10
LONG_EVENT_BASE = 900_000_000


@attrs.frozen
class Book:
    orders: int = 0


@attrs.frozen
class Paid:
    n: int


@attrs.frozen
class Pay:
    n: int


@attrs.frozen
class Job:
    n: int
    #: a sleep's length in milliseconds (Nap) / a wait's timeout in seconds (Await)
    ms: int = 0


Orders = akter.Actor("Orders", state=Book, events=[Paid])


@Orders.command
def pay(turn: akter.Turn[Book], cmd: Pay) -> None:
    turn.emit(Paid(n=cmd.n))


#: called with ((job n, activity name), perf_counter) when a stamping activity's body runs
ON_STAMP: Callable[[tuple[int, str], float], None] | None = None


async def work(n: int) -> int:
    return n


async def stamp(n: int, name: str) -> int:
    at = time.perf_counter()
    if ON_STAMP is not None:
        ON_STAMP((n, name), at)
    return n


def work_sync(n: int) -> int:
    return n


# ---- Ten: the 10-activity workflow of the sequential and concurrent phases --------------------

Ten = Orders.workflow("Ten", input=Job, output=int)
ten_steps = [Ten.activity(f"a{i}", success=int) for i in range(STEPS)]


@Ten.body
async def ten(wf: akter.WorkflowContext, job: Job) -> int:
    total = 0
    for step in ten_steps:
        total += await step(work, job.n)
    return total


# ---- One: a single activity, the baseline of the per-step figure ----------------------------------

One = Orders.workflow("One", input=Job, output=int)
one_step = One.activity("a0", success=int)


@One.body
async def one(wf: akter.WorkflowContext, job: Job) -> int:
    return await one_step(work, job.n)


# ---- TenSync: the same with plain (sync) functions, which run in a worker thread ---------------

TenSync = Orders.workflow("TenSync", input=Job, output=int)
ten_sync_steps = [TenSync.activity(f"a{i}", success=int) for i in range(STEPS)]


@TenSync.body
async def ten_sync(wf: akter.WorkflowContext, job: Job) -> int:
    total = 0
    for step in ten_sync_steps:
        total += await step(work_sync, job.n)
    return total


# ---- Zero: no activity at all, the fixed cost of an execution -----------------------------------

Zero = Orders.workflow("Zero", input=Job, output=int)


@Zero.body
async def zero(wf: akter.WorkflowContext, job: Job) -> int:
    return job.n


# ---- Nap / Await: an activity, a sleep or a wait, an activity -----------------------------------

Nap = Orders.workflow("Nap", input=Job, output=int)
nap_before = Nap.activity("before", success=int)
nap = Nap.sleep("nap")
nap_after = Nap.activity("after", success=int)


@Nap.body
async def nap_body(wf: akter.WorkflowContext, job: Job) -> int:
    await nap_before(stamp, job.n, "before")
    if job.ms >= 0:
        await nap(timedelta(milliseconds=job.ms))
    return await nap_after(stamp, job.n, "after")


Await = Orders.workflow("Await", input=Job, output=int)
await_before = Await.activity("before", success=int)
paid = Await.wait("paid", Paid)
await_after = Await.activity("after", success=int)


@Await.body
async def await_body(wf: akter.WorkflowContext, job: Job) -> int:
    await await_before(stamp, job.n, "before")
    match await paid(where=lambda e: e.n == job.n, timeout=timedelta(seconds=job.ms or 60)):
        case Some(event):
            got = event.n
        case _:
            got = -1
    await await_after(stamp, job.n, "after")
    return got


# ---- Long: 1,000 recorded steps, then waits, each resumed by an event (the replay phase) --------

Long = Orders.workflow("Long", input=Job, output=int)
long_steps = [Long.activity(f"s{i:04d}", success=int) for i in range(LONG_STEPS)]
long_waits = [Long.wait(f"w{k}", Paid) for k in range(LONG_WAITS)]
long_after = [Long.activity(f"after{k}", success=int) for k in range(LONG_WAITS)]


@Long.body
async def long_body(wf: akter.WorkflowContext, job: Job) -> int:
    total = 0
    for step in long_steps:
        total += await step(work, job.n)
    for k in range(LONG_WAITS):
        await long_waits[k](where=lambda e, k=k: e.n == LONG_EVENT_BASE + k)
        await long_after[k](stamp, k, f"long-after-{k}")
    return total


# ---- Parked: suspended on a far-future sleep (the memory phase) ----------------------------------

Parked = Orders.workflow("Parked", input=Job, output=int)
parked_sleep = Parked.sleep("far")


@Parked.body
async def parked_body(wf: akter.WorkflowContext, job: Job) -> int:
    await parked_sleep(timedelta(days=30))
    return job.n


def make_app(database_url: str | None = None, pool_size: int = 10) -> akter.App:
    return akter.App(
        [Orders], database_url=database_url or os.environ.get("AKTER_DATABASE_URL"), pool_size=pool_size
    )


#: what ``akter relay workflow_app:app`` runs (AKTER_DATABASE_URL names the database)
app = akter.App([Orders], pool_size=int(os.environ.get("AKTER_BENCH_POOL", "10")))
