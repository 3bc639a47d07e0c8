"""Read-only views of what akter stored: an actor's state, receipts, events and outbox rows, and
its workflow executions with their decoded steps.

``akter inspect`` (the click group at the bottom, registered in ``cli.py``) prints these views;
``akter demo`` (``demo.py``) narrates a run from them; a test can read them as an outside
observer. Every query names the routing key first, and one view is read in one read-only,
repeatable-read transaction: a consistent snapshot, and nothing is ever written.

Values are decoded with the declarations of the ``App`` given — the actor's state type, its event
types, each command's input and output, each workflow step's result and error types — through the
codec the engine itself uses (``akter.codec``, the exit tags of ``akter.workflow.exits``). A value
that does not decode, or whose declaration is gone from the App, is shown as *undecodable* with
the reason and its raw form; nothing is replaced by a default (design, section 5).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, LiteralString, NoReturn

import attrs
import click
import psycopg
from psycopg.rows import dict_row

from akter import codec
from akter.actor.upgrade import stored_type
from akter.errors import AkterError, ConfigurationError, CorruptRecord
from akter.ids import ActorRef, ExecutionId
from akter.workflow.driver import StepKey

if TYPE_CHECKING:
    from akter.actor.declare import Actor, Command
    from akter.app import App
    from akter.workflow.declare import Step, Workflow

EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2

DEFAULT_LIMIT = 20
_MAX_LIMIT = 2**63 - 1  # a LIMIT is a bigint
_RAW_BYTES = 48


# ---- decoded values ---------------------------------------------------------------------------


@attrs.frozen
class Shown:
    """A stored value as inspect shows it. Decoded: ``text`` for people, ``data`` its JSON form.
    Undecodable: ``undecodable`` says why, ``data`` holds the stored JSON when it parsed (else
    ``None``) and ``text`` says it is undecodable."""

    text: str
    data: Any = None
    undecodable: str | None = None

    @property
    def ok(self) -> bool:
        return self.undecodable is None

    def json(self) -> dict[str, Any]:
        if self.undecodable is None:
            return {"value": self.data, "text": self.text}
        return {"undecodable": self.undecodable, "raw": self.data}


def _bad(reason: str, raw: Any = None) -> Shown:
    return Shown(text=f"<undecodable: {reason}>", data=raw, undecodable=reason)


def _parse(data: bytes) -> tuple[Any, Shown | None]:
    """The stored JSON of a framed value, or the undecodable ``Shown`` saying why not."""
    try:
        return codec.decode_primitive(bytes(data)), None
    except CorruptRecord as exc:
        head = bytes(data)[:_RAW_BYTES].hex()
        return None, _bad(str(exc), {"hex": head, "bytes": len(data)})


def _typed(primitive: Any, as_type: Any) -> Shown:
    """``primitive`` structured as ``as_type`` (``None``: the declaration says no value)."""
    if as_type is None:
        return Shown(text=repr(primitive), data=primitive)
    try:
        value = codec.from_primitive(primitive, as_type)
    # Structuring runs user types' validators and hooks: any exception means "does not decode".
    except Exception as exc:
        name = getattr(as_type, "__name__", str(as_type))
        return _bad(f"does not structure as {name}: {_one_line(exc)}", primitive)
    return Shown(text=repr(value), data=primitive)


def decode_value(data: bytes, as_type: Any) -> Shown:
    """A stored value (state, event, payload) decoded as ``as_type``."""
    primitive, bad = _parse(data)
    return bad if bad is not None else _typed(primitive, as_type)


def _declared_error(primitive: Any, errors: Sequence[type[Exception]] | None, where: str) -> Shown:
    error = primitive.get("error") if isinstance(primitive, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("type"), str):
        return _bad("an error exit without a type", primitive)
    if errors is None:
        return _bad(
            f"{where} is not declared by this App, so error {error['type']} cannot be read", primitive
        )
    cls = next((e for e in errors if e.__name__ == error["type"]), None)
    if cls is None:
        return _bad(f"{where} no longer declares error {error['type']}", primitive)
    shown = _typed(error.get("value"), cls)
    return (
        Shown(text=f"error {shown.text}", data=primitive)
        if shown.ok
        else _bad(shown.undecodable or "", primitive)
    )


def decode_exit(  # noqa: PLR0911, PLR0912 -- one branch per exit tag, in the order of exits.py
    data: bytes,
    where: str,
    ok: Callable[[Any], Shown] | None,
    errors: Sequence[type[Exception]] | None,
) -> Shown:
    """A tagged exit or outcome (``{"ok"}``, ``{"error"}``, ``{"defect"}``, ``{"interrupt"}``,
    ``{"winner"}``). ``ok`` decodes a success value; ``None`` (with ``errors`` ``None``) when
    ``where`` is not declared by the App, so typed values are undecodable but the untyped tags
    still read."""
    primitive, bad = _parse(data)
    if bad is not None:
        return bad
    if not isinstance(primitive, dict) or len(primitive.keys() - {"retry_at_ms", "after_interrupt"}) != 1:
        return _bad("not a tagged exit", primitive)
    if primitive.get("after_interrupt") is True:
        shown = decode_exit(
            codec.encode({k: v for k, v in primitive.items() if k != "after_interrupt"}), where, ok, errors
        )
        return (
            Shown(text=f"{shown.text} (settled after the interrupt)", data=primitive) if shown.ok else shown
        )
    if "ok" in primitive:
        if ok is None:
            return _bad(f"{where} is not declared by this App, so its value cannot be read", primitive)
        shown = ok(primitive["ok"])
        return (
            Shown(text=shown.text, data=primitive) if shown.ok else _bad(shown.undecodable or "", primitive)
        )
    if "error" in primitive:
        return _declared_error(primitive, errors, where)
    if "defect" in primitive:
        defect = primitive["defect"]
        if not isinstance(defect, dict):
            return _bad("a defect exit without a type and message", primitive)
        text = f"defect {defect.get('type')}: {defect.get('message')}"
        retry = primitive.get("retry_at_ms")
        if isinstance(retry, int):
            text += f" (attempt failed; next attempt at {_iso(datetime.fromtimestamp(retry / 1000, UTC))})"
        return Shown(text=text, data=primitive)
    if "interrupt" in primitive:
        return Shown(text="interrupted", data=primitive)
    if "winner" in primitive and isinstance(primitive["winner"], int):
        return Shown(text=f"branch {primitive['winner']} won", data=primitive)
    if "abandoned" in primitive:
        return Shown(text="abandoned (its race or all gave this branch up)", data=primitive)
    if "compensation_failed" in primitive:
        return _compensation_failed(primitive, where, errors)
    return _bad("unknown exit tag", primitive)


def _compensation_failed(
    primitive: dict[str, Any], where: str, errors: Sequence[type[Exception]] | None
) -> Shown:
    body = primitive["compensation_failed"]
    if not isinstance(body, dict) or not isinstance(body.get("failures"), list):
        return _bad("a compensation_failed exit without its failures", primitive)
    original = body.get("original")
    ended = "succeeded"
    if original is not None:
        ended = decode_exit(codec.encode(original), where, None, errors).text
    failures = "; ".join(str(f) for f in body["failures"])
    return Shown(text=f"compensation failed after the body ended ({ended}): {failures}", data=primitive)


def _ok_as(as_type: Any) -> Callable[[Any], Shown]:
    def ok(value: Any) -> Shown:
        shown = _typed(value, as_type)
        return Shown(text=f"ok {shown.text}", data=value) if shown.ok else shown

    return ok


def _step_ok(step: Step | None) -> Callable[[Any], Shown] | None:
    from akter.workflow.declare import ActivityStep, SleepStep, WaitStep

    if isinstance(step, ActivityStep):
        return _ok_as(step.success)
    if isinstance(step, SleepStep):
        return lambda value: (
            Shown("elapsed", value) if value is None else _bad("a clock exit with a value", value)
        )
    if isinstance(step, WaitStep):
        event_type = step.event

        def matched(value: Any) -> Shown:
            if value is None:
                return Shown("timed out", value)
            if not (isinstance(value, dict) and isinstance(value.get("seq"), int)):
                return _bad("a wait exit without an event sequence", value)
            event = _typed(value.get("event"), event_type)
            if not event.ok:
                return event
            return Shown(f"matched event #{value['seq']} {event.text}", value)

        return matched
    return None


# ---- views ------------------------------------------------------------------------------------


@attrs.frozen
class ReceiptView:
    command_id: str
    command: str
    failed: bool
    outcome: Shown
    caller: str
    created_at: datetime
    expires_at: datetime


@attrs.frozen
class EventView:
    sequence: int
    tag: str
    value: Shown
    command_id: str
    created_at: datetime


@attrs.frozen
class OutboxView:
    intent_id: str
    timer_key: str | None
    due_at: datetime
    target: str
    command: str
    payload: Shown
    caller: Shown
    attempts: int
    last_error: str | None
    claimed_by: str | None
    created_at: datetime
    #: set when the relay parked the row as undeliverable (``akter.outbox.admin``)
    parked_at: datetime | None = None
    parked_reason: str | None = None


@attrs.frozen
class StepView:
    step: str
    #: which await of the step this is (1-based) within ``scope`` ("" for the body, else a branch)
    occurrence: int
    scope: str
    attempt: int
    kind: str
    exit: Shown | None
    due_at: datetime | None
    wait_tag: str | None
    wait_cursor: int | None
    scanned: int | None
    started_at: datetime
    settled_at: datetime | None

    @property
    def pending(self) -> bool:
        return self.exit is None


@attrs.frozen
class ExecutionSummary:
    execution_id: str
    workflow: str
    key: str
    status: str
    outcome: str | None
    interrupt: bool
    result: Shown | None
    blocked_reason: str | None
    started_at: datetime
    finished_at: datetime | None


@attrs.frozen
class ExecutionView:
    now: datetime
    execution_id: str
    owner: str
    workflow: str
    key: str
    manifest_hash: str
    status: str
    outcome: str | None
    interrupt: bool
    blocked_reason: str | None
    payload: Shown
    principal: Shown
    versions: dict[str, Any]
    event_cursor: int
    result: Shown | None
    started_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    steps: list[StepView]
    timer: OutboxView | None


@attrs.frozen
class ActorView:
    now: datetime
    actor: str
    routing_key: int
    bucket: int
    generation: int
    version: int
    event_seq: int
    created_at: datetime
    state: Shown | None
    state_updated_at: datetime | None
    executions: list[ExecutionSummary]
    receipts: list[ReceiptView]
    events: list[EventView]
    outbox: list[OutboxView]
    counts: dict[str, int]


# ---- reading ----------------------------------------------------------------------------------

_KEY = (
    "routing_key = %(rk)s AND tenant = %(tenant)s AND actor_type = %(actor_type)s AND actor_id = %(actor_id)s"
)

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
       interrupt, outcome, result, blocked_reason, started_at, updated_at, finished_at, akter_now() AS now
  FROM actor_workflow_executions
 WHERE routing_key = %(rk)s AND execution_id = %(eid)s"""
