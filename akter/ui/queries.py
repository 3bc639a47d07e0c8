"""What the inspector page lists across actors: executions (filtered, newest first), their counts
by workflow and status, the executions that need a person, and the intents the relay parked as
undeliverable. Read-only, one repeatable-read snapshot per page (``akter.inspect.connect``).

The operate layer (``akter.operate``, being built beside this) lists executions with the full
filter set and keyset pages; once it is on main these reads become calls to it."""

from __future__ import annotations

from datetime import datetime
from typing import Any, LiteralString

import attrs
import psycopg
from psycopg.rows import dict_row

from akter.errors import InvalidInput

#: the statuses the page filters by: the stored ones, and ``needs attention`` (an execution whose
#: status is ``needs_attention``, an open execution a runner left blocked, or a finished one that
#: did not succeed)
STATUSES = ("running", "suspended", "finished", "attention")
OUTCOMES = ("succeeded", "failed", "defect", "interrupted")
MAX_ROWS = 500


@attrs.frozen
class ListFilter:
    """The filters a person sets on the page; every one optional, all combined with AND."""

    tenant: str | None = None
    actor_type: str | None = None
    actor_id: str | None = None
    workflow: str | None = None
    status: str | None = None
    outcome: str | None = None
    limit: int = 100

    def __attrs_post_init__(self) -> None:
        if self.status is not None and self.status not in STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(STATUSES)}, not {self.status!r}")
        if self.outcome is not None and self.outcome not in OUTCOMES:
            raise InvalidInput(f"outcome must be one of {', '.join(OUTCOMES)}, not {self.outcome!r}")
        if not 1 <= self.limit <= MAX_ROWS:
            raise InvalidInput(f"limit must be between 1 and {MAX_ROWS}, not {self.limit}")

    @classmethod
    def of(cls, params: dict[str, str]) -> ListFilter:
        """From a query string: empty values mean "any"."""
        given = {k: v.strip() for k, v in params.items() if v.strip()}
        limit = given.pop("limit", "100")
        if not limit.isdigit():
            raise InvalidInput(f"limit must be a number, not {limit!r}")
        known = {f.name for f in attrs.fields(cls)}
        return cls(**{k: v for k, v in given.items() if k in known}, limit=int(limit))

    def where(self) -> tuple[LiteralString, dict[str, Any]]:
        parts: list[LiteralString] = ["TRUE"]
        params: dict[str, Any] = {}
        for column in ("tenant", "actor_type", "actor_id", "workflow", "outcome"):
            value = getattr(self, column)
            if value is not None:
                params[column] = value
        if self.tenant is not None:
            parts.append("tenant = %(tenant)s")
        if self.actor_type is not None:
            parts.append("actor_type = %(actor_type)s")
        if self.actor_id is not None:
            parts.append("actor_id = %(actor_id)s")
        if self.workflow is not None:
            parts.append("workflow = %(workflow)s")
        if self.outcome is not None:
            parts.append("outcome = %(outcome)s")
        if self.status == "attention":
            parts.append(_ATTENTION)
        elif self.status is not None:
            params["status"] = self.status
            parts.append("status = %(status)s")
        return " AND ".join(parts), params


_ATTENTION: LiteralString = (
    "(status = 'needs_attention' OR blocked_reason IS NOT NULL AND status <> 'finished'"
    " OR status = 'finished' AND outcome IN ('failed', 'defect'))"
)


@attrs.frozen
class ExecutionLine:
    execution_id: str
    tenant: str
    actor_type: str
    actor_id: str
    workflow: str
    key: str
    status: str
    outcome: str | None
    interrupt: bool
    blocked_reason: str | None
    started_at: datetime
    finished_at: datetime | None

    @property
    def shown_status(self) -> str:
        if self.status == "finished":
            return self.outcome or "finished"
        if self.blocked_reason is not None:
            return "blocked"
        return "interrupting" if self.interrupt else self.status

    @property
    def open(self) -> bool:
        return self.status != "finished"


@attrs.frozen
class Count:
    workflow: str
    status: str
    count: int


@attrs.frozen
class ParkedIntent:
    intent_id: str
    sender: str
    target: str
    command: str
    attempts: int
    parked_at: datetime
    reason: str | None
    last_error: str | None


_COLUMNS: LiteralString = (
    "execution_id, tenant, actor_type, actor_id, workflow, key, status, outcome, interrupt,"
    " blocked_reason, started_at, finished_at"
)


async def _rows(conn: psycopg.AsyncConnection[Any], sql: LiteralString, params: dict[str, Any]) -> list[Any]:
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(sql, params)
    return await cur.fetchall()


async def list_executions(conn: psycopg.AsyncConnection[Any], where: ListFilter) -> list[ExecutionLine]:
    """Matching executions, newest first, at most ``where.limit`` of them."""
    condition, params = where.where()
    sql: LiteralString = (
        "SELECT "
        + _COLUMNS
        + " FROM actor_workflow_executions WHERE "
        + condition
        + " ORDER BY started_at DESC, execution_id LIMIT %(limit)s"
    )
    rows = await _rows(conn, sql, {**params, "limit": where.limit})
    return [ExecutionLine(**row) for row in rows]


async def count_executions(conn: psycopg.AsyncConnection[Any], where: ListFilter) -> list[Count]:
    """How many executions match, by workflow and shown status (``blocked`` apart)."""
    condition, params = where.where()
    sql: LiteralString = (
        "SELECT workflow, CASE WHEN status = 'finished' THEN coalesce(outcome, 'finished')"
        " WHEN blocked_reason IS NOT NULL THEN 'blocked' ELSE status END AS status, count(*) AS count"
        " FROM actor_workflow_executions WHERE " + condition + " GROUP BY 1, 2 ORDER BY 1, 2"
    )
    return [Count(r["workflow"], r["status"], int(r["count"])) for r in await _rows(conn, sql, params)]


async def needing_attention(conn: psycopg.AsyncConnection[Any], limit: int = 20) -> list[ExecutionLine]:
    """Open executions a runner left blocked, and finished ones that failed or hit a defect."""
    return await list_executions(conn, ListFilter(status="attention", limit=limit))


_PARKED: LiteralString = (
    "SELECT intent_id, tenant || '/' || actor_type || '/' || actor_id AS sender,"
    " target_type || '/' || target_id AS target, command, attempts, parked_at, parked_reason AS reason,"
    " last_error FROM actor_outbox WHERE parked_at IS NOT NULL ORDER BY parked_at DESC LIMIT %(limit)s"
)


async def parked_intents(conn: psycopg.AsyncConnection[Any], limit: int = 20) -> list[ParkedIntent]:
    """Intents the relay parked as undeliverable (``akter.outbox.admin``), newest first."""
    return [ParkedIntent(**row) for row in await _rows(conn, _PARKED, {"limit": limit})]
