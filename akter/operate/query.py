"""Finding executions across actors: a filter, newest-first pages behind a keyset cursor, and
counts grouped by workflow and status.

An operator's question is rarely "show me execution X" but "what is stuck?": every blocked
execution of a tenant, the failures of one workflow since the deploy, the executions whose key
starts with an order number. ``ExecutionFilter`` says which; ``read_page`` returns one page of
``ExecutionRow``s, newest first, and the cursor of the next page; ``iterate`` walks every page
(``client.executions()``), holding one page at a time and a pooled connection only while a page
is read; ``read_counts`` groups the matching executions by workflow, status and outcome.

Every filter combination is a single statement over ``actor_workflow_executions`` that the
indexes of ``sql/001_schema.sql`` serve with one index range, read backwards and stopped by the LIMIT
(``tests/integration/test_operate_scale.py`` checks the plans on 100,000 executions). Only the
rows of the page then look up their pending steps and timer, by primary key: the list never scans
the step table.

A row's ``status`` is what an operator means by it: ``running``, ``suspended``, ``blocked``
(suspended by a runner that could not run it, with ``blocked_reason``), ``paused`` (by an
operator, ``paused_by``), ``needs_attention`` (``attention_reason``: an attempt whose outcome is
unknown, or passes that failed in a row, ``pass_errors``), ``finished`` (with its ``outcome``).
``waiting`` says in one line why it is where it is (``akter.operate.why``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, LiteralString

import attrs
import psycopg
import psycopg_pool
from psycopg.rows import dict_row

from akter.errors import InvalidInput
from akter.ids import ActorRef, ExecutionId
from akter.operate.why import Pending, Rest, why
from akter.workflow.core.driver import StepKey

STATUSES = ("running", "suspended", "blocked", "paused", "needs_attention", "finished")
OUTCOMES = ("succeeded", "failed", "defect", "interrupted")
#: the most rows one page may hold: pages are buffers, and buffers are bounded
MAX_PAGE = 1000
DEFAULT_PAGE = 100


def _names(kind: str, allowed: Sequence[str], value: str | Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    names = (value,) if isinstance(value, str) else tuple(value)
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise InvalidInput(f"unknown {kind} {', '.join(map(repr, unknown))}; one of {', '.join(allowed)}")
    return tuple(sorted(set(names), key=allowed.index))


def _statuses(value: str | Iterable[str] | None) -> tuple[str, ...]:
    return _names("status", STATUSES, value)


def _outcomes(value: str | Iterable[str] | None) -> tuple[str, ...]:
    return _names("outcome", OUTCOMES, value)


def _name_of(value: object) -> str | None:
    """An actor type or workflow given as its declaration or as its name."""
    if value is None or isinstance(value, str):
        return checked_text("actor_type", value)
    name = getattr(value, "name", None)
    if not isinstance(name, str):
        raise InvalidInput(f"expected a name or a declaration, got {type(value).__name__}")
    return checked_text("actor_type", name)


#: the longest text a filter field may hold: far beyond any name or key akter stores
MAX_TEXT = 1024


def checked_text(name: str, value: object) -> str | None:
    """``value`` if it is text PostgreSQL can compare (a ``str``, UTF-8, no NUL, at most
    ``MAX_TEXT`` characters), else ``InvalidInput`` naming the field ``name``: the one check of a
    filter's text, whether it came from the API, ``akter executions`` or the page's query string."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be text, not {type(value).__name__}")
    if "\x00" in value:
        at = value.index("\x00")
        raise InvalidInput(f"{name} holds a NUL character (at {at}), which no stored text can")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{name} is not valid UTF-8 at position {exc.start}") from None
    if len(value) > MAX_TEXT:
        raise InvalidInput(f"{name} is {len(value)} characters long; a filter's text is at most {MAX_TEXT}")
    return value


def _tenant(value: object) -> str | None:
    return checked_text("tenant", value)


def _actor_id(value: object) -> str | None:
    return checked_text("actor_id", value)


def _workflow(value: object) -> str | None:
    return checked_text("workflow", value)


