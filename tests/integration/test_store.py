"""The store's connection settings and error predicates, observed on a real server: what another
session sees in pg_stat_activity, and the exceptions PostgreSQL really raises for a lock timeout,
a duplicate key, a serialisation conflict and a terminated session."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from akter.store import sqlstate
from akter.store.migrate import known_migrations, schema_version
from akter.store.pool import open_pool, open_sync_pool


async def test_pooled_sessions_carry_akter_settings(database_url: str) -> None:
    pool = await open_pool(database_url, name="akter-relay", lock_timeout=timedelta(seconds=2))
    async with pool, pool.connection() as conn:
        assert conn.autocommit
        pid = conn.info.backend_pid
        # Seen from another session: the name and the setting are the server's, not the client's.
        with psycopg.connect(database_url) as observer:
            row = observer.execute(
                "SELECT application_name FROM pg_stat_activity WHERE pid = %s", [pid]
            ).fetchone()
        assert row == ("akter-relay",)
        cur = await conn.execute("SELECT current_setting('lock_timeout')")
        assert await cur.fetchone() == ("2s",)


async def test_options_already_in_the_url_are_kept(database_url: str) -> None:
    url = psycopg.conninfo.make_conninfo(database_url, options="-c statement_timeout=7s")
    pool = await open_pool(url, min_size=1, max_size=1)
    async with pool, pool.connection() as conn:
        cur = await conn.execute(
            "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')"
        )
        assert await cur.fetchone() == ("7s", "500ms")


def test_a_blocked_row_lock_times_out_as_a_lock_timeout(database_url: str) -> None:
    with (
        open_sync_pool(database_url, min_size=2, max_size=2, lock_timeout=timedelta(milliseconds=50)) as pool,
        pool.connection() as holder,
        pool.connection() as waiter,
    ):
        holder.execute("CREATE TABLE t (id int PRIMARY KEY)")
        holder.execute("INSERT INTO t VALUES (1)")
        with holder.transaction():
            holder.execute("SELECT * FROM t WHERE id = 1 FOR UPDATE")
            with pytest.raises(psycopg.Error) as raised, waiter.transaction():
                waiter.execute("UPDATE t SET id = 2 WHERE id = 1")
        # The waiter's connection survives its failed transaction.
        assert waiter.execute("SELECT count(*) FROM t").fetchone() == (1,)
    assert sqlstate.is_lock_timeout(raised.value)
    assert not sqlstate.is_connection_lost(raised.value)
    assert not sqlstate.is_unique_violation(raised.value)


def test_a_duplicate_key_is_a_unique_violation(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
        conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(psycopg.Error) as raised:
            conn.execute("INSERT INTO t VALUES (1)")
    assert sqlstate.is_unique_violation(raised.value)
    assert not sqlstate.is_lock_timeout(raised.value)
    assert not sqlstate.is_connection_lost(raised.value)


def test_a_concurrent_update_under_repeatable_read_is_a_serialization_failure(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as first, psycopg.connect(database_url) as second:
        first.execute("CREATE TABLE t (id int PRIMARY KEY, n int)")
        first.execute("INSERT INTO t VALUES (1, 0)")
        second.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        second.execute("SELECT n FROM t WHERE id = 1")  # takes the snapshot
        first.execute("UPDATE t SET n = 1 WHERE id = 1")
        with pytest.raises(psycopg.Error) as raised:
            second.execute("UPDATE t SET n = 2 WHERE id = 1")
    assert sqlstate.is_serialization_failure(raised.value)
    assert not sqlstate.is_deadlock(raised.value)
    assert not sqlstate.is_connection_lost(raised.value)


def test_two_transactions_locking_in_opposite_orders_deadlock(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as setup:
        setup.execute("CREATE TABLE t (id int PRIMARY KEY)")
        setup.execute("INSERT INTO t VALUES (1), (2)")
    both_hold_one = threading.Barrier(2)
    failures: list[BaseException] = []

    def lock(first: int, second: int) -> None:
        with psycopg.connect(database_url) as conn:
            try:
                conn.execute("SELECT * FROM t WHERE id = %s FOR UPDATE", [first])
                both_hold_one.wait()
                conn.execute("SELECT * FROM t WHERE id = %s FOR UPDATE", [second])
            except psycopg.Error as exc:
                failures.append(exc)

    threads = [threading.Thread(target=lock, args=order) for order in [(1, 2), (2, 1)]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(failures) == 1, "PostgreSQL fails exactly one side of the cycle"
    assert sqlstate.is_deadlock(failures[0])
    assert not sqlstate.is_serialization_failure(failures[0])


def test_a_terminated_session_is_a_lost_connection(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as victim, psycopg.connect(database_url) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [victim.info.backend_pid])
        with pytest.raises(psycopg.Error) as during:
            victim.execute("SELECT 1")
        with pytest.raises(psycopg.Error) as after:
            victim.execute("SELECT 1")
    assert sqlstate.is_connection_lost(during.value), repr(during.value)
    assert sqlstate.is_connection_lost(after.value), repr(after.value)
    assert not sqlstate.is_lock_timeout(during.value)


def test_a_refused_connection_is_a_lost_connection(database_url: str) -> None:
    unreachable = psycopg.conninfo.make_conninfo(database_url, host="127.0.0.1", port=1, connect_timeout=2)
    with pytest.raises(psycopg.Error) as raised:
        psycopg.connect(unreachable)
    assert sqlstate.is_connection_lost(raised.value)


@pytest.mark.parametrize(
    "exc", [ValueError("x"), psycopg.InterfaceError("misuse"), psycopg.errors.QueryCanceled()]
)
def test_other_errors_are_not_a_lost_connection(exc: BaseException) -> None:
    assert not sqlstate.is_connection_lost(exc)


def test_each_test_gets_a_fresh_migrated_database(database_url: str, admin_url: str) -> None:
    assert schema_version(database_url) == known_migrations()[-1].version
    with psycopg.connect(database_url) as conn:
        name: Any = conn.execute("SELECT current_database()").fetchone()
        assert conn.execute("SELECT count(*) FROM actor_generations").fetchone() == (0,)
    assert name[0].startswith("akter_t_")
    with psycopg.connect(admin_url) as admin:
        template = admin.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'akter\\_tpl\\_%'"
        ).fetchall()
    assert template, "the per-test database was copied from a migrated template"