_STEPS: LiteralString = """
SELECT step, scope, occurrence, attempt, kind, exit, due_at, wait_tag, wait_cursor, scanned, started_at,
       settled_at
  FROM actor_workflow_step
 WHERE routing_key = %(rk)s AND execution_id = %(eid)s
 ORDER BY started_at, step, scope, occurrence, attempt"""


def _actor_of(app: App, actor_type: str) -> Actor[Any] | None:
    return app.actors.get(actor_type)


def _workflow_of(app: App, actor_type: str, name: str) -> Workflow[Any, Any] | None:
    actor = _actor_of(app, actor_type)
    workflows: dict[str, Workflow[Any, Any]] = actor.extensions.get("workflows", {}) if actor else {}
    return workflows.get(name)


def _command_of(app: App, actor_type: str, name: str) -> Command[Any, Any, Any] | None:
    actor = _actor_of(app, actor_type)
    return actor.commands.get(name) if actor is not None else None


def _receipt(app: App, ref: ActorRef, row: dict[str, Any]) -> ReceiptView:
    command = _command_of(app, ref.actor_type, row["command"])
    where = f"command {ref.actor_type}.{row['command']}"
    outcome = decode_exit(
        bytes(row["outcome"]),
        where,
        _ok_as(command.output) if command is not None else None,
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


def _event(app: App, ref: ActorRef, row: dict[str, Any]) -> EventView:
    actor = _actor_of(app, ref.actor_type)
    event_type = actor.event_types.get(row["tag"]) if actor is not None else None
    if event_type is None:
        primitive, bad = _parse(bytes(row["value"]))
        value = bad or _bad(f"{ref.actor_type} declares no event type {row['tag']} in this App", primitive)
    else:
        value = decode_value(bytes(row["value"]), event_type)
    return EventView(row["sequence"], row["tag"], value, row["command_id"], row["created_at"])


def _caller(data: bytes) -> Shown:
    from akter.outbox.intents import decode_caller

    primitive, bad = _parse(data)
    if bad is not None:
        return bad
    try:
        caller = decode_caller(bytes(data))
    except (AkterError, ValueError) as exc:
        return _bad(_one_line(exc), primitive)
    return Shown(text=repr(caller), data=primitive)


def _principal(data: bytes) -> Shown:
    """The principal an execution acts for, stored as the System caller its timers run as."""
    shown = _caller(data)
    if not shown.ok:
        return shown
    from akter.outbox.intents import decode_caller

    principal = decode_caller(bytes(data)).on_behalf_of
    return Shown(text="none" if principal is None else repr(principal), data=shown.data["on_behalf_of"])


def _outbox(app: App, ref: ActorRef, row: dict[str, Any]) -> OutboxView:
    command = _command_of(app, row["target_type"], row["command"])
    if command is None:
        primitive, bad = _parse(bytes(row["payload"]))
        payload = bad or _bad(
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
    return decode_exit(bytes(data), where, _ok_as(workflow.output), workflow.errors)


def _summary(app: App, ref: ActorRef, row: dict[str, Any]) -> ExecutionSummary:
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
        ok = _step_ok(step)
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
    conn: psycopg.AsyncConnection[Any], app: App, ref: ActorRef, *, after: int = 0, limit: int = DEFAULT_LIMIT
) -> list[EventView]:
    """The actor's events above sequence ``after``: the newest ``limit`` of them, oldest first."""
    rows = await _all(conn, _EVENTS, {**ref.key_params(), "after": after, "limit": limit})
    return [_event(app, ref, row) for row in reversed(rows)]


async def read_actor(
    conn: psycopg.AsyncConnection[Any], app: App, ref: ActorRef, *, limit: int = DEFAULT_LIMIT
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
            primitive, bad = _parse(data)
            state = bad or _bad(f"this App declares no actor type {ref.actor_type}", primitive)
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
    conn: psycopg.AsyncConnection[Any], app: App, eid: ExecutionId
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
        primitive, bad = _parse(bytes(row["payload"]))
        payload = bad or _bad(f"{where} is not declared by this App", primitive)
    else:
        payload = decode_value(bytes(row["payload"]), workflow.input)
    versions = row["versions"] if isinstance(row["versions"], dict) else json.loads(row["versions"])
    timers = await _all(conn, _TIMER, params)
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
    )


async def connect(url: str) -> psycopg.AsyncConnection[Any]:
    """A read-only connection: each view is one repeatable-read snapshot that cannot write."""
    conn = await psycopg.AsyncConnection.connect(url, application_name="akter-inspect")
    await conn.set_read_only(True)
    await conn.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)
    return conn


