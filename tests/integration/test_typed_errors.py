"""Readable failures on a real database: an activity retried without limit until it succeeds, a
defect that reaches a client or a parent naming its class, and the explorer refusing a database
where a relay was started a moment before."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from datetime import timedelta

import attrs
import pytest
from returns.primitives.exceptions import UnwrapFailedError
from returns.result import Failure, Success

import akter
from akter.testing import Explorer
from tests.apps import explored
from tests.apps.explored import Payment
from tests.integration.workflow_support import running

#: attempts made, by the test that made them
ATTEMPTS: list[str] = []


@attrs.frozen
class Empty:
    pass


@attrs.frozen
class Job:
    failures: int


@attrs.frozen
class Seen:
    text: str


Errs = akter.Actor("Errs", state=Empty)
Stubborn = Errs.workflow("Stubborn", input=Job, output=Seen)
# no limit on attempts; the shortest pause, so the test does not wait out a real backoff
flaky = Stubborn.activity(
    "flaky", success=Seen, retry=akter.Retry.constant(timedelta(milliseconds=1), times=None)
)
Blank = Errs.workflow("Blank", input=Empty, output=Seen)
blank = Blank.activity("blank", success=Seen)
Parent = Errs.workflow("Parent", input=Empty, output=Seen)
child = Parent.child("child", Blank)


def _fails_until(job: Job) -> Seen:
    ATTEMPTS.append("flaky")
    if len(ATTEMPTS) <= job.failures:
        raise ConnectionError(f"attempt {len(ATTEMPTS)} failed")
    return Seen(f"after {len(ATTEMPTS)} attempts")


def _raises_blank() -> Seen:
    raise RuntimeError  # no message: only its class says what failed


@Stubborn.body
async def stubborn(wf: akter.WorkflowContext, job: Job) -> Seen:
    return await flaky(_fails_until, job)


@Blank.body
async def blank_body(wf: akter.WorkflowContext, _: Empty) -> Seen:
    return await blank(_raises_blank)


@Parent.body
async def parent(wf: akter.WorkflowContext, _: Empty) -> Seen:
    outcome = await child.run("kid", Empty())
    return Seen(repr(outcome))


@pytest.fixture(autouse=True)
def _attempts() -> Iterator[None]:
    ATTEMPTS.clear()
    yield
    ATTEMPTS.clear()


async def test_an_activity_without_an_attempt_limit_is_retried_until_it_succeeds(database_url: str) -> None:
    async with running(akter.App([Errs], database_url=database_url)) as (_, client):
        run = await client.actor(Errs, "e1", tenant="acme").start(Stubborn, Job(failures=12))
        assert await run.result(timeout=60) == Success(Seen("after 13 attempts"))
    assert len(ATTEMPTS) == 13


async def test_a_defect_without_a_message_reaches_the_client_named_by_its_class(database_url: str) -> None:
    async with running(akter.App([Errs], database_url=database_url)) as (_, client):
        run = await client.actor(Errs, "e1", tenant="acme").start(Blank, Empty())
        result = await run.result(timeout=60)
    assert isinstance(result, Failure)
    assert repr(result) == "<Failure: RuntimeError>"
    with pytest.raises(UnwrapFailedError) as info:
        result.unwrap()
    assert "akter.errors.Defect: RuntimeError" in "".join(traceback.format_exception(info.value))


async def test_a_parent_reads_its_failed_child_named_by_its_class(database_url: str) -> None:
    async with running(akter.App([Errs], database_url=database_url)) as (_, client):
        run = await client.actor(Errs, "e1", tenant="acme").start(Parent, Empty())
        assert await run.result(timeout=60) == Success(Seen("<Failure: RuntimeError>"))


async def test_the_explorer_sees_a_relay_started_just_before_it_every_time(explorer: Explorer) -> None:
    app = explored.make_app(explorer.database_url)
    for _ in range(15):
        async with app.relay() as relay:  # no idle(), no wait: the check comes at once
            with pytest.raises(
                akter.ConfigurationError, match=rf"1 relay\(s\) are live on it \({relay.member}"
            ):
                await explorer(app, explored.Shop, "busy", explored.Pay, Payment("o9"))
    assert explorer.reports == []
