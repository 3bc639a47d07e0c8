"""A finish notifies a small result with it (``akter_wf_finish``, channel ``akter_finished``), so
``run.result()`` in a process that did not run the pass returns it with no read after the wake.
A result too big for a notification, a note that does not decode, one of another run, or one
that never arrived falls back to reading the row, as before."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import attrs
import psycopg
import pytest
from returns.result import Success

import akter
from akter import codec, testing
from akter.workflow.client import run as run_module
from akter.workflow.client.run import Run
from akter.workflow.core import exits
from tests.integration.conftest import Peek
from tests.integration.workflow_support import until

pytestmark = pytest.mark.integration


@attrs.frozen
class Pad:
    notes: int = 0


@attrs.frozen
class Ask:
    size: int


@attrs.frozen
class Text:
    body: str


Notes = akter.Actor("Notes", state=Pad)
Echo = Notes.workflow("Echo", input=Ask, output=Text)
echo_nap = Echo.sleep("nap")


@Echo.body
async def echo(wf: akter.WorkflowContext, ask: Ask) -> Text:
    await echo_nap(timedelta(seconds=600))
    return Text(body(ask.size))


def body(size: int) -> str:
    """``size`` hex digits that compress no better than half: stored, they stay big."""
    digits = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(size // 64 + 1))
    return digits[:size]


@asynccontextmanager
async def apart(database_url: str) -> AsyncIterator[Any]:
    """A relay in one App and a client in another: the client's process runs no pass, so no
    result is handed over to it; only a notification (or a read) brings it."""
    relay_app = akter.App([Notes], database_url=database_url)
    client_app = akter.App([Notes], database_url=database_url)
    async with relay_app.relay(), client_app.client() as client:
        yield client


async def waiting(run: Run[Any], polls: list[str]) -> asyncio.Task[Any]:
    """``run.result()`` in a task, once it made its first check and waits."""
    task = asyncio.create_task(run.result(timeout=60))
    await until(lambda: asyncio.sleep(0, len(polls)), lambda n: n >= 1)
    return task


async def suspended(client: Any, actor_id: str, size: int) -> Run[Any]:
    run = await client.actor(Notes, actor_id, tenant="acme").start(Echo, Ask(size))
    await until(run.poll, lambda s: s.status == "suspended")
    return run


async def test_a_small_result_arrives_with_its_notification(
    database_url: str, clock: testing.Clock, polls: list[str]
) -> None:
    async with apart(database_url) as client:
        run = await suspended(client, "n1", 40)
        polls.clear()
        task = await waiting(run, polls)
        await clock.advance(timedelta(seconds=601))
        result = await task
    assert result == Success(Text(body(40)))
    # the one check before the finish; none after the wake
    assert polls == [run.execution_id]


async def test_a_result_too_big_for_a_notification_is_read(
    database_url: str, clock: testing.Clock, polls: list[str], peek: Peek
) -> None:
    async with apart(database_url) as client:
        run = await suspended(client, "n2", 20_000)
        polls.clear()
        task = await waiting(run, polls)
        await clock.advance(timedelta(seconds=601))
        result = await task
    assert result == Success(Text(body(20_000)))
    assert polls == [run.execution_id, run.execution_id]  # woken by the id alone, then read


async def test_a_note_that_does_not_decode_or_names_another_run_is_read_past(
    database_url: str, clock: testing.Clock, polls: list[str], peek: Peek
) -> None:
    forged = codec.encode(exits.encode_ok(Text("forged"), Text))
    async with apart(database_url) as client:
        run = await suspended(client, "n3", 8)
        polls.clear()
        task = await waiting(run, polls)
        eid = run.execution_id
        notes = [
            f"1.!!not-base64!! {eid}",
            f"1.{base64.b64encode(b'not a result').decode()} {eid}",  # base64, but no result
            f"7.{base64.b64encode(forged).decode()} {eid}",  # a run this execution is not at
            f"nodot {eid}",
        ]
        for i, note in enumerate(notes, start=2):
            await peek.rows("SELECT pg_notify('akter_finished', %s)", note)
            # each wakes the waiter, which reads the row (still suspended) and waits on
            seen = await until(
                lambda: asyncio.sleep(0, (len(polls), task.done())), lambda v, i=i: v[0] >= i or v[1]
            )
            assert seen == (i, False), f"after {note[:12]!r}: {task}"
        await clock.advance(timedelta(seconds=601))
        result = await task
    assert result == Success(Text(body(8)))


async def test_a_waiter_that_never_hears_the_notification_finds_the_result_by_polling(
    database_url: str, clock: testing.Clock, polls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_module, "POLL_FALLBACK", 0.2)
    async with apart(database_url) as client:
        run = await suspended(client, "n4", 16)

        async def unreachable() -> psycopg.AsyncConnection[Any]:
            raise psycopg.OperationalError("the listener's server is unreachable")

        run._results._connect = unreachable  # type: ignore[method-assign]
        polls.clear()
        task = await waiting(run, polls)
        await clock.advance(timedelta(seconds=601))
        result = await task
    assert result == Success(Text(body(16)))
    assert len(polls) >= 2  # found by a fallback poll, not a notification


async def test_a_result_notified_after_the_listener_reconnected_needs_no_read(
    database_url: str, clock: testing.Clock, polls: list[str], peek: Peek
) -> None:
    listeners = (
        "SELECT pid FROM pg_stat_activity"
        " WHERE application_name = 'akter-results' AND datname = current_database()"
    )
    async with apart(database_url) as client:
        run = await suspended(client, "n5", 24)
        polls.clear()
        task = await waiting(run, polls)
        listener = run._results
        assert await listener.listening(30)
        await until(lambda: peek.rows(listeners), lambda rows: len(rows) == 1)
        await peek.rows(f"SELECT pg_terminate_backend(pid) FROM ({listeners}) AS l")
        # the reconnect wakes the waiter, which reads once more (a note may have been lost)
        await until(lambda: asyncio.sleep(0, (listener.connects, len(polls))), lambda v: v == (2, 2))
        await clock.advance(timedelta(seconds=601))
        result = await task
    assert result == Success(Text(body(24)))
    assert polls == [run.execution_id] * 2  # none after the finish


async def test_a_finish_notifies_once_with_its_result_and_id(database_url: str, clock: testing.Clock) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as listener:
        await listener.execute("LISTEN akter_finished")
        await listener.execute("LISTEN akter_result")  # the second channel of an earlier design
        async with apart(database_url) as client:
            run = await suspended(client, "n5", 40)
            await clock.advance(timedelta(seconds=601))
            assert await run.result(timeout=60) == Success(Text(body(40)))
        # the finish's notifications were delivered at its commit, before the result came back:
        # a round trip on the listening connection has them all read
        await listener.execute("SELECT 1")
        heard = [(n.channel, n.payload) async for n in listener.notifies(timeout=0)]
    (only,) = heard
    channel, payload = only
    note, eid = payload.split(" ")
    assert (channel, eid) == ("akter_finished", run.execution_id)
    number, data = note.split(".", 1)
    assert number == "1"
    assert codec.decode_primitive(base64.b64decode(data)) == exits.encode_ok(Text(body(40)), Text)