# ---- rendering --------------------------------------------------------------------------------


def _one_line(value: object) -> str:
    return " ".join(str(value).split())


def _iso(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _span(delta: timedelta) -> str:
    seconds = abs(delta.total_seconds())
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
    return f"{int(seconds // 86400)}d{int(seconds % 86400 // 3600):02d}h"


def when(ts: datetime, now: datetime) -> str:
    """``ts`` in UTC, with how far it is from ``now`` on the database clock."""
    delta = ts - now
    relative = f"in {_span(delta)}" if delta > timedelta(0) else f"{_span(delta)} ago"
    return f"{_iso(ts)} ({relative})"


def _due(row: OutboxView, now: datetime) -> str:
    from akter.outbox.admin import parked_note

    if row.parked_at is not None:
        return parked_note(row.parked_at, row.parked_reason)
    return f"due {when(row.due_at, now)}"


def _outbox_lines(row: OutboxView, now: datetime) -> list[str]:
    lines = [
        f"  {row.timer_key or row.intent_id}: {row.command} -> {row.target}, {_due(row, now)}",
        f"      payload {row.payload.text}",
        f"      as {row.caller.text}; attempts {row.attempts}"
        + (f"; claimed by {row.claimed_by}" if row.claimed_by else ""),
    ]
    if row.last_error:
        lines.append(f"      last error: {_one_line(row.last_error)}")
    return lines


def step_line(step: StepView, now: datetime) -> str:
    """One step occurrence's attempt: ``name#occurrence`` (with its branch), the attempt, its
    kind, and its exit or what it is waiting for."""
    head = f"{StepKey(step.step, step.scope, step.occurrence)} attempt {step.attempt} ({step.kind})"
    if step.exit is not None:
        return f"{head}: {step.exit.text}"
    if step.kind == "clock" and step.due_at is not None:
        return f"{head}: pending, due {when(step.due_at, now)}"
    if step.kind == "wait":
        deadline = f", deadline {when(step.due_at, now)}" if step.due_at is not None else ", no deadline"
        after = step.scanned if step.scanned is not None else step.wait_cursor
        return f"{head}: pending, waiting for {step.wait_tag} after event #{after}{deadline}"
    return f"{head}: pending (started {when(step.started_at, now)})"


def render_execution(view: ExecutionView) -> str:
    now = view.now
    status = view.status + (f" ({view.outcome})" if view.outcome else "")
    if view.interrupt and view.status != "finished":
        status += ", interrupt requested"
    lines = [
        f"execution {view.execution_id}",
        f"  owner      {view.owner}",
        f"  workflow   {view.workflow}, key {view.key!r}, manifest {view.manifest_hash[:12]}",
        f"  status     {status}",
        f"  started    {when(view.started_at, now)}",
    ]
    if view.finished_at is not None:
        lines.append(f"  finished   {when(view.finished_at, now)}")
    if view.blocked_reason:
        lines.append(f"  blocked    {_one_line(view.blocked_reason)}")
    lines += [
        f"  payload    {view.payload.text}",
        f"  principal  {view.principal.text}",
        f"  versions   {json.dumps(view.versions, sort_keys=True)}",
        f"  cursor     after event #{view.event_cursor}",
    ]
    if view.result is not None:
        lines.append(f"  result     {view.result.text}")
    if view.timer is not None:
        timer = view.timer
        lines.append(f"  timer      {timer.timer_key}, {_due(timer, now)}, attempts {timer.attempts}")
    else:
        lines.append("  timer      none")
    lines.append(f"steps ({len(view.steps)})")
    for step in view.steps:
        times = [f"started {when(step.started_at, now)}"]
        if step.settled_at is not None:
            times.append(f"settled {when(step.settled_at, now)}")
            if step.due_at is not None:
                times.append(("deadline " if step.kind == "wait" else "due ") + when(step.due_at, now))
        lines.append(f"  {step_line(step, now)}")
        lines.append(f"      {', '.join(times)}")
    return "\n".join(lines)


def render_actor(view: ActorView) -> str:
    now = view.now
    counts = view.counts
    lines = [
        f"actor {view.actor}",
        f"  routing key {view.routing_key} (bucket {view.bucket}), generation {view.generation}, "
        f"{view.version} turns committed, {view.event_seq} events",
        f"  created {when(view.created_at, now)}",
        f"  clock   {_iso(now)} (database clock)",
    ]
    if view.state is None:
        lines.append("state: none stored (no turn has changed it)")
    else:
        # actor_state.updated_at is NOT NULL, so a stored state always has it
        updated = "" if view.state_updated_at is None else f" (updated {when(view.state_updated_at, now)})"
        lines += [f"state{updated}", f"  {view.state.text}"]

    def section(title: str, shown: int, total: int) -> str:
        more = f", newest {shown} shown" if total > shown else ""
        return f"{title} ({total}{more})"

    lines.append(section("executions", len(view.executions), counts["executions"]))
    for x in view.executions:
        status = x.status + (f" ({x.outcome})" if x.outcome else "")
        lines.append(f"  {x.workflow} key {x.key!r}: {status}, started {when(x.started_at, now)}")
        if x.result is not None:
            lines.append(f"      result {x.result.text}")
        if x.blocked_reason:
            lines.append(f"      blocked: {_one_line(x.blocked_reason)}")
        lines.append(f"      {x.execution_id}")
    lines.append(section("receipts", len(view.receipts), counts["receipts"]))
    for r in view.receipts:
        lines.append(f"  {r.command}: {r.outcome.text}")
        lines.append(f"      at {when(r.created_at, now)} by {r.caller}, id {r.command_id}")
    lines.append(section("events", len(view.events), counts["events"]))
    for e in view.events:
        lines += [f"  #{e.sequence} {e.value.text}", f"      at {when(e.created_at, now)} by {e.command_id}"]
    lines.append(section("outbox", len(view.outbox), counts["outbox"]))
    for o in view.outbox:
        lines += _outbox_lines(o, now)
    return "\n".join(lines)


def jsonable(value: Any) -> Any:
    """A view as JSON-ready data: ``Shown`` values in their JSON form, times in ISO-8601 UTC."""
    if isinstance(value, Shown):
        return value.json()
    if isinstance(value, datetime):
        return _iso(value)
    if attrs.has(type(value)):
        return {f.name: jsonable(getattr(value, f.name)) for f in attrs.fields(type(value))}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value


def to_json(view: ActorView | ExecutionView) -> str:
    return json.dumps(jsonable(view), indent=2, sort_keys=True)


# ---- the command ------------------------------------------------------------------------------


def _fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    from akter.cli_support import fail

    fail(message, code)


_database_option = click.option(
    "--database-url",
    help="PostgreSQL URL; overrides the App's own URL, which overrides AKTER_DATABASE_URL.",
)
_json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON document instead of text."
)


