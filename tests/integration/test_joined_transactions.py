"""Commands and workflow starts inside the application's own transaction: they commit with it,
a rollback leaves no trace, and so does a crash between the writes and the commit."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from returns.maybe import Some
from returns.result import Success

import akter
from tests.apps import counter, shop
from tests.apps.ledger import CREATE_TABLE, Book, Booked, Ledger, book, make_app
from tests.integration.conftest import Peek

ROOT = Path(__file__).resolve().parents[2]

#: every row akter writes for a turn, a staged intent or a workflow start
AKTER_TABLES = (
    "actor_receipts",
    "actor_events",
    "actor_state",
    "actor_outbox",
    "actor_workflow_executions",
)


async def _nothing_of_akter(peek: Peek) -> None:
    for table in AKTER_TABLES:
        assert await peek.count(table) == 0, table


@pytest.fixture
async def app_table(peek: Peek) -> None:
    await peek.conn.execute(CREATE_TABLE)


@pytest.mark.usefixtures("app_table")
async def test_a_command_and_a_start_commit_with_the_application(database_url: str, peek: Peek) -> None:
    app = make_app(database_url)
    async with app, app.relay() as relay, app.client() as client:
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            await conn.execute("INSERT INTO app_orders VALUES ('o1', 5)")
            joined = client.with_connection(conn)
            assert await joined.actor(Ledger, "l1", tenant="acme").send(book, Book("o1", 5)) == Success(5)
            run = await joined.actor(shop.Shop, "s1", tenant="acme").start(shop.Ship, shop.Order(id="o1"))
            # nothing is visible, or delivered, before the application commits
            await relay.idle()
            await _nothing_of_akter(peek)
            assert await peek.count("app_orders") == 0
            # the actor's row lock is held until the application commits: a pooled turn
            # started now runs after the joined one, on its state
            rival = asyncio.create_task(client.actor(Ledger, "l1", tenant="acme").send(book, Book("o9", 1)))
            await conn.commit()
        assert await rival == Success(6)
        assert await run.result(timeout=60) == Success(shop.Shipped(order="o1", slot=10))
        await relay.idle()
        ledger = client.actor(Ledger, "l1", tenant="acme")
        assert await ledger.wait_for(Booked, timeout=0) == Some(Booked("o1", 5))
        assert await peek.count("app_orders") == 1
        assert await peek.count("actor_receipts", "l1") == 2
        # the intent the turn staged was delivered once the transaction committed
        audit = client.actor(counter.Counter, "audit", tenant="acme")
        assert await audit.send(counter.add, counter.Add(0)) == Success(6)


@pytest.mark.usefixtures("app_table")
async def test_a_rollback_leaves_no_trace_and_releases_the_actor(database_url: str, peek: Peek) -> None:
    app = make_app(database_url)
    async with app, app.relay() as relay, app.client() as client:
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            await conn.execute("INSERT INTO app_orders VALUES ('o1', 5)")
            joined = client.with_connection(conn)
            await joined.actor(Ledger, "l1", tenant="acme").send(book, Book("o1", 5))
            await joined.actor(shop.Shop, "s1", tenant="acme").start(shop.Ship, shop.Order(id="o1"))
            await conn.rollback()
        await relay.idle()
        await _nothing_of_akter(peek)
        assert await peek.count("app_orders") == 0
        # the actor was locked only until the rollback; its first committed turn starts afresh
        assert await client.actor(Ledger, "l1", tenant="acme").send(book, Book("o2", 1)) == Success(1)


@pytest.mark.slow
@pytest.mark.usefixtures("app_table")
async def test_a_crash_before_the_application_commits_leaves_no_trace(database_url: str, peek: Peek) -> None:
    died = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "tests.apps.ledger", database_url, "o1"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert died.returncode == -signal.SIGKILL, died.stderr
    assert died.stdout.strip() == "written"
    app = make_app(database_url)
    async with app, app.relay() as relay, app.client() as client:
        await relay.idle()
        await _nothing_of_akter(peek)
        assert await peek.count("app_orders") == 0
        # the dead session's lock went with it
        assert await client.actor(Ledger, "l1", tenant="acme").send(book, Book("o1", 5)) == Success(5)


@pytest.mark.usefixtures("app_table")
async def test_a_failed_turn_rolls_back_to_its_savepoint_only(database_url: str, peek: Peek) -> None:
    app = akter.App([counter.Counter], database_url=database_url)
    async with app, app.client() as client, await psycopg.AsyncConnection.connect(database_url) as conn:
        await conn.execute("INSERT INTO app_orders VALUES ('o1', 5)")
        handle = client.with_connection(conn).actor(counter.Counter, "c1", tenant="acme")
        with pytest.raises(akter.Defect):
            await handle.send(counter.explode, counter.Add(1))
        failed = await handle.send(counter.add_at_most_10, counter.Add(11))
        assert isinstance(failed.failure(), counter.TooMuch)
        assert await handle.send(counter.add, counter.Add(2)) == Success(2)
        await conn.commit()
    assert await peek.count("app_orders") == 1
    # the declared failure's receipt and the success, not the defect's work
    assert await peek.count("actor_receipts", "c1") == 2
    assert await peek.rows("SELECT sequence, tag FROM actor_events") == [(1, "Added")]


async def test_what_cannot_join_is_refused(database_url: str) -> None:
    app = akter.App([counter.Counter], database_url=database_url)
    async with app, app.client() as client:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            handle = client.with_connection(conn).actor(counter.Counter, "c1", tenant="acme")
            with pytest.raises(akter.ConfigurationError, match="autocommit mode outside a transaction"):
                await handle.send(counter.add, counter.Add(1))
            async with conn.transaction():
                assert await handle.send(counter.add, counter.Add(1)) == Success(1)
        with (
            psycopg.connect(database_url) as sync_conn,
            pytest.raises(akter.ConfigurationError, match="AsyncConnection"),
        ):
            client.with_connection(sync_conn)  # type: ignore[arg-type]
        other = make_conninfo(database_url, dbname="postgres")
        async with await psycopg.AsyncConnection.connect(other) as elsewhere:
            with pytest.raises(akter.ConfigurationError, match="must share one database"):
                client.with_connection(elsewhere)


@pytest.mark.usefixtures("app_table")
def test_the_sync_client_joins_a_sync_connection(database_url: str, peek: Peek) -> None:
    app = make_app(database_url)
    with app.running(), app.sync_client() as client:
        with psycopg.connect(database_url) as conn:
            conn.execute("INSERT INTO app_orders VALUES ('o1', 5)")
            joined = client.with_connection(conn)
            assert joined.actor(Ledger, "l1", tenant="acme").send(book, Book("o1", 5)) == Success(5)
            run = joined.actor(shop.Shop, "s1", tenant="acme").start(shop.Ship, shop.Order(id="o1"))
            with psycopg.connect(database_url) as outside:
                assert outside.execute("SELECT count(*) FROM actor_receipts").fetchone() == (0,)
            # leaving the block commits (psycopg's rule for a connection used as a context)
        assert run.poll().status in {"running", "suspended", "finished"}
        with psycopg.connect(database_url) as outside:
            assert outside.execute("SELECT count(*) FROM app_orders").fetchone() == (1,)
            assert outside.execute("SELECT count(*) FROM actor_receipts").fetchone() == (2,)
        with psycopg.connect(database_url) as conn:
            joined = client.with_connection(conn)
            joined.actor(Ledger, "l2", tenant="acme").send(book, Book("o2", 1))
            conn.rollback()
        with psycopg.connect(database_url) as outside:
            assert outside.execute(
                "SELECT count(*) FROM actor_receipts WHERE actor_id = 'l2'"
            ).fetchone() == (0,)
