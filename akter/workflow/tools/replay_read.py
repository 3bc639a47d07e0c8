"""The replay check's reads: open executions, and a sample of finished ones, with their steps.

Everything is read in one ``REPEATABLE READ, READ ONLY`` transaction on a connection of the
check's own (``replay_database``), so the check sees one snapshot and cannot write — not even a
migration or an accepted manifest, which ``akter workflows check`` would store.

* ``OPEN_PAGE``: open executions in primary-key order, ``PAGE`` at a time, each page after the
  last key of the one before (keyset paging: every page is an index range scan, however many
  pages came before). Each row carries its steps as arrays (a lateral aggregate over the step
  table's primary key), so a page is one round trip whatever the number of steps.
* ``FINISHED``: the most recently finished executions that still have their steps
  (``App(drop_steps_at_finish=True)`` and retention remove them), at most ``sample`` of them:
  the newest of each bucket through the index on (bucket, finished time), then the newest of
  those — 256 short index scans instead of a sort of every finished execution.

Rows become ``replay.RecordedExecution`` values (stored bytes read as cattrs primitives; a value
that does not read is kept as the execution's ``unreadable`` reason) and are replayed page by
page, so memory holds one page and the tally.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, LiteralString

import psycopg

from akter import codec
from akter.errors import ConfigurationError, CorruptRecord
from akter.outbox.intents import decode_caller
from akter.workflow.api.declare import Workflow
from akter.workflow.core.driver import StepKey
from akter.workflow.tools.replay import RecordedExecution, RecordedStep
from akter.workflow.tools.replay_report import ReplayReport, Tally, replay_all

#: open executions read per round trip
PAGE = 1000
#: finished executions sampled when not told
DEFAULT_SAMPLE = 100
#: stored values of at most this many bytes are decoded once per check (see ``_Reader``)
SHORT = 96
#: how many distinct short values (and principals) a check remembers
REMEMBERED = 10_000
_MISSING = object()

_COLUMNS = """
SELECT e.routing_key, e.execution_id, e.tenant, e.actor_type, e.actor_id, e.workflow, e.key, e.status,
       e.payload, e.principal, e.versions, e.interrupt, e.outcome, e.result,
       e.run_number, s.steps, s.scopes, s.occurrences, s.attempts, s.kinds, s.exits, s.started_us, s.due_ms,
       s.cursors, s.scanned"""

_STEPS = """
  LEFT JOIN LATERAL (
       SELECT array_agg(s.step) AS steps, array_agg(s.scope) AS scopes,
              array_agg(s.occurrence) AS occurrences, array_agg(s.attempt) AS attempts,
              array_agg(s.kind) AS kinds, array_agg(s.exit) AS exits,
              array_agg((extract(epoch FROM s.started_at) * 1000000)::bigint) AS started_us,
              array_agg((extract(epoch FROM s.due_at) * 1000)::bigint) AS due_ms,
              array_agg(s.wait_cursor) AS cursors, array_agg(s.scanned) AS scanned
         FROM actor_workflow_step s
        WHERE s.routing_key = e.routing_key AND s.execution_id = e.execution_id) s ON true"""

# Only the workflows asked for: all of them when the arrays are empty.
_CHOSEN = """
   AND (cardinality(%(types)s::text[]) = 0
        OR (e.actor_type, e.workflow) IN (SELECT * FROM unnest(%(types)s::text[], %(names)s::text[])))"""

OPEN_PAGE: LiteralString = (
    _COLUMNS
    + """
  FROM actor_workflow_executions e"""
    + _STEPS
    + """
 WHERE e.status <> 'finished' AND (e.routing_key, e.execution_id) > (%(rk)s, %(eid)s)
   AND (%(until)s::bigint IS NULL OR e.routing_key < %(until)s::bigint)"""
    + _CHOSEN
    + """
 ORDER BY e.routing_key, e.execution_id
 LIMIT %(page)s"""
)

FINISHED: LiteralString = (
    """