def _load(app_path: str, database_url: str | None) -> tuple[App, str]:
    from akter import cli_support

    try:
        app = cli_support.load_app(app_path)
        url = cli_support.database_url(database_url, app=app)
    except ConfigurationError as exc:
        cli_support.fail_with(exc)
    return app, url


def _show(url: str, read: Callable[[psycopg.AsyncConnection[Any]], Any]) -> Any:
    from akter import cli_support

    async def run() -> Any:
        try:
            conn = await connect(url)
        except psycopg.OperationalError as exc:
            raise cli_support.cannot_connect(exc, url) from exc
        async with conn:
            return await read(conn)

    try:
        return asyncio.run(run())
    except ConfigurationError as exc:
        cli_support.fail_with(exc)
    except psycopg.Error as exc:
        cli_support.fail_with(cli_support.database_problem(exc, url))


def _execution_id(text: str) -> ExecutionId:
    try:
        return ExecutionId.parse(text)
    except AkterError as exc:
        _fail(_one_line(exc))
    # A hand-made id can decode to a workflow name with no UTF-8 form (a lone surrogate), which
    # only formatting the id again finds.
    except UnicodeError:
        _fail(f"{text[:80]!r} is not a well-formed execution id: it holds text that is not valid UTF-8")


@click.group(
    "inspect",
    epilog="Exit codes: 0 shown, 1 no such actor or execution, 2 usage/configuration/database error.",
)
def inspect_group() -> None:
    """Read-only views of stored actors and executions, decoded with APP's declarations.

    APP is module:attribute naming an akter.App. Rows that do not decode (corrupt, or declared
    no longer) are shown as undecodable, with the reason and the stored JSON."""


