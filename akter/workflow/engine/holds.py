"""Executions that rest until a person acts: *paused*, and *needs attention*.

A workflow member adds three public commands to its actor (under the actor's access policy,
receipted, recorded with who asked), besides its interrupt and retry (``commands.py``):

* ``akter.wf.pause:<Workflow>`` — a suspended execution is paused at once; a running one is
  flagged and its timer made due now, so its pass learns of it, lets its in-flight attempts
  settle, starts nothing new and *holds* (``sql/functions/akter_wf_hold.sql``). The first asker and
  their reason are kept (``paused_by``, ``pause_reason``). An execution a pause was asked for is
  never written suspended: a trigger makes it paused (``sql/functions/akter_wf_paused_status.sql``).
* ``akter.wf.unpause:<Workflow>`` — clears the pause and makes the timer due now: the next pass
  replays and applies what came due meanwhile (a sleep that ended, an event after its cursor).
* ``akter.wf.resolve:<Workflow>`` — an execution that needs attention is resolved: for an
  activity attempt whose outcome is unknown, by settling that attempt (it stayed pending) with
  the supplied result (checked against the step's declared success type), a declared error, a
  retryable defect due now (one more attempt, with new derived ids), or the unknown outcome
  itself (the body raises ``ActivityOutcomeUnknown``); for passes that failed in a row, by one
  more pass or by failing the execution (finished as a defect; no compensation runs, since its
  passes cannot). The exit carries ``resolved_by`` and ``resolution``; the execution is
  suspended with its timer due now, and goes on through the relay like any resume.

A resolution names the attempt the operator saw waiting; a turn that finds another (resolved
meanwhile, by a rival operator or an interrupt) refuses with ``ExecutionNotResolvable`` and
writes nothing: exactly one decision settles an attempt (invariant 5). An interrupt of an
execution that needs attention resolves its attempt as interrupted (``interrupt_attention``).

Timers keep firing while an execution rests: the resume turn leaves ``paused`` and
``needs_attention`` alone (``queries.RESUME_TURN``), so a delivered timer changes nothing, and
what it was for is still recorded in the steps.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final, LiteralString

import attrs

from akter import codec, tagged
from akter.actor import limits
from akter.actor.turn import Turn
from akter.callers import Caller
from akter.errors import (
    CorruptRecord,
    ExecutionNotResolvable,
    InvalidExecutionId,
    InvalidInput,
    InvalidResolution,
    ResultTooLarge,
)
from akter.ids import ExecutionId
from akter.workflow.api.commands import HoldMark, interrupter_key, parse_for
from akter.workflow.api.declare import ActivityStep
from akter.workflow.api.history import StepKey, StepRow
from akter.workflow.api.payloads import MAX_REASON, Pause, Resolve

if TYPE_CHECKING:
    from akter.actor.kernel import UnderLock
    from akter.workflow.api.declare import Workflow

#: what a resolution may decide: supply the attempt's result or a declared error, allow one more
#: attempt (or pass), fail the execution, or interrupt it
DECISIONS: Final = ("result", "error", "retry", "fail", "interrupt")


# ---- the hook's part: under the owner's row lock the turn holds -----------------------------

# A pause: a suspended execution is paused at once (its timer left as it is); a running one is
# flagged and its timer made due now, so its pass learns of it. The first asker is kept.
PAUSE: LiteralString = """
WITH e AS (
    SELECT status FROM actor_workflow_executions WHERE routing_key = %(rk)s AND execution_id = %(eid)s),
x AS (
    UPDATE actor_workflow_executions
       SET paused_at = coalesce(paused_at, akter_now()), paused_by = coalesce(paused_by, %(by)s),
           pause_reason = CASE WHEN paused_by IS NULL THEN %(reason)s ELSE pause_reason END,
           status = CASE WHEN status = 'suspended' AND NOT interrupt THEN 'paused' ELSE status END,
           updated_at = akter_now()
     WHERE routing_key = %(rk)s AND execution_id = %(eid)s AND status <> 'finished'
    RETURNING status),
