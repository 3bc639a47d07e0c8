"""Database errors, translated in one place.

psycopg raises one exception class per SQLSTATE (``psycopg.errors``); the layers above the store
(turns, the relay, the workflow driver) should not each remember which classes mean "retry",
"the row exists" or "the database went away". They ask these predicates instead and map the answer
to an akter outcome (``ActorBusy``, a receipt replay, a reconnect). Background loops ask
``classify`` (retry, back off, or bug) and back off through ``akter.store.background``. Nothing
here catches, retries or logs: deciding what an outcome means stays with the caller.
"""

from __future__ import annotations

import enum
from typing import Final

import psycopg
import psycopg.errors
import psycopg_pool

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


class Verdict(enum.Enum):
    """What a background loop does after a database error (``classify``)."""

    #: the server is fine, only this session was ended for idling: run again at once
    RETRY = "retry"
    #: transient (the server went away or is read-only, or another transaction was in the way):
    #: wait, with jittered and capped backoff, then run again
    BACKOFF = "backoff"
    #: not a database condition: a defect in akter or in the schema, to be logged with its
    #: traceback (a background loop still backs off and goes on)
    BUG = "bug"


# 55P03 lock_not_available (lock_timeout), 57014 query_canceled (statement_timeout), 25006
# read_only_sql_transaction (a standby, or a primary being demoted), 40001 serialization_failure,
# 40P01 deadlock_detected: the statement failed, the session is usable, and the same statement
# can succeed later.
_CONTENTION: Final = frozenset({"55P03", "57014", "25006", "40001", "40P01"})
# The server ended an idle session (57P05 idle_session_timeout, 25P03
# idle_in_transaction_session_timeout): a new connection works at once.
_IDLE_ENDED: Final = frozenset({"57P05", "25P03"})


def classify(exc: BaseException) -> Verdict:
    """The one decision every background statement (relay loops, ownership heartbeat, workflow
    refresh, retention) takes about an error: retry, back off, or report a bug.

    ``psycopg_pool.PoolTimeout`` (no connection could be had in time) is a lost connection: back
    off. Cancellation is never passed here; it is not an error.
    """
    if isinstance(exc, psycopg.Error) and exc.sqlstate in _IDLE_ENDED:
        return Verdict.RETRY
    if is_connection_lost(exc) or isinstance(exc, psycopg_pool.PoolTimeout):
        return Verdict.BACKOFF
    if isinstance(exc, psycopg.Error) and exc.sqlstate in _CONTENTION:
        return Verdict.BACKOFF
    return Verdict.BUG