def _key_prefix(value: object) -> str | None:
    return checked_text("key_prefix", value)


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInput(f"expected a datetime, got {type(value).__name__}")
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


@attrs.frozen(kw_only=True)
class ExecutionFilter:
    """Which executions to find; every criterion given must hold. ``actor_type`` and
    ``workflow`` take a name or the declaration (a workflow also names its actor type);
    ``status`` and ``outcome`` one name or several (any of them); naive datetimes are UTC; the
    time bounds are exclusive. ``actor_id`` needs ``tenant`` and ``actor_type``."""

    tenant: str | None = attrs.field(default=None, converter=_tenant)
    actor_type: str | None = attrs.field(default=None, converter=_name_of)
    actor_id: str | None = attrs.field(default=None, converter=_actor_id)
    #: the member's name (``Job``), or with its actor type as ``counts`` prints it (``Desk.Job``)
    workflow: str | None = attrs.field(default=None, converter=_workflow)
    status: tuple[str, ...] = attrs.field(default=(), converter=_statuses)
    outcome: tuple[str, ...] = attrs.field(default=(), converter=_outcomes)
    started_after: datetime | None = attrs.field(default=None, converter=_utc)
    started_before: datetime | None = attrs.field(default=None, converter=_utc)
    finished_after: datetime | None = attrs.field(default=None, converter=_utc)
    finished_before: datetime | None = attrs.field(default=None, converter=_utc)
    key_prefix: str | None = attrs.field(default=None, converter=_key_prefix)

    @classmethod
    def of(cls, where: ExecutionFilter | None = None, **criteria: Any) -> ExecutionFilter:
        """``where``, or a filter built from keyword criteria (a workflow declaration given as
        ``workflow`` also sets ``actor_type``); an unknown criterion is ``InvalidInput``."""
        if where is not None:
            if criteria:
                raise InvalidInput("give a filter or keyword criteria, not both")
            return where
        workflow = criteria.get("workflow")
        if workflow is not None and not isinstance(workflow, str):
            actor = getattr(workflow, "actor", None)
            criteria = {**criteria, "workflow": _name_of(workflow)}
            if actor is not None:
                criteria.setdefault("actor_type", actor.name)
        try:
            return cls(**criteria)
        except TypeError as exc:
            fields = ", ".join(f.name for f in attrs.fields(cls))
            raise InvalidInput(f"{exc}; the criteria are {fields}") from exc

    def __attrs_post_init__(self) -> None:
        if self.actor_id is not None and (self.tenant is None or self.actor_type is None):
            raise InvalidInput("an actor id names an actor only with its tenant and actor type")

    def conditions(self) -> tuple[LiteralString, dict[str, Any]]:
        """The WHERE clause (over ``actor_workflow_executions``, unaliased) and its parameters."""
        parts: list[LiteralString] = []
        params: dict[str, Any] = {}
        exact: list[tuple[LiteralString, LiteralString, str | None]] = [
            ("tenant", "tenant = %(tenant)s", self.tenant),
            ("actor_type", "actor_type = %(actor_type)s", self.actor_type),
            ("key_prefix", "starts_with(key, %(key_prefix)s)", self.key_prefix),
        ]
        for name, condition, value in exact:
            if value is not None:
                parts.append(condition)
                params[name] = value
        if self.workflow is not None:
            parts.append(self._workflow_condition(self.workflow, params))
        if self.actor_id is not None and self.tenant is not None and self.actor_type is not None:
            parts.append("routing_key = %(rk)s AND actor_id = %(actor_id)s")
            params |= ActorRef(self.tenant, self.actor_type, self.actor_id).key_params()
        if self.status:
            parts.append("(" + " OR ".join(_STATUS_CONDITIONS[s] for s in self.status) + ")")
        if self.outcome:
            # the finished condition beside the outcome lets the planner use the partial index
            parts.append("outcome = ANY(%(outcome)s::text[])")
            params["outcome"] = list(self.outcome)
            if "succeeded" not in self.outcome:
                parts.append("outcome <> 'succeeded'")
        times: list[tuple[str, LiteralString, datetime | None]] = [
            ("started_after", "started_at > %(started_after)s", self.started_after),
            ("started_before", "started_at < %(started_before)s", self.started_before),
            ("finished_after", "finished_at > %(finished_after)s", self.finished_after),
            ("finished_before", "finished_at < %(finished_before)s", self.finished_before),
        ]
        for name, condition, moment in times:
            if moment is not None:
                parts.append(condition)
                params[name] = moment
        return (" AND ".join(parts) if parts else "true"), params

    def _workflow_condition(self, name: str, params: dict[str, Any]) -> LiteralString:
        """``workflow`` as a member's name, or spelt ``ActorType.Workflow`` as ``counts`` prints
        it and ``workflows replay --workflow`` takes it. Names may hold dots themselves, so a
        dotted spelling matches the member of that name and every split of it into an actor type
        and a member (``a.b.C`` is ``a.b`` + ``C`` or ``a`` + ``b.C``)."""
        params["workflow"] = name
        splits = [
            (name[:i], name[i + 1 :])
            for i, c in enumerate(name)
            if c == "." and 0 < i < len(name) - 1 and self.actor_type in (None, name[:i])
        ]
        if not splits:
            return "workflow = %(workflow)s"
        params["workflow_types"] = [t for t, _ in splits]
        params["workflow_names"] = [w for _, w in splits]
        return (
            "(workflow = %(workflow)s OR (actor_type, workflow) IN"
            " (SELECT * FROM unnest(%(workflow_types)s::text[], %(workflow_names)s::text[])))"
        )