@inspect_group.command("actor")
@click.argument("app_path", metavar="APP")
@click.argument("tenant")
@click.argument("actor_type", metavar="TYPE")
@click.argument("actor_id", metavar="ID")
@click.option(
    "--limit",
    type=click.IntRange(min=1, max=_MAX_LIMIT),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="Newest rows shown per section.",
)
@_database_option
@_json_option
def inspect_actor(
    *,
    app_path: str,
    tenant: str,
    actor_type: str,
    actor_id: str,
    limit: int,
    database_url: str | None,
    as_json: bool,
) -> None:
    """An actor's state, executions, receipts, events and outbox rows."""
    try:
        ref = ActorRef(tenant=tenant, actor_type=actor_type, actor_id=actor_id)
    except AkterError as exc:
        _fail(_one_line(exc))
    app, url = _load(app_path, database_url)
    view = _show(url, lambda conn: read_actor(conn, app, ref, limit=limit))
    if view is None:
        declared = (
            "" if actor_type in app.actors else f" ({app_path} declares {', '.join(sorted(app.actors))})"
        )
        _fail(f"no actor {ref} is stored: it never committed a turn{declared}", EXIT_NOT_FOUND)
    click.echo(to_json(view) if as_json else render_actor(view))


@inspect_group.command("execution")
@click.argument("app_path", metavar="APP")
@click.argument("execution_id")
@_database_option
@_json_option
def inspect_execution(*, app_path: str, execution_id: str, database_url: str | None, as_json: bool) -> None:
    """A workflow execution: its record, decoded steps and timer."""
    eid = _execution_id(execution_id)
    app, url = _load(app_path, database_url)
    view = _show(url, lambda conn: read_execution(conn, app, eid))
    if view is None:
        _fail(
            f"no execution {execution_id} is stored (never started, or pruned after retention)",
            EXIT_NOT_FOUND,
        )
    click.echo(to_json(view) if as_json else render_execution(view))
