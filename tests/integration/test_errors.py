"""Errors a user can see come from akter's one tree, never raw from the driver."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import akter
from tests.apps import flows
from tests.apps.counter import Add, Counter, add
from tests.apps.flows import Flows, Job, Watch
from tests.integration.conftest import Peek
from tests.integration.workflow_support import running, until


async def test_a_send_past_its_budget_without_postgresql_is_database_unavailable(
    database_url: str, peek: Peek
) -> None:
    dbname = conninfo_to_dict(database_url)["dbname"]
    app = akter.App([Counter], database_url=database_url, busy_timeout=timedelta(seconds=1))
    async with app.client() as client:
        handle = client.actor(Counter, "c1", tenant="acme")
        await handle.send(add, Add(1))
        # the pool waits 30 s for a connection by default; the send's own budget is what is tested
        handle._sender.pool.timeout = 0.2
        admin_url = make_conninfo(database_url, dbname="postgres")
        admin = await psycopg.AsyncConnection.connect(admin_url, autocommit=True)
        try:
            # the database refuses new sessions and ends the App's: what a restart looks like
            await admin.execute(f'ALTER DATABASE "{dbname}" WITH ALLOW_CONNECTIONS false')
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND application_name = 'akter'",
                (dbname,),
            )
            with pytest.raises(akter.DatabaseUnavailable, match="PostgreSQL stayed unreachable") as info:
                await handle.send(add, Add(1))
            assert isinstance(info.value.__cause__, psycopg.OperationalError)
        finally:
            await admin.execute(f'ALTER DATABASE "{dbname}" WITH ALLOW_CONNECTIONS true')
            await admin.close()
        # back up: the same client reaches it again
        await handle.send(add, Add(1))
    assert await peek.count("actor_receipts", "c1") == 2


async def test_a_pass_whose_generation_was_taken_abandons_quietly_and_writes_nothing(
    database_url: str, peek: Peek, caplog: pytest.LogCaptureFixture
) -> None:
    """``Stale`` is a control-flow signal (a ``BaseException``): the activity's settle finds
    another activation owns the actor, and the pass ends as abandoned — not as a failure."""
    flows.CALLS.clear()
    flows.GATES.clear()
    caplog.set_level(logging.INFO, logger="akter.workflow")
    app = flows.make_app(database_url)
    async with running(app) as (_relay, client):
        run = await client.actor(Flows, "st1", tenant="acme").start(Watch, Job("st", seconds=60))
        await until(lambda: asyncio.sleep(0, flows.CALLS.get("st-before")), lambda n: n == 1)
        # another activation takes the actor while the attempt runs
        await peek.conn.execute(
            "UPDATE actor_generations SET generation = generation + 1 WHERE actor_id = 'st1'"
        )
        flows.gate("st-before").set()
        abandoned = await until(
            lambda: asyncio.sleep(
                0, [r for r in caplog.records if r.getMessage().startswith("pass abandoned")]
            ),
            lambda found: len(found) == 1,
        )
        assert getattr(abandoned[0], "execution", None) == run.execution_id
        assert await peek.value("SELECT exit IS NULL FROM actor_workflow_step WHERE step = 'before'")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_an_engine_that_cannot_reach_postgresql_is_database_unavailable() -> None:
    # nothing listens on port 1: the connection is refused at once
    app = akter.App([Counter], database_url="postgresql://postgres@127.0.0.1:1/none", migrate_on_start=True)
    with pytest.raises(akter.DatabaseUnavailable, match=r"cannot reach PostgreSQL at .*:1") as info:
        async with app.client():
            pass
    assert isinstance(info.value.__cause__, psycopg.OperationalError)
