"""History files from a test (``akter.testing``): export executions as the database holds them,
load a file, and replay it under an App's bodies with no database."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from akter.errors import InvalidExecutionId
from akter.workflow.core import manifest
from akter.workflow.tools import history_file, replay_read
from akter.workflow.tools.history_file import History
from akter.workflow.tools.replay import RecordedExecution
from akter.workflow.tools.replay_report import ReplayReport, replay_all

if TYPE_CHECKING:
    from akter.actor.declare import Actor
    from akter.app import App


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
