"""A workflow whose first activity blocks until the test says so, for the drain tests:
``akter relay tests.apps.drain_app:app`` runs it in the relay processes they SIGTERM.

The barrier and the count go through files in the directory named by ``AKTER_TEST_DRAIN_DIR``
(another process cannot share an event): each attempt of ``blocking`` appends a line to ``runs``
when it starts and to ``ends`` when it returns, and it returns once a file named ``release``
exists. ``make_app`` gives the in-process tests the same App on their database."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import attrs

import akter


@attrs.frozen
class BenchState:
    pass


@attrs.frozen
class Chore:
    name: str
    #: "async" or "sync": which kind of call the blocking step makes
    kind: str = "async"


Bench = akter.Actor("Bench", state=BenchState)
Shift = Bench.workflow("Shift", input=Chore, output=str)
blocking_step = Shift.activity("blocking", success=str)
after_step = Shift.activity("after", success=str)

#: how often an attempt looks for the release file (a barrier the test opens, not a wait)
LOOK_EVERY = 0.02


def _dir() -> Path:
    return Path(os.environ["AKTER_TEST_DRAIN_DIR"])


def _note(name: str, line: str) -> None:
    with (_dir() / name).open("a", encoding="utf-8") as out:
        out.write(line + "\n")


async def blocking(name: str) -> str:
    _note("runs", name)
    while not (_dir() / "release").exists():  # noqa: ASYNC110 -- another process opens it: no Event reaches here
        await asyncio.sleep(LOOK_EVERY)
    _note("ends", name)
    return f"{name} done"


def blocking_sync(name: str) -> str:
    _note("runs", name)
    while not (_dir() / "release").exists():
        time.sleep(LOOK_EVERY)
    _note("ends", name)
    return f"{name} done"


def after(name: str) -> str:
    _note("after", name)
    return f"{name} after"


@Shift.body
async def shift(wf: akter.WorkflowContext, chore: Chore) -> str:
    first = await blocking_step(blocking if chore.kind == "async" else blocking_sync, chore.name)
    second = await after_step(after, chore.name)
    return f"{first}; {second}"


def make_app(database_url: str | None = None) -> akter.App:
    return akter.App([Bench], database_url=database_url)


app = make_app()