_STATUS_CONDITIONS: dict[str, LiteralString] = {
    "running": "status = 'running'",
    "suspended": "(status = 'suspended' AND blocked_reason IS NULL)",
    "blocked": "(status = 'suspended' AND blocked_reason IS NOT NULL)",
    "paused": "status = 'paused'",
    "needs_attention": "status = 'needs_attention'",
    "finished": "status = 'finished'",
}

# ---- a page -----------------------------------------------------------------------------------


@attrs.frozen
class ExecutionRow:
    """One execution as the list shows it: the readable parts of its id beside the id, its
    status, and why it is there (``waiting``)."""

    execution_id: str
    tenant: str
    actor_type: str
    actor_id: str
    workflow: str
    key: str
    #: running, suspended, blocked (suspended by a runner that could not run it) or finished
    status: str
    outcome: str | None
    blocked_reason: str | None
    interrupt_requested: bool
    interrupted_by: str | None
    interrupt_reason: str | None
    retry_of: str | None
    retried_by: str | None
    started_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    #: when its timer fires (``None``: no timer, as for a finished execution)
    timer_due_at: datetime | None
    #: one line: why it is where it is ("sleeping until …", "blocked: …", "finished: failed")
    waiting: str
    #: a pause asked for (the execution is ``paused`` once its pass held): when, by whom, why
    paused_at: datetime | None = None
    paused_by: str | None = None
    pause_reason: str | None = None
    #: why it needs attention, and since when
    attention_reason: str | None = None
    attention_at: datetime | None = None
    #: passes that failed in a row, and their errors (``{"at", "error"}``), oldest first
    failed_passes: int = 0
    pass_errors: tuple[dict[str, Any], ...] = ()
    #: the last resolution of its attention: who, and what they decided
    resolved_by: str | None = None
    resolution: str | None = None

    @property
    def actor(self) -> str:
        return f"{self.tenant}/{self.actor_type}/{self.actor_id}"


@attrs.frozen
class Page:
    rows: list[ExecutionRow]
    #: pass it as ``after`` for the next page; ``None`` when this is the last
    next_cursor: str | None


_COLUMNS: LiteralString = """routing_key, execution_id, tenant, actor_type, actor_id, workflow, key,
       status, outcome, interrupt, interrupted_by, interrupt_reason, blocked_reason, retry_of,
       retried_by, started_at, updated_at, finished_at, paused_at, paused_by, pause_reason,
       attention_reason, attention_at, failed_passes, pass_errors, resolved_by, resolution"""

