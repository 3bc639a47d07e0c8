"""What users need to test their own actors and workflows: the database clock and fault points.

**The clock.** All durable time (due times, timeouts, expiries) is ``akter_now()`` in the
database: the server's clock plus an offset stored in the ``akter_clock`` row. ``Clock`` moves
that offset, so every connection and every process a test starts sees the jump at once, and a
test can skip a day without sleeping::

    clock = akter.testing.Clock(database_url)
    await clock.advance(timedelta(days=1))

**Fault points.** ``crash(point)`` makes the process SIGKILL itself when it reaches ``point``;
``pause(point)`` blocks there until the test calls ``release()``::

    gate = akter.testing.pause("turn.before_commit", match="order-7")
    task = asyncio.create_task(handle.send(pay, Pay(...)))
    await gate.reached()      # the turn holds the actor's lock now
    ...                       # act: a second connection, a rival send
    gate.release()

Processes a test starts arm crashes through ``AKTER_FAULTS`` (see ``akter.faults``). The points
are listed in ``akter.faults.POINTS``.

**Histories.** ``export_history`` writes executions, as the database holds them, to a JSON file
(``akter.workflow.history_file``); ``replay_history`` replays a file's executions under an App's
bodies with no database and no I/O — what ``akter workflows replay`` does against the database —
so a test suite can keep histories recorded by earlier versions of its code and fail when a
change would not replay them::

    await akter.testing.export_history(database_url, "tests/golden/ship.json", [run.execution_id])
    ...
    akter.testing.replay_history(app, "tests/golden/ship.json").assert_replays()

**Crashes at every boundary.** ``explore`` (``akter.explore``) runs a workflow once, then once
crashed at each step boundary with a fresh runner finishing it, and reports every crash that
duplicated, lost or changed an effect::

    report = await akter.testing.explore(app, Shop, "shop-1", Pay, Payment(...), probe=count)
    report.assert_exactly_once()

The pytest plugin (``akter.pytest_plugin``) offers it as the ``explorer`` fixture, on the test's
fresh database: ``report = await explorer(app, Shop, "shop-1", Pay, Payment(...))``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, LiteralString

import psycopg

from akter import faults
from akter.errors import InvalidExecutionId
from akter.explore import Explorer, ExploreReport, explore
from akter.faults import POINTS, Crash, Fail, Pause
from akter.workflow import history_file, manifest, replay_read
from akter.workflow.history_file import History
from akter.workflow.replay import RecordedExecution
from akter.workflow.replay_report import ReplayReport, replay_all

if TYPE_CHECKING:
    from akter.actor.declare import Actor
    from akter.app import App

__all__ = [
    "POINTS",
    "Clock",
    "Crash",
    "ExploreReport",
    "Explorer",
    "Fail",
    "History",
    "Pause",
    "ReplayReport",
    "crash",
    "disarm_all",
    "explore",
    "export_history",
    "fail",
    "load_history",
    "pause",
    "read_history",
    "replay_history",
]


class Clock:
    """Moves the database clock of one database (every connection, every process)."""

    def __init__(self, database_url: str, *, conn: psycopg.AsyncConnection[Any] | None = None) -> None:
        self.database_url = database_url
        #: an autocommit connection to use instead of a new one per call (it stays open)
        self.conn = conn

    async def _exec(self, sql: LiteralString, params: tuple[object, ...] = ()) -> datetime:
        if self.conn is not None:
            return await self._on(self.conn, sql, params)
        async with await psycopg.AsyncConnection.connect(self.database_url, autocommit=True) as conn:
            return await self._on(conn, sql, params)

    @staticmethod
    async def _on(
        conn: psycopg.AsyncConnection[Any], sql: LiteralString, params: tuple[object, ...]
    ) -> datetime:
        if sql:
            await conn.execute(sql, params)
            # workers waiting on a timer re-read their due rows (see akter.outbox)
            await conn.execute("NOTIFY akter_wake")
        row = await (await conn.execute("SELECT akter_now()")).fetchone()
        if row is None:  # pragma: no cover - a SELECT without FROM always returns one row
            raise AssertionError("SELECT akter_now() returned no row")
        now: datetime = row[0]
        return now

    async def now(self) -> datetime:
        """The database clock now."""
        return await self._exec("")

    async def advance(self, delta: timedelta) -> datetime:
        """Move the clock forward (or back, with a negative delta); returns the new time."""
        return await self._exec("UPDATE akter_clock SET clock_offset = clock_offset + %s", (delta,))

    async def set(self, when: datetime) -> datetime:
        """Set the clock to ``when`` (it keeps running from there)."""
        return await self._exec(
            "UPDATE akter_clock SET clock_offset = %s::timestamptz - statement_timestamp()", (when,)
        )

    async def reset(self) -> datetime:
        return await self._exec("UPDATE akter_clock SET clock_offset = interval '0'")


def crash(point: str, *, match: str | None = None) -> Crash:
    """SIGKILL this process when it reaches ``point`` (for ids equal to ``match``, if given)."""
    fault = Crash(point=point, match=match)
    faults.arm(fault)
    return fault


def pause(point: str, *, match: str | None = None, once: bool = True) -> Pause:
    """Block at ``point`` until ``release()``; await ``reached()`` to know it got there."""
    fault = Pause(point=point, match=match, once=once)
    faults.arm(fault)
    return fault


def fail(point: str, *, match: str | None = None) -> Fail:
    """Raise ``akter.faults.InjectedFailure`` at ``point`` every time it is reached (for ids
    equal to ``match``), until disarmed: what a bug in akter's own code there would do."""
    fault = Fail(point=point, match=match)
    faults.arm(fault)
    return fault