-- materialized: the arm runs for every row it selects, whatever the outer query reads of it
arm AS MATERIALIZED (
    SELECT akter_wf_arm(%(rk)s, %(eid)s, %(bucket)s::smallint, NULL) FROM x WHERE status = 'running')
SELECT (SELECT status FROM e) AS was, (SELECT count(*) FROM arm) > 0 AS armed"""

# An unpause: the pause is cleared and the timer made due now (a paused execution is suspended
# again, and resumed by the relay); one that needs attention waits for its resolution still. A
# finished execution a pause was asked for while it ran (it finished before it held) only loses
# the pause: nothing of it goes on, and no reading shows it paused.
UNPAUSE: LiteralString = """
WITH e AS (
    SELECT status FROM actor_workflow_executions WHERE routing_key = %(rk)s AND execution_id = %(eid)s),
x AS (
    UPDATE actor_workflow_executions
       SET paused_at = NULL, paused_by = NULL, pause_reason = NULL,
           status = CASE WHEN status = 'paused' THEN 'suspended' ELSE status END,
           updated_at = akter_now()
     WHERE routing_key = %(rk)s AND execution_id = %(eid)s AND paused_at IS NOT NULL
    RETURNING status),
-- materialized: the arm runs for every row it selects, whatever the outer query reads of it
arm AS MATERIALIZED (
    SELECT akter_wf_arm(%(rk)s, %(eid)s, %(bucket)s::smallint, NULL) FROM x
     WHERE status NOT IN ('needs_attention', 'finished'))
SELECT (SELECT status FROM e) AS was, (SELECT count(*) FROM arm) > 0 AS armed"""

READ_ATTENTION: LiteralString = """
SELECT status, interrupt, attention_reason, attention_step, attention_scope, attention_occurrence,
       attention_attempt, failed_passes, resolved_by, resolution,
       (extract(epoch FROM akter_now()) * 1000)::bigint AS now_ms
  FROM actor_workflow_executions
 WHERE routing_key = %(rk)s AND execution_id = %(eid)s"""

SETTLE_ATTEMPT: LiteralString = """
UPDATE actor_workflow_step SET exit = %(exit)s, settled_at = akter_now()
 WHERE routing_key = %(rk)s AND execution_id = %(eid)s AND step = %(step)s AND scope = %(scope)s
   AND occurrence = %(occurrence)s AND attempt = %(attempt)s AND exit IS NULL"""

# Resolved: suspended, its timer due now, the attention cleared and the resolution kept. An
# interrupt resolving it flags the execution as the interrupt command does.
RESOLVED: LiteralString = """
WITH x AS (
    UPDATE actor_workflow_executions
       SET status = 'suspended', updated_at = akter_now(), blocked_reason = NULL,
           attention_reason = NULL, attention_at = NULL, attention_step = NULL,
           attention_scope = NULL, attention_occurrence = NULL, attention_attempt = NULL,
           failed_passes = 0, pass_errors = NULL, resolved_by = %(by)s, resolution = %(resolution)s,
           interrupt = interrupt OR %(interrupt)s,
           interrupted_by = CASE WHEN %(interrupt)s THEN coalesce(interrupted_by, %(by)s)
                                 ELSE interrupted_by END,
           interrupt_reason = CASE WHEN %(interrupt)s AND interrupted_by IS NULL THEN %(reason)s
                                   ELSE interrupt_reason END
     WHERE routing_key = %(rk)s AND execution_id = %(eid)s AND status = 'needs_attention'
    RETURNING 1)
SELECT akter_wf_arm(%(rk)s, %(eid)s, %(bucket)s::smallint, NULL) FROM x"""

# Failed by an operator after its passes failed: finished as a defect here, in the turn, since
# no pass can run it; steps still pending are settled as interrupted, the timer deleted, and
# waiting clients notified (as akter_wf_finish does).
FAILED: LiteralString = """
WITH x AS (
    UPDATE actor_workflow_executions
       SET status = 'finished', outcome = 'defect', result = %(result)s, finished_at = akter_now(),
           updated_at = akter_now(), resolved_by = %(by)s, resolution = %(resolution)s
     WHERE routing_key = %(rk)s AND execution_id = %(eid)s AND status = 'needs_attention'
    RETURNING routing_key, execution_id, tenant, actor_type, actor_id),