_ORDER: LiteralString = "started_at DESC, routing_key DESC, execution_id DESC"

# The page first (one index range, stopped by the LIMIT), then for its rows only: the pending
# step that decides what it waits for (by primary key) and its timer (by the timer-key index).
_PAGE_HEAD: LiteralString = (
    "SELECT x.*, p.step AS p_step, p.scope AS p_scope, p.occurrence AS p_occurrence, p.kind AS p_kind,"
    " p.attempt AS p_attempt, p.wait_tag AS p_tag,"
    " p.after_event AS p_after, p.due_at AS p_due, p.started_at AS p_started,"
    " t.due_at AS timer_due_at, t.parked_reason, akter_now() AS now FROM (SELECT "
    + _COLUMNS
    + " FROM actor_workflow_executions WHERE "
)
_PAGE_TAIL: LiteralString = (
    " ORDER BY "
    + _ORDER
    + """ LIMIT %(limit)s) x
LEFT JOIN LATERAL (
    SELECT s.step, s.scope, s.occurrence, s.kind, s.attempt, s.wait_tag,
           coalesce(s.scanned, s.wait_cursor) AS after_event, s.due_at, s.started_at
      FROM actor_workflow_step s
     WHERE s.routing_key = x.routing_key AND s.execution_id = x.execution_id AND s.exit IS NULL
       AND x.status <> 'finished'
     ORDER BY s.due_at NULLS LAST, s.started_at
     LIMIT 1) p ON true
LEFT JOIN LATERAL (
    SELECT o.due_at, o.parked_reason
      FROM actor_outbox o
     WHERE o.routing_key = x.routing_key AND o.tenant = x.tenant AND o.actor_type = x.actor_type
       AND o.actor_id = x.actor_id AND o.timer_key = 'wf:' || x.execution_id) t ON true
 ORDER BY x."""
    + _ORDER.replace(", ", ", x.")
)
_AFTER: LiteralString = " AND (started_at, routing_key, execution_id) < (%(c_at)s, %(c_rk)s, %(c_eid)s)"


def page_query(where: ExecutionFilter, *, limit: int, after: str | None = None) -> tuple[str, dict[str, Any]]:
    """The statement of one page and its parameters (``EXPLAIN`` reads it in the tests)."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(f"a page holds 1..{MAX_PAGE} rows, not {limit}")
    conditions, params = where.conditions()
    sql: str = _PAGE_HEAD + conditions
    if after is not None:
        at, rk, eid = decode_cursor(after)
        sql += _AFTER
        params |= {"c_at": at, "c_rk": rk, "c_eid": eid}
    # one more row than the page holds says whether there is a next page
    return sql + _PAGE_TAIL, {**params, "limit": limit + 1}


def encode_cursor(row: dict[str, Any]) -> str:
    raw = json.dumps([row["started_at"].isoformat(), row["routing_key"], row["execution_id"]])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(text: str) -> tuple[datetime, int, str]:
    """A page's cursor, checked as a filter's fields are: what the database could not compare
    (an id with a NUL, a routing key past 64 bits) is ``InvalidInput`` here, not its error."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        at, rk, eid = json.loads(raw)
        moment, routing_key, execution_id = datetime.fromisoformat(at), int(rk), checked_text("cursor", eid)
    except (ValueError, TypeError, InvalidInput) as exc:
        raise InvalidInput(f"{text[:40]!r} is not a cursor returned by a page of executions") from exc
    if execution_id is None or not -(2**63) <= routing_key < 2**63:
        raise InvalidInput(f"{text[:40]!r} is not a cursor returned by a page of executions")
    return moment, routing_key, execution_id


def _status(row: dict[str, Any]) -> str:
    if row["status"] == "suspended" and row["blocked_reason"] is not None:
        return "blocked"
    return str(row["status"])