def disarm_all() -> None:
    faults.disarm_all()


# ---- histories ---------------------------------------------------------------------------------


async def read_history(database_url: str, execution_ids: Sequence[str], *, note: str = "") -> History:
    """The named executions as the database holds them now (one read-only snapshot).
    ``InvalidExecutionId`` names an id that is malformed or not in the database."""
    conn = await psycopg.AsyncConnection.connect(database_url, autocommit=True)
    async with conn, conn.transaction():
        await replay_read.read_only(conn)
        found = await replay_read.by_id(conn, execution_ids)
    missing = sorted(set(execution_ids) - {e.execution_id for e in found})
    if missing:
        raise InvalidExecutionId(f"no execution {', '.join(missing)} in the database")
    return history_file.of(found, note)


async def export_history(
    database_url: str, path: str | Path, execution_ids: Sequence[str], *, note: str = ""
) -> History:
    """Write the named executions to the history file ``path`` (``read_history``); returns them."""
    history = await read_history(database_url, execution_ids, note=note)
    text = history_file.dumps(history) + "\n"
    await asyncio.to_thread(Path(path).write_text, text, encoding="utf-8")
    return history


def load_history(path: str | Path) -> History:
    """A history file; ``InvalidInput`` when it is not one."""
    return history_file.loads(Path(path).read_text(encoding="utf-8"), source=str(path))


def replay_history(
    code: App | Iterable[Actor[Any]],
    history: History | Iterable[RecordedExecution] | str | Path,
    *,
    now_ms: int | None = None,
) -> ReplayReport:
    """Replay a history (a file, a ``History``, or executions) under the bodies of ``code`` (an
    App or its actor types), with no database: ``report.assert_replays()`` fails a test with the
    first divergence of each execution that does not replay. The clock of the replay is
    ``now_ms``, by default the time the history was exported."""
    if isinstance(history, str | Path):
        history = load_history(history)
    if not isinstance(history, History):
        executions = tuple(history)
        latest = max((s.started_us // 1000 for e in executions for s in e.steps), default=0)
        history = History(executions, latest)
    actors = code.actors.values() if hasattr(code, "actors") else code
    tally = replay_all(
        manifest.all_workflows(actors),
        history.executions,
        now_ms=history.exported_at_ms if now_ms is None else now_ms,
    )
    return tally.report()
