"""A resume turn returns its execution's head when the execution has no step yet
(``akter.workflow.engine.claim``), so the first pass of a start made where no runner owns the actor runs
without a load; an execution with steps, or one the resume leaves resting, is loaded as before."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import attrs
import pytest
from returns.result import Success

import akter
from akter import testing
from akter.workflow.engine.passes import Pass
from tests.integration.conftest import Peek
from tests.integration.workflow_support import until

pytestmark = pytest.mark.integration


@attrs.frozen
class Pad:
    notes: int = 0


@attrs.frozen
class Ask:
    text: str


@attrs.frozen
class Said:
    text: str


Heads = akter.Actor("Heads", state=Pad)
At = Heads.workflow("At", input=Ask, output=Said)
Later = Heads.workflow("Later", input=Ask, output=Said)
later_nap = Later.sleep("nap")


@At.body
async def at(wf: akter.WorkflowContext, ask: Ask) -> Said:
    return Said(f"{ask.text} for {wf.ref.tenant}")


@Later.body
async def later(wf: akter.WorkflowContext, ask: Ask) -> Said:
    await later_nap(timedelta(seconds=600))
    return Said(f"{ask.text} later")


@pytest.fixture
def heads(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any] | None]:
    """The head each pass was given (None: it loads)."""
    seen: list[dict[str, Any] | None] = []
    original = Pass.__init__

    def spied(self: Pass, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        seen.append(None if self.head is None else dict(self.head))

    monkeypatch.setattr(Pass, "__init__", spied)
    return seen


@asynccontextmanager
async def apart(database_url: str) -> AsyncIterator[Any]:
    """A relay in one App, a client in another that runs no pass: every start reaches the
    owner through its due-now timer and a resume turn, as from a web process."""
    relay_app = akter.App([Heads], database_url=database_url)
    client_app = akter.App([Heads], database_url=database_url)
    async with relay_app.relay(), client_app.client() as client:
        yield client


async def test_a_remote_start_runs_its_first_pass_from_the_resume_turn(
    database_url: str, heads: list[dict[str, Any] | None]
) -> None:
    async with apart(database_url) as client:
        run = await client.actor(Heads, "h1", tenant="acme").start(At, Ask("now"))
        result = await run.result(timeout=60)
    assert result == Success(Said("now for acme"))
    assert len(heads) == 1
    head = heads[0]
    assert head is not None
    assert (head["workflow"], head["status"], head["step"]) == ("At", "running", None)
    assert head["interrupt"] is False
    assert (head["run_number"], head["failed_passes"], head["pause"]) == (1, 0, False)


async def test_a_resume_of_an_execution_with_steps_loads_them(
    database_url: str, clock: testing.Clock, heads: list[dict[str, Any] | None], peek: Peek
) -> None:
    async with apart(database_url) as client:
        run = await client.actor(Heads, "h2", tenant="acme").start(Later, Ask("nap"))
        await until(run.poll, lambda s: s.status == "suspended")
        assert await peek.value("SELECT count(*) FROM actor_workflow_step WHERE kind = 'clock'") == 1
        await clock.advance(timedelta(seconds=601))
        result = await run.result(timeout=60)
    assert result == Success(Said("nap later"))
    # the first pass from the resume turn's head; the second loads the recorded clock
    assert [h is not None for h in heads] == [True, False]


async def test_an_interrupt_flagged_before_the_first_pass_reaches_it_through_the_head(
    database_url: str, heads: list[dict[str, Any] | None], peek: Peek
) -> None:
    # the client's start and interrupt both commit before the relay starts, so the one resume
    # it delivers finds the execution flagged
    client_app = akter.App([Heads], database_url=database_url)
    async with client_app.client() as client:
        run = await client.actor(Heads, "h3", tenant="acme").start(Later, Ask("stop"))
        await run.interrupt(reason="changed my mind")
        relay_app = akter.App([Heads], database_url=database_url)
        async with relay_app.relay():
            failure = (await run.result(timeout=60)).failure()
    assert getattr(failure, "reason", None) == "changed my mind"
    first = heads[0]
    assert first is not None
    assert first["interrupt"] is True
    assert await peek.value("SELECT count(*) FROM actor_workflow_step") == 0  # it never napped