#: the columns an ``ExecutionRow`` shows as they are stored
_COPIED = (
    "execution_id",
    "tenant",
    "actor_type",
    "actor_id",
    "workflow",
    "key",
    "outcome",
    "blocked_reason",
    "interrupted_by",
    "interrupt_reason",
    "retry_of",
    "retried_by",
    "started_at",
    "updated_at",
    "finished_at",
    "timer_due_at",
    "paused_at",
    "paused_by",
    "pause_reason",
    "attention_reason",
    "attention_at",
    "failed_passes",
    "resolved_by",
    "resolution",
)


def _row(row: dict[str, Any], *, relative: bool) -> ExecutionRow:
    pending = []
    if row["p_step"] is not None:
        pending.append(
            Pending(
                step=str(StepKey(row["p_step"], row["p_scope"], row["p_occurrence"])),
                kind=row["p_kind"],
                attempt=row["p_attempt"],
                wait_tag=row["p_tag"],
                after_event=row["p_after"],
                due_at=row["p_due"],
                started_at=row["p_started"],
            )
        )
    copied = {name: row[name] for name in _COPIED}
    if row["status"] == "finished":  # a pause asked for while it ran is no pause once it finished
        copied |= dict.fromkeys(("paused_at", "paused_by", "pause_reason"))
    return ExecutionRow(
        **copied,
        status=_status(row),
        interrupt_requested=row["interrupt"],
        pass_errors=tuple(row["pass_errors"] or ()),
        waiting=why(
            status=row["status"],
            outcome=row["outcome"],
            blocked_reason=row["blocked_reason"],
            interrupt=row["interrupt"],
            interrupted_by=row["interrupted_by"],
            interrupt_reason=row["interrupt_reason"],
            pending=pending,
            timer_due_at=row["timer_due_at"],
            timer_parked=row["parked_reason"],
            now=row["now"] if relative else None,
            rest=Rest.of(copied),
        ),
    )


async def read_page(
    conn: psycopg.AsyncConnection[Any],
    where: ExecutionFilter,
    *,
    limit: int = DEFAULT_PAGE,
    after: str | None = None,
    relative: bool = True,
) -> Page:
    """One page of the executions ``where`` matches, newest first, after the cursor ``after``.
    ``relative`` false: each row's ``waiting`` gives times alone, not how far they are from now
    (as JSON carries them)."""
    sql, params = page_query(where, limit=limit, after=after)
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(sql, params)
    rows = await cur.fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    return Page([_row(r, relative=relative) for r in rows], encode_cursor(rows[-1]) if more else None)


async def iterate(
    pool: psycopg_pool.AsyncConnectionPool[Any], where: ExecutionFilter, *, page_size: int = DEFAULT_PAGE
) -> AsyncIterator[ExecutionRow]:
    """Every execution ``where`` matches, newest first, a page at a time. A connection is held
    only while a page is read, never while the caller works through it."""
    after: str | None = None
    while True:
        async with pool.connection() as conn:
            page = await read_page(conn, where, limit=page_size, after=after)
        for row in page.rows:
            yield row
        if page.next_cursor is None:
            return
        after = page.next_cursor


# ---- counts -----------------------------------------------------------------------------------


@attrs.frozen
class Count:
    actor_type: str
    workflow: str
    status: str
    outcome: str | None
    count: int


_COUNTS: LiteralString = """SELECT actor_type, workflow,
       CASE WHEN status = 'suspended' AND blocked_reason IS NOT NULL THEN 'blocked' ELSE status END
           AS status,
       outcome, count(*) AS n
  FROM actor_workflow_executions WHERE """


async def read_counts(conn: psycopg.AsyncConnection[Any], where: ExecutionFilter) -> list[Count]:
    """How many executions ``where`` matches, by actor type, workflow, status and outcome."""
    conditions, params = where.conditions()
    cur = await conn.execute(_COUNTS + conditions + " GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4", params)
    return [Count(t, w, s, o, int(n)) for t, w, s, o, n in await cur.fetchall()]


def readable(execution_id: str) -> str:
    """The readable parts of an execution id: ``tenant/Type/id Workflow 'key'`` (or the id as it
    is, when it is not one)."""
    try:
        eid = ExecutionId.parse(execution_id)
    except InvalidInput:
        return execution_id
    return f"{eid.owner} {eid.workflow} {eid.key!r}"