steps AS (
    UPDATE actor_workflow_step s SET exit = %(pending_exit)s, settled_at = akter_now()
      FROM x WHERE s.routing_key = x.routing_key AND s.execution_id = x.execution_id AND s.exit IS NULL),
timer AS (
    DELETE FROM actor_outbox o USING x
     WHERE o.routing_key = x.routing_key AND o.tenant = x.tenant AND o.actor_type = x.actor_type
       AND o.actor_id = x.actor_id AND o.timer_key = 'wf:' || x.execution_id)
SELECT pg_notify('akter_finished', x.execution_id) FROM x"""


def _check_reason(reason: object) -> None:
    if reason is not None and not (isinstance(reason, str) and len(reason) <= MAX_REASON):
        raise InvalidInput(f"a reason is a str of at most {MAX_REASON} characters")


async def apply(conn: UnderLock, turn: Turn[Any], base: dict[str, Any], item: HoldMark) -> bool:
    """Apply a pause, unpause or resolution in the turn; whether a timer was made due now.
    Raises (the turn then writes nothing) for an id that is not of this member, actor and
    tenant, or names no execution, and ``ExecutionNotResolvable`` / ``InvalidResolution`` for
    a resolution that does not apply."""
    payload = item.payload
    eid = parse_for(item.workflow, payload.execution_id, turn.ref.tenant, turn.ref)
    by = interrupter_key(turn.caller)
    params = {**base, "eid": str(eid), "by": by}
    if isinstance(payload, Resolve):
        await resolve(conn, item.workflow, eid, payload, by, params)
        return True
    if isinstance(payload, Pause):
        _check_reason(payload.reason)
        row = await (await conn.execute(PAUSE, {**params, "reason": payload.reason})).fetchone()
    else:
        row = await (await conn.execute(UNPAUSE, params)).fetchone()
    if row is None or row[0] is None:
        raise InvalidExecutionId(f"no execution {eid} exists")
    return bool(row[1])


def _describe(decision: str, step: str | None) -> str:
    what = {
        "result": "supplied the result",
        "error": "supplied a declared error",
        "retry": "allowed one more attempt" if step else "allowed one more pass",
        "fail": "failed it",
        "interrupt": "interrupted it",
    }[decision]
    return f"{what} of {step}" if step and decision in ("result", "error") else what


async def resolve(  # noqa: PLR0917 -- the turn's connection, what it resolves, and the statement's params
    conn: UnderLock,
    workflow: Workflow[Any, Any],
    eid: ExecutionId,
    payload: Resolve,
    by: str,
    params: dict[str, Any],
) -> None:
    if payload.decision not in DECISIONS:
        raise InvalidResolution(
            f"a resolution decides one of {', '.join(DECISIONS)}, not {payload.decision!r}"
        )
    _check_reason(payload.reason)
    row = await (await conn.execute(READ_ATTENTION, params)).fetchone()
    if row is None:
        raise InvalidExecutionId(f"no execution {eid} exists")
    status, _, reason, step, scope, occurrence, attempt, failures, resolved_by, resolution, now_ms = row
    if status != "needs_attention":
        earlier = f"; resolved by {resolved_by}: {resolution}" if resolved_by else ""
        raise ExecutionNotResolvable(f"{eid} does not need attention (it is {status}){earlier}")
    seen = (payload.step, payload.scope, payload.occurrence, payload.attempt)
    if payload.expect and seen != (step, scope, occurrence, attempt):
        raise ExecutionNotResolvable(
            f"{eid} needs attention for another reason than the one resolved: {reason}"
        )
    key = None if step is None else StepKey(step, scope, occurrence)
    where = None if key is None else f"{key} attempt {attempt}"
    done = _describe(payload.decision, None if key is None else str(key))
    note = {"resolved_by": by, "resolution": payload.decision}
    marks = {
        **params,
        "resolution": done,
        "reason": payload.reason,
        "interrupt": payload.decision == "interrupt",
    }
    if key is None:
        if payload.decision in ("result", "error"):
            raise ExecutionNotResolvable(
                f"{eid} needs attention because its passes failed ({failures} in a row): no step waits "
                "for a result; allow one more pass, fail it or interrupt it"
            )
        if payload.decision == "fail":
            message = f"failed by {by} after its passes failed: {reason}"
            result = codec.encode({"defect": {"type": "PassesFailed", "message": message}, **note})
            pending = codec.encode({"interrupt": {}, **note})
            await conn.execute(FAILED, {**marks, "result": result, "pending_exit": pending})
            return
        await conn.execute(RESOLVED, marks)
        return
    activity = workflow.steps.get(step)
    if not isinstance(activity, ActivityStep):
        raise ExecutionNotResolvable(f"{eid} waits at activity {key}, which this App no longer declares")
    exit_ = {**decided_exit(activity, payload, reason or "outcome unknown", now_ms), **note}
    settle = {**params, "step": step, "scope": scope, "occurrence": occurrence, "attempt": attempt}
    cur = await conn.execute(SETTLE_ATTEMPT, {**settle, "exit": codec.encode(exit_)})
    if cur.rowcount != 1:
        raise ExecutionNotResolvable(f"{eid}: activity {where} is settled already")
    await conn.execute(RESOLVED, marks)


def decided_exit(step: ActivityStep[Any], payload: Resolve, unknown: str, now_ms: int) -> dict[str, Any]:
    """The exit a resolution settles the waiting attempt with (before its ``resolved_by``)."""
    match payload.decision:
        case "result":
            if payload.value is None:
                raise InvalidResolution(f"a result for {step.qualified_name} needs a value")
            try:
                value = codec.from_primitive(json.loads(payload.value), step.success)
                primitive = json.loads(codec.check(value, step.success))
                limits.check_result(step.workflow.actor, step.qualified_name, primitive)
            except (ValueError, CorruptRecord, InvalidInput, ResultTooLarge) as exc:
                raise InvalidResolution(
                    f"the result supplied for {step.qualified_name} is not a "
                    f"{_type_name(step.success)}: {exc}"
                ) from exc
            return {"ok": primitive}
        case "error":
            try:
                body = json.loads(payload.value or "null")
                error = tagged.read_error(body, step.errors, "the supplied error")
                return tagged.error(error)
            except (ValueError, CorruptRecord, InvalidInput) as exc:
                declared = ", ".join(e.__name__ for e in step.errors) or "none"
                raise InvalidResolution(
                    f"the error supplied for {step.qualified_name} is not one it declares ({declared}): {exc}"
                ) from exc
        case "retry":
            return {"defect": {"type": "ActivityOutcomeUnknown", "message": unknown}, "retry_at_ms": now_ms}
        case "fail":
            return {"defect": {"type": "ActivityOutcomeUnknown", "message": unknown}}
    return {"defect": {"type": "ActivityOutcomeUnknown", "message": unknown}, "after_interrupt": True}


def _type_name(as_type: Any) -> str:
    return "None" if as_type is None else getattr(as_type, "__name__", repr(as_type))


async def interrupt_attention(  # noqa: PLR0917 -- as resolve, with the interrupt's caller and reason
    conn: UnderLock,
    workflow: Workflow[Any, Any],
    eid: ExecutionId,
    caller: Caller,
    params: dict[str, Any],
    reason: str | None,
) -> None:
    """An interrupt of an execution that needs attention resolves it as interrupted, whatever it
    waits for: the interrupt command, under the row lock that just flagged it."""
    by = interrupter_key(caller)
    row = await (await conn.execute(READ_ATTENTION, params)).fetchone()
    if row is None or row[0] != "needs_attention":
        return
    payload = Resolve(str(eid), "interrupt", expect=False, reason=reason)
    await resolve(conn, workflow, eid, payload, by, params)


# ---- the pass's part ------------------------------------------------------------------------

_FENCED_ARGS = "%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, %(generation)s, %(eid)s"

# Hold (sql/functions/akter_wf_hold.sql), after settling what the pass ran.
HOLD: LiteralString = (
    "SELECT fenced, settled, interrupt, held FROM akter_wf_hold("
    + _FENCED_ARGS
    + ", %(bucket)s::smallint, %(steps)s::text[], %(scopes)s::text[], %(occurrences)s::int[],"
    " %(attempts)s::int[], %(exits)s::bytea[], %(due)s, %(abandon)s::text[], %(knows_interrupt)s,"
    " %(abandoned)s, %(status)s, %(reason)s, %(a_step)s, %(a_scope)s, %(a_occurrence)s, %(a_attempt)s)"
)

# A pass failed: counted with its error, under the fence (sql/functions/akter_wf_pass_failed.sql).
PASS_FAILED: LiteralString = (
    "SELECT fenced, failures, attention FROM akter_wf_pass_failed(" + _FENCED_ARGS + ", %(error)s, %(limit)s)"
)

# A pass that ended well after failed ones: the count starts again.
RESET_FAILURES: LiteralString = """
WITH fence AS (
    SELECT generation FROM actor_generations
     WHERE routing_key = %(rk)s AND tenant = %(tenant)s AND actor_type = %(actor_type)s
       AND actor_id = %(actor_id)s AND generation = %(generation)s
       FOR UPDATE)
