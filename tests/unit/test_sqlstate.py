"""``classify``: the one decision background loops take about a database error."""

from __future__ import annotations

import psycopg
import psycopg.errors
import psycopg_pool
import pytest

from akter.store.sqlstate import Verdict, classify


@pytest.mark.parametrize(
    "exc",
    [
        psycopg.OperationalError("server closed the connection unexpectedly"),
        psycopg.errors.AdminShutdown(),
        psycopg.errors.CannotConnectNow(),
        psycopg_pool.PoolTimeout("couldn't get a connection after 30.00 sec"),
        psycopg.errors.LockNotAvailable(),
        psycopg.errors.QueryCanceled(),  # statement_timeout
        psycopg.errors.ReadOnlySqlTransaction(),  # a standby
        psycopg.errors.SerializationFailure(),
        psycopg.errors.DeadlockDetected(),
    ],
    ids=type,
)
def test_outages_and_contention_back_off(exc: Exception) -> None:
    assert classify(exc) is Verdict.BACKOFF


@pytest.mark.parametrize(
    "exc", [psycopg.errors.IdleSessionTimeout(), psycopg.errors.IdleInTransactionSessionTimeout()], ids=type
)
def test_an_idle_session_ended_by_the_server_is_retried_at_once(exc: Exception) -> None:
    assert classify(exc) is Verdict.RETRY


@pytest.mark.parametrize(
    "exc",
    [
        psycopg.errors.UndefinedTable(),
        psycopg.errors.SyntaxError(),
        psycopg.errors.UniqueViolation(),
        psycopg.InterfaceError("the connection is in a bad state"),
        AssertionError("no deployment row"),
        KeyError("bucket"),
    ],
    ids=type,
)
def test_anything_else_is_a_bug(exc: Exception) -> None:
    assert classify(exc) is Verdict.BUG
