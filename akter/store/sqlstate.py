"""Database errors, translated in one place.

psycopg raises one exception class per SQLSTATE (``psycopg.errors``); the layers above the store
(turns, the relay, the workflow driver) should not each remember which classes mean "retry",
"the row exists" or "the database went away". They ask these predicates instead and map the answer
to an akter outcome (``ActorBusy``, a receipt replay, a reconnect). Nothing here catches, retries
or logs: deciding what an outcome means stays with the caller.
"""

from __future__ import annotations

from typing import Final

import psycopg
import psycopg.errors

# Server-reported SQLSTATEs after which the session is gone: an administrator or a restart ended
# it (57P01 admin_shutdown, 57P02 crash_shutdown), the server is still starting or stopping
# (57P03 cannot_connect_now), or the server closed an idle session (57P05 idle_session_timeout,
# 25P03 idle_in_transaction_session_timeout). Class 08 (connection exception) is matched by prefix.
_SESSION_ENDED: Final = frozenset({"57P01", "57P02", "57P03", "57P05", "25P03"})


def is_lock_timeout(exc: BaseException) -> bool:
    """``lock_timeout`` expired while waiting for a row or table lock (SQLSTATE 55P03).

    The statement, and the transaction it was in, failed; nothing it wrote is kept. For a turn this
    means another transaction holds the actor's row: retry, or report ``ActorBusy``.
    """
    return isinstance(exc, psycopg.errors.LockNotAvailable)


def is_unique_violation(exc: BaseException) -> bool:
    """A row with the same unique key already exists (SQLSTATE 23505).

    For an insert-if-absent this is the expected "someone else got there first": read the row
    that won instead.
    """
    return isinstance(exc, psycopg.errors.UniqueViolation)


def is_serialization_failure(exc: BaseException) -> bool:
    """The transaction could not be serialised with concurrent ones (SQLSTATE 40001).

    Raised under REPEATABLE READ or SERIALIZABLE isolation; the whole transaction rolled back and
    is safe to run again from the start.
    """
    return isinstance(exc, psycopg.errors.SerializationFailure)


def is_deadlock(exc: BaseException) -> bool:
    """PostgreSQL broke a lock cycle by failing this transaction (SQLSTATE 40P01).

    Like a serialisation failure, the transaction rolled back and may be run again; a deadlock
    that recurs points at two code paths taking the same locks in different orders.
    """
    return isinstance(exc, psycopg.errors.DeadlockDetected)


def is_connection_lost(exc: BaseException) -> bool:
    """The connection is gone: what a database restart, failover or network cut looks like.

    True for errors the client reports without a SQLSTATE (connection refused, "server closed the
    connection unexpectedly", "the connection is closed", a pool that cannot hand out a
    connection), for class 08 (connection exception), and for the server ending the session
    (admin or crash shutdown, still starting up, idle-session timeouts). Whether the last
    statement committed is unknown: retry only work that is idempotent, such as a turn with its
    command id. False for errors after which the connection is still usable (a lock timeout, a
    cancelled query), although psycopg files some of those under ``OperationalError`` too.
    """
    if not isinstance(exc, psycopg.Error):
        return False
    state = exc.sqlstate
    if state is None:
        # InterfaceError (no SQLSTATE either) is a misuse of the driver, never a lost server.
        return isinstance(exc, psycopg.OperationalError)
    return state.startswith("08") or state in _SESSION_ENDED