WITH newest AS (
    SELECT n.routing_key, n.execution_id, n.finished_at
      FROM generate_series(-128, 127) AS b(bucket)
     CROSS JOIN LATERAL (
           SELECT e.routing_key, e.execution_id, e.finished_at
             FROM actor_workflow_executions e
            WHERE (e.routing_key >> 56) = b.bucket AND e.status = 'finished'"""
    + _CHOSEN
    + """
              AND EXISTS (SELECT 1 FROM actor_workflow_step s
                           WHERE s.routing_key = e.routing_key AND s.execution_id = e.execution_id)
            ORDER BY e.finished_at DESC
            LIMIT %(sample)s) n
     ORDER BY n.finished_at DESC
     LIMIT %(sample)s)"""
    + _COLUMNS
    + """
  FROM newest x
  JOIN actor_workflow_executions e ON e.routing_key = x.routing_key AND e.execution_id = x.execution_id"""
    + _STEPS
    + """
 ORDER BY x.finished_at DESC"""
)

BY_ID: LiteralString = (
    _COLUMNS
    + """
  FROM unnest(%(rks)s::bigint[], %(eids)s::text[]) AS x(routing_key, execution_id)
  JOIN actor_workflow_executions e ON e.routing_key = x.routing_key AND e.execution_id = x.execution_id"""
    + _STEPS
)

NOW: LiteralString = "SELECT (extract(epoch FROM akter_now()) * 1000)::bigint"

_FIRST_KEY = (-(2**63), "")


def choose(declared: Iterable[Workflow[Any, Any]], names: Sequence[str]) -> list[Workflow[Any, Any]]:
    """The workflows ``--workflow`` names (``Workflow`` or ``ActorType.Workflow``), all when none
    are named; a ``ConfigurationError`` naming what is not declared or is ambiguous."""
    workflows = list(declared)
    if not names:
        return workflows
    chosen: list[Workflow[Any, Any]] = []
    for name in names:
        matches = [w for w in workflows if name in (w.name, f"{w.actor.name}.{w.name}")]
        if not matches:
            known = ", ".join(sorted(f"{w.actor.name}.{w.name}" for w in workflows)) or "none"
            raise ConfigurationError(f"--workflow {name!r} names no workflow of APP (it declares: {known})")
        if len(matches) > 1:
            raise ConfigurationError(
                f"--workflow {name!r} is declared by several actor types: write "
                + " or ".join(f"{w.actor.name}.{w.name}" for w in matches)
            )
        chosen.extend(w for w in matches if w not in chosen)
    return chosen


def _chosen_params(workflows: Sequence[Workflow[Any, Any]] | None) -> dict[str, list[str]]:
    if workflows is None:
        return {"types": [], "names": []}
    return {"types": [w.actor.name for w in workflows], "names": [w.name for w in workflows]}


class _Reader:
    """Rows of ``_COLUMNS`` as ``RecordedExecution`` values. Short stored values (a clock's
    exit, a race's winner, a principal) repeat across executions: each distinct one is decoded
    once per check. The primitives are shared, and nothing that reads them mutates them."""

    def __init__(self) -> None:
        self.short: dict[bytes, Any] = {}
        self.principals: dict[bytes, Any] = {}

    def primitive(self, data: Any) -> Any:
        if data is None:
            return None
        raw = bytes(data)
        if len(raw) > SHORT:
            return codec.decode_primitive(raw)
        value = self.short.get(raw, _MISSING)
        if value is _MISSING:
            value = codec.decode_primitive(raw)
            if len(self.short) < REMEMBERED:
                self.short[raw] = value
        return value

    def principal(self, data: Any) -> Any:
        raw = bytes(data)
        if raw not in self.principals:
            principal = decode_caller(raw).on_behalf_of
            if len(self.principals) >= REMEMBERED:
                return principal
            self.principals[raw] = principal
        return self.principals[raw]

    def execution(self, row: Sequence[Any]) -> RecordedExecution:
        (_, eid, tenant, actor_type, actor_id, workflow, key, status, payload, principal, versions,
         interrupt, outcome, result, run_number, *steps) = row  # fmt: skip
        base = {
            "execution_id": eid,
            "tenant": tenant,
            "actor_type": actor_type,
            "actor_id": actor_id,
            "workflow": workflow,
            "key": key,
            "status": status,
            "versions": versions,
            "interrupt": interrupt,
            "outcome": outcome,
            "run_number": run_number,
        }
        try:
            return RecordedExecution(
                **base,
                payload=self.primitive(payload),
                principal=self.principal(principal),
                steps=self._steps(*steps),
                result=self.primitive(result),
            )
        except CorruptRecord as exc:
            return RecordedExecution(**base, payload=None, principal=None, steps=(), unreadable=str(exc))

    def _steps(self, *columns: Any) -> tuple[RecordedStep, ...]:
        if columns[0] is None:  # no step recorded: the aggregates are NULL
            return ()
        return tuple(
            RecordedStep(
                key=StepKey(step, scope, occurrence),
                attempt=attempt,
                kind=kind,
                exit=self.primitive(exit_),
                started_us=started_us,
                due_ms=due_ms,
                cursor=cursor,
                scanned=scanned,
            )
            for step, scope, occurrence, attempt, kind, exit_, started_us, due_ms, cursor, scanned in zip(
                *columns, strict=True
            )
        )


async def read_only(conn: psycopg.AsyncConnection[Any]) -> None:
    """Begin the check's snapshot: call inside ``conn.transaction()``."""
    await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")


async def open_pages(
    conn: psycopg.AsyncConnection[Any],
    workflows: Sequence[Workflow[Any, Any]] | None,
    page: int = PAGE,
    *,
    keys: tuple[int, int | None] = (_FIRST_KEY[0], None),
) -> AsyncIterator[list[RecordedExecution]]:
    """Every open execution (of ``workflows``; None: all) whose routing key is in ``keys``
    (from, up to but excluding; None: the end), a page at a time, in key order.

    The next page is asked for before this one is handed out, so the server reads it while the
    caller replays this one (the replay is Python CPU; the read, the server's)."""
    params: dict[str, Any] = {**_chosen_params(workflows), "page": page, "until": keys[1]}
    read = _Reader()

    async def fetch(after: tuple[int, str]) -> list[Any]:
        cur = conn.cursor(binary=True)
        await cur.execute(OPEN_PAGE, {**params, "rk": after[0], "eid": after[1]})
        return await cur.fetchall()

    ahead = asyncio.ensure_future(fetch((keys[0], "")))
    try:
        while True:
            rows = await ahead
            if len(rows) == page:
                ahead = asyncio.ensure_future(fetch((rows[-1][0], rows[-1][1])))
                await asyncio.sleep(0)  # let it send its query before the caller takes the CPU
            if rows:
                yield [read.execution(r) for r in rows]
            if len(rows) < page:
                return
    finally:
        if not ahead.done():  # the caller stopped early: the page read ahead is not wanted
            ahead.cancel()
            await asyncio.gather(ahead, return_exceptions=True)


async def finished_sample(
    conn: psycopg.AsyncConnection[Any], workflows: Sequence[Workflow[Any, Any]] | None, sample: int
) -> list[RecordedExecution]:
    """The ``sample`` most recently finished executions that kept their steps."""
    if sample <= 0:
        return []
    cur = conn.cursor(binary=True)
    await cur.execute(FINISHED, {**_chosen_params(workflows), "sample": sample})
    return [_Reader().execution(r) for r in await cur.fetchall()]


async def by_id(conn: psycopg.AsyncConnection[Any], execution_ids: Sequence[str]) -> list[RecordedExecution]:
    """The named executions (any status), in the order named; an unknown id is left out."""
    from akter.ids import ExecutionId

    owners = [ExecutionId.parse(e).owner.routing_key for e in execution_ids]
    cur = conn.cursor(binary=True)
    await cur.execute(BY_ID, {"rks": owners, "eids": list(execution_ids)})
    found = {r.execution_id: r for r in map(_Reader().execution, await cur.fetchall())}
    return [found[e] for e in execution_ids if e in found]


async def now_ms(conn: psycopg.AsyncConnection[Any]) -> int:
    row = await (await conn.execute(NOW)).fetchone()
    return int(row[0]) if row else 0


async def check(
    conn: psycopg.AsyncConnection[Any],
    declared: Iterable[Workflow[Any, Any]],
    *,
    sample: int = DEFAULT_SAMPLE,
    only: Sequence[Workflow[Any, Any]] | None = None,
) -> ReplayReport:
    """Replay every open execution and the finished sample (of ``only``, when given) under
    ``declared``'s bodies, in one read-only snapshot."""
    tally = Tally((w.actor.name, w.name) for w in only or ())
    async with conn.transaction():
        await read_only(conn)
        await replay_snapshot(conn, declared, tally, sample=sample, only=only)
    return tally.report()


async def replay_snapshot(
    conn: psycopg.AsyncConnection[Any],
    declared: Iterable[Workflow[Any, Any]],
    tally: Tally,
    *,
    sample: int,
    only: Sequence[Workflow[Any, Any]] | None,
    keys: tuple[int, int | None] = (_FIRST_KEY[0], None),
) -> None:
    """``check``'s work inside a snapshot the caller began: the open executions of ``keys``'
    routing-key range and the finished sample, replayed into ``tally``."""
    declared = list(declared)
    now = await now_ms(conn)
    async for page in open_pages(conn, only, keys=keys):
        replay_all(declared, page, now_ms=now, into=tally)
    replay_all(declared, await finished_sample(conn, only, sample), now_ms=now, into=tally)
