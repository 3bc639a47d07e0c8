"""Reading the views: one read-only, repeatable-read snapshot per view; every query names the
routing key first; nothing is ever written."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, LiteralString, Protocol

import psycopg
from psycopg.rows import dict_row

from akter.actor.upgrade import stored_type
from akter.errors import AkterError
from akter.ids import ACTOR_KEY, ActorRef, ExecutionId
from akter.workflow.api.declare import workflows_of

if TYPE_CHECKING:
    from akter.actor.declare import Actor, Command
    from akter.workflow.api.declare import Workflow

from akter.inspect.children import read_children
from akter.inspect.decode import (
    Shown,
    decode_exit,
    decode_value,
    ok_as,
    one_line,
    parse_stored,
    step_ok,
    undecodable,
)
from akter.inspect.limits import DEFAULT_LIMIT
from akter.inspect.views import (
    ActorView,
    EventView,
    ExecutionSummary,
    ExecutionView,
    OutboxView,
    ReceiptView,
    StepView,
)

# ---- reading ----------------------------------------------------------------------------------

_KEY = ACTOR_KEY

_ACTOR: LiteralString = (
    "SELECT generation, version, event_seq, created_at, akter_now() AS now FROM actor_generations WHERE "
    + _KEY
)
_STATE: LiteralString = "SELECT state, shape, updated_at FROM actor_state WHERE " + _KEY
_RECEIPTS: LiteralString = (
    "SELECT command_id, command, failed, outcome, caller_key, created_at, expires_at"
    " FROM actor_receipts WHERE " + _KEY + " ORDER BY created_at DESC, command_id LIMIT %(limit)s"
)
_EVENTS: LiteralString = (
    "SELECT sequence, tag, value, command_id, created_at FROM actor_events WHERE "
    + _KEY
    + " AND sequence > %(after)s ORDER BY sequence DESC LIMIT %(limit)s"
)
_OUTBOX_COLUMNS = (
    "SELECT intent_id, timer_key, due_at, target_type, target_id, command, payload, caller, attempts,"
    " last_error, claimed_by, created_at, parked_at, parked_reason FROM actor_outbox WHERE "
)
_OUTBOX: LiteralString = _OUTBOX_COLUMNS + _KEY + " ORDER BY due_at, intent_id LIMIT %(limit)s"
_TIMER: LiteralString = _OUTBOX_COLUMNS + _KEY + " AND timer_key = 'wf:' || %(eid)s"
_COUNTS: LiteralString = (
    "SELECT (SELECT count(*) FROM actor_receipts WHERE "
    + _KEY
    + ") AS receipts, (SELECT count(*) FROM actor_events WHERE "
    + _KEY
    + ") AS events, (SELECT count(*) FROM actor_outbox WHERE "
    + _KEY
    + ") AS outbox, (SELECT count(*) FROM actor_workflow_executions WHERE "
    + _KEY
    + ") AS executions"
)
_EXECUTIONS: LiteralString = (
    "SELECT execution_id, workflow, key, status, outcome, interrupt, result, blocked_reason, started_at,"
    " finished_at FROM actor_workflow_executions WHERE "
    + _KEY
    + " ORDER BY started_at DESC, execution_id LIMIT %(limit)s"
)
_EXECUTION: LiteralString = """
SELECT execution_id, workflow, key, manifest_hash, payload, principal, versions, event_cursor, status,
       interrupt, outcome, result, blocked_reason, started_at, updated_at, finished_at, run_number,
       deadline_at, akter_now() AS now
  FROM actor_workflow_executions
 WHERE routing_key = %(rk)s AND execution_id = %(eid)s"""
_STEPS: LiteralString = """
SELECT step, scope, occurrence, attempt, kind, exit, due_at, wait_tag, wait_cursor, scanned, started_at,
       settled_at
  FROM actor_workflow_step
 WHERE routing_key = %(rk)s AND execution_id = %(eid)s
 ORDER BY started_at, step, scope, occurrence, attempt"""


class Declarations(Protocol):
    """What reading needs of an App (or an engine's sender): its actor types, to decode with."""

    @property
    def actors(self) -> Mapping[str, Actor[Any]]: ...


def _actor_of(app: Declarations, actor_type: str) -> Actor[Any] | None:
    return app.actors.get(actor_type)


def _workflow_of(app: Declarations, actor_type: str, name: str) -> Workflow[Any, Any] | None:
    actor = _actor_of(app, actor_type)
    workflows: dict[str, Workflow[Any, Any]] = workflows_of(actor)
    return workflows.get(name)


def _command_of(app: Declarations, actor_type: str, name: str) -> Command[Any, Any, Any] | None:
    actor = _actor_of(app, actor_type)
    return actor.commands.get(name) if actor is not None else None


def _receipt(app: Declarations, ref: ActorRef, row: dict[str, Any]) -> ReceiptView:
    command = _command_of(app, ref.actor_type, row["command"])
    where = f"command {ref.actor_type}.{row['command']}"
    outcome = decode_exit(
        bytes(row["outcome"]),
        where,
        ok_as(command.output) if command is not None else None,
        command.errors if command is not None else None,
    )
    return ReceiptView(
        command_id=row["command_id"],
        command=row["command"],
        failed=row["failed"],
        outcome=outcome,
        caller=row["caller_key"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
    )


def _event(app: Declarations, ref: ActorRef, row: dict[str, Any]) -> EventView:
    actor = _actor_of(app, ref.actor_type)
    event_type = actor.event_types.get(row["tag"]) if actor is not None else None
    if event_type is None:
        primitive, bad = parse_stored(bytes(row["value"]))
        value = bad or undecodable(
            f"{ref.actor_type} declares no event type {row['tag']} in this App", primitive
        )
    else:
        value = decode_value(bytes(row["value"]), event_type)
    return EventView(row["sequence"], row["tag"], value, row["command_id"], row["created_at"])


def _caller(data: bytes) -> Shown:
    from akter.outbox.intents import decode_caller

    primitive, bad = parse_stored(data)
    if bad is not None:
        return bad
    try:
        caller = decode_caller(bytes(data))
    except (AkterError, ValueError) as exc:
        return undecodable(one_line(exc), primitive)
    return Shown(text=repr(caller), data=primitive)


def _principal(data: bytes) -> Shown:
    """The principal an execution acts for, stored as the System caller its timers run as."""
    shown = _caller(data)
    if not shown.ok:
        return shown
    from akter.outbox.intents import decode_caller

    principal = decode_caller(bytes(data)).on_behalf_of
    return Shown(text="none" if principal is None else repr(principal), data=shown.data["on_behalf_of"])


def _outbox(app: Declarations, ref: ActorRef, row: dict[str, Any]) -> OutboxView:
    command = _command_of(app, row["target_type"], row["command"])
    if command is None:
        primitive, bad = parse_stored(bytes(row["payload"]))
        payload = bad or undecodable(
            f"this App declares no command {row['target_type']}.{row['command']}", primitive
        )
    else:
        payload = decode_value(bytes(row["payload"]), command.input)
    return OutboxView(
        intent_id=row["intent_id"],
        timer_key=row["timer_key"],
        due_at=row["due_at"],
        target=f"{ref.tenant}/{row['target_type']}/{row['target_id']}",
        command=row["command"],
        payload=payload,
        caller=_caller(bytes(row["caller"])),
        attempts=row["attempts"],
        last_error=row["last_error"],
        claimed_by=row["claimed_by"],
        created_at=row["created_at"],
        parked_at=row["parked_at"],
        parked_reason=row["parked_reason"],
    )


def _result(workflow: Workflow[Any, Any] | None, where: str, data: bytes | None) -> Shown | None:
    if data is None:
        return None
    if workflow is None:
        return decode_exit(bytes(data), where, None, None)
    return decode_exit(bytes(data), where, ok_as(workflow.output), workflow.errors)


def _summary(app: Declarations, ref: ActorRef, row: dict[str, Any]) -> ExecutionSummary:
    workflow = _workflow_of(app, ref.actor_type, row["workflow"])
    return ExecutionSummary(
        execution_id=row["execution_id"],
        workflow=row["workflow"],
        key=row["key"],
        status=row["status"],
        outcome=row["outcome"],
        interrupt=row["interrupt"],
        result=_result(workflow, f"workflow {ref.actor_type}.{row['workflow']}", row["result"]),
        blocked_reason=row["blocked_reason"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
    )


def _step(workflow: Workflow[Any, Any] | None, row: dict[str, Any]) -> StepView:
    exit_: Shown | None = None
    if row["exit"] is not None:
        step = workflow.steps.get(row["step"]) if workflow is not None else None
        where = f"step {row['step']}" + (f" of {workflow!r}" if workflow is not None else "")
        ok = step_ok(step)
        errors: Sequence[type[Exception]] | None = None
        if step is not None:
            errors = getattr(step, "errors", ())
        elif row["kind"] != "activity":
            errors = ()  # only activities declare errors: any error tag elsewhere is undecodable
        exit_ = decode_exit(bytes(row["exit"]), where, ok, errors)
    return StepView(
        step=row["step"],
        occurrence=row["occurrence"],
        scope=row["scope"],
        attempt=row["attempt"],
        kind=row["kind"],
        exit=exit_,
        due_at=row["due_at"],
        wait_tag=row["wait_tag"],
        wait_cursor=row["wait_cursor"],
        scanned=row["scanned"],
        started_at=row["started_at"],
        settled_at=row["settled_at"],
    )


async def _all(
    conn: psycopg.AsyncConnection[Any], sql: LiteralString, params: dict[str, Any]
) -> list[dict[str, Any]]:
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(sql, params)
    return await cur.fetchall()


async def read_events(
    conn: psycopg.AsyncConnection[Any],
    app: Declarations,
    ref: ActorRef,
    *,
    after: int = 0,
    limit: int = DEFAULT_LIMIT,
) -> list[EventView]:
    """The actor's events above sequence ``after``: the newest ``limit`` of them, oldest first."""
    rows = await _all(conn, _EVENTS, {**ref.key_params(), "after": after, "limit": limit})
    return [_event(app, ref, row) for row in reversed(rows)]


async def read_actor(
    conn: psycopg.AsyncConnection[Any], app: Declarations, ref: ActorRef, *, limit: int = DEFAULT_LIMIT
) -> ActorView | None:
    """Everything stored for ``ref`` (the newest ``limit`` rows of each kind), or ``None`` when
    the actor never committed a turn."""
    params = {**ref.key_params(), "limit": limit}
    head = await _all(conn, _ACTOR, params)
    if not head:
        return None
    state_rows = await _all(conn, _STATE, params)
    actor = _actor_of(app, ref.actor_type)
    state: Shown | None = None
    if state_rows:
        data = bytes(state_rows[0]["state"])
        if actor is None:
            primitive, bad = parse_stored(data)
            state = bad or undecodable(f"this App declares no actor type {ref.actor_type}", primitive)
        else:
            # as the type it was written as: a state of an older shape is shown as it is stored
            state = decode_value(data, stored_type(actor, state_rows[0]["shape"]))
    counts = (await _all(conn, _COUNTS, params))[0]
    return ActorView(
        now=head[0]["now"],
        actor=str(ref),
        routing_key=ref.routing_key,
        bucket=ref.bucket,
        generation=head[0]["generation"],
        version=head[0]["version"],
        event_seq=head[0]["event_seq"],
        created_at=head[0]["created_at"],
        state=state,
        state_updated_at=state_rows[0]["updated_at"] if state_rows else None,
        executions=[_summary(app, ref, r) for r in await _all(conn, _EXECUTIONS, params)],
        receipts=[_receipt(app, ref, r) for r in await _all(conn, _RECEIPTS, params)],
        events=await read_events(conn, app, ref, limit=limit),
        outbox=[_outbox(app, ref, r) for r in await _all(conn, _OUTBOX, params)],
        counts={k: int(v) for k, v in counts.items()},
    )


async def read_execution(
    conn: psycopg.AsyncConnection[Any], app: Declarations, eid: ExecutionId
) -> ExecutionView | None:
    """An execution, its recorded steps and its timer, or ``None`` when no such execution is
    stored (never started, or pruned after retention)."""
    ref = eid.owner
    params = {**ref.key_params(), "eid": str(eid)}
    rows = await _all(conn, _EXECUTION, params)
    if not rows:
        return None
    row = rows[0]
    workflow = _workflow_of(app, ref.actor_type, row["workflow"])
    where = f"workflow {ref.actor_type}.{row['workflow']}"
    if workflow is None:
        primitive, bad = parse_stored(bytes(row["payload"]))
        payload = bad or undecodable(f"{where} is not declared by this App", primitive)
    else:
        payload = decode_value(bytes(row["payload"]), workflow.input)
    versions = row["versions"] if isinstance(row["versions"], dict) else json.loads(row["versions"])
    timers = await _all(conn, _TIMER, params)
    children, parent_id = await read_children(conn, params)
    return ExecutionView(
        now=row["now"],
        execution_id=row["execution_id"],
        owner=str(ref),
        workflow=row["workflow"],
        key=row["key"],
        manifest_hash=row["manifest_hash"],
        status=row["status"],
        outcome=row["outcome"],
        interrupt=row["interrupt"],
        blocked_reason=row["blocked_reason"],
        payload=payload,
        principal=_principal(bytes(row["principal"])),
        versions=versions,
        event_cursor=row["event_cursor"],
        result=_result(workflow, where, row["result"]),
        started_at=row["started_at"],
        updated_at=row["updated_at"],
        finished_at=row["finished_at"],
        steps=[_step(workflow, r) for r in await _all(conn, _STEPS, params)],
        timer=_outbox(app, ref, timers[0]) if timers else None,
        children=children,
        parent_id=parent_id,
        run_number=row["run_number"],
        deadline_at=row["deadline_at"],
    )


async def connect(url: str) -> psycopg.AsyncConnection[Any]:
    """A read-only connection: each view is one repeatable-read snapshot that cannot write."""
    conn = await psycopg.AsyncConnection.connect(url, application_name="akter-inspect")
    await conn.set_read_only(True)
    await conn.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)
    return conn
