"""``run.result()`` in the process whose pass finished the execution gets the stored result from
that pass (``Listener.hand_over``), with no read after the notification; anywhere else, and for
an interrupted execution (whose result names who asked), it reads the row as before."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from returns.result import Success

from akter import testing
from tests.apps import flows
from tests.apps.flows import Done, Flows, Job, Settle
from tests.integration.workflow_support import running, until

pytestmark = pytest.mark.integration


async def test_a_result_finished_here_is_handed_over_without_a_read(
    database_url: str, clock: testing.Clock, polls: list[str]
) -> None:
    app = flows.make_app(database_url)
    async with running(app) as (_, client):
        run = await client.actor(Flows, "f1", tenant="acme").start(Settle, Job("handed", seconds=600))
        await until(run.poll, lambda s: s.status == "suspended")
        polls.clear()
        waiting = asyncio.create_task(run.result(timeout=30))
        await until(lambda: asyncio.sleep(0, len(polls)), lambda n: n == 1)  # its first check
        await clock.advance(timedelta(seconds=601))
        result = await waiting
    assert result == Success(Done("ledger 2; principal Anonymous(); tenant acme"))
    # the one read before the pass finished it; none after
    assert polls == [run.execution_id]


async def test_an_interrupted_result_is_read_with_who_asked(database_url: str) -> None:
    app = flows.make_app(database_url)
    async with running(app) as (_, client):
        run = await client.actor(Flows, "f2", tenant="acme").start(Settle, Job("stopped", seconds=600))
        await until(run.poll, lambda s: s.status == "suspended")
        await run.interrupt(reason="no longer wanted")
        failure = (await run.result(timeout=30)).failure()
    assert getattr(failure, "reason", None) == "no longer wanted"
