"""A three-activity workflow for the tests of combined step boundaries (``akter/workflow/engine/combine.py``).

Each activity's body counts its runs: in process (``CALLS``, by ``<name>-<step>``) and, when
``AKTER_DATABASE_URL`` is set (an ``akter relay tests.apps.combining:app`` process), in the
table ``combining_calls`` through a connection of its own, so that a count survives a SIGKILL.
The first step waits on a process-local gate a test may hold (``GATED``)."""

from __future__ import annotations

import asyncio
import os

import attrs
import psycopg

import akter


@attrs.frozen
class Board:
    n: int = 0


@attrs.frozen
class Job:
    name: str


Steps = akter.Actor("Steps", state=Board)
Chain = Steps.workflow("Chain", input=Job, output=str)
first = Chain.activity("first", success=str)
second = Chain.activity("second", success=str)
third = Chain.activity("third", success=str)

CALLS: dict[str, int] = {}
#: names whose first step waits for its gate (``gate(name)``) before it returns
GATED: set[str] = set()
GATES: dict[str, asyncio.Event] = {}


def gate(name: str) -> asyncio.Event:
    return GATES.setdefault(name, asyncio.Event())


async def _count(label: str) -> None:
    CALLS[label] = CALLS.get(label, 0) + 1
    url = os.environ.get("AKTER_DATABASE_URL")
    if url:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute("INSERT INTO combining_calls (label) VALUES (%s)", (label,))


async def step_one(name: str) -> str:
    await _count(f"{name}-first")
    if name in GATED:
        await gate(name).wait()
    return f"{name}-first"


async def step_two(name: str) -> str:
    await _count(f"{name}-second")
    return f"{name}-second"


async def step_three(name: str) -> str:
    await _count(f"{name}-third")
    return f"{name}-third"


@Chain.body
async def chain(wf: akter.WorkflowContext, job: Job) -> str:
    a = await first(step_one, job.name)
    b = await second(step_two, job.name)
    c = await third(step_three, job.name)
    return f"{a} {b} {c}"


app = akter.App([Steps])


def make_app(database_url: str) -> akter.App:
    return akter.App([Steps], database_url=database_url)