UPDATE actor_workflow_executions e SET failed_passes = 0, pass_errors = NULL
  FROM fence
 WHERE e.routing_key = %(rk)s AND e.execution_id = %(eid)s AND e.failed_passes > 0
RETURNING 1 AS fenced"""

#: the statuses an execution rests in until a person acts: no pass runs it meanwhile
RESTING: Final = ("paused", "needs_attention")


@attrs.frozen
class Attention:
    """An attempt whose outcome the pass found unknown and left pending for a person."""

    key: StepKey
    attempt: int
    started_ms: int
    reason: str

    def exit(self) -> dict[str, Any]:
        """Its exit should an interrupt abandon it first: the unknown outcome, after the
        interrupt (never delivered to the body, nothing to compensate)."""
        return {"defect": {"type": "ActivityOutcomeUnknown", "message": self.reason}, "after_interrupt": True}

    def interrupted(self) -> tuple[StepKey, int, bytes]:
        """The settle of that exit, as a pass carries it (``outcomes.Outcomes``)."""
        return self.key, self.attempt, codec.encode(self.exit())

    def row(self, *, after_interrupt: bool) -> StepRow:
        """The attempt as the driver records it: pending, or settled after the interrupt."""
        exit_ = self.exit() if after_interrupt else None
        return StepRow(self.key, self.attempt, "activity", exit_, None, self.started_ms)


def hold_params(attention: Attention | None) -> dict[str, Any]:
    """The part of ``HOLD``'s parameters that says why it holds."""
    if attention is None:
        return {
            "status": "paused",
            "reason": None,
            "a_step": None,
            "a_scope": None,
            "a_occurrence": None,
            "a_attempt": None,
        }
    return {
        "status": "needs_attention",
        "reason": f"activity {attention.key} attempt {attention.attempt}: {attention.reason}",
        "a_step": attention.key.step,
        "a_scope": attention.key.scope,
        "a_occurrence": attention.key.occurrence,
        "a_attempt": attention.attempt,
    }


def held_due(history: dict[StepKey, list[StepRow]]) -> int | None:
    """When a held execution's timer fires (ms): the earliest due time its steps recorded — a
    pending clock or wait deadline, a retry's backoff. It changes nothing while the execution
    rests; it keeps what a suspension would have armed."""
    due: list[int] = []
    for rows in history.values():
        last = rows[-1] if rows else None
        if last is None or last.kind not in ("clock", "wait", "activity"):
            continue
        if last.exit is None and last.kind != "activity" and last.due_ms is not None:
            due.append(last.due_ms)
        elif last.exit is not None and isinstance(last.exit.get("retry_at_ms"), int):
            due.append(int(last.exit["retry_at_ms"]))
    return min(due, default=None)
