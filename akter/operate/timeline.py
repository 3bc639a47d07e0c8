"""One execution as a timeline: its record, every step occurrence and attempt in the order they
started (kind, start, settle, duration, exit), its timer, and in one line why it is waiting.

It is built on the view ``akter inspect execution`` reads (``akter.inspect.read``: the decoded
steps, the exits decoded with the App's declarations or shown as *undecodable* with their stored
JSON) plus what the operator's actions recorded (who interrupted it and why, what it retries, what
retried it). ``akter executions show`` prints it; ``client.timeline(id)`` returns it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any, LiteralString

import attrs
import psycopg
from psycopg.rows import dict_row

from akter.ids import ExecutionId
from akter.inspect.decode import Shown, iso_time, one_line
from akter.inspect.read import Declarations, read_execution
from akter.inspect.render import jsonable, span, when
from akter.inspect.views import ExecutionView, StepView
from akter.operate.why import Pending, Rest, pending_note, why
from akter.workflow.core.driver import StepKey
from akter.workflow.core.exits import interrupted_note

#: how many earlier runs the text timeline lists (the JSON form has them all)
RUNS_SHOWN = 10


@attrs.frozen
class Entry:
    """One attempt of one step occurrence."""

    #: ``name#occurrence``, with its branch (``reserve#2``, ``paid#1@1.0/``)
    step: str
    attempt: int
    kind: str
    started_at: datetime
    settled_at: datetime | None
    duration: timedelta | None
    #: the decoded exit, or undecodable with its stored JSON; ``None`` while pending
    exit: Shown | None
    #: a clock's due time, a wait's deadline
    due_at: datetime | None
    #: pending: what it waits for; settled: ``None``
    pending: str | None


@attrs.frozen
class RunEntry:
    """An ended run of the execution (``continue_as_new``, or a keyed start's new run)."""

    run_number: int
    #: ``continued``, or the outcome the run finished with before a new run started
    outcome: str
    #: how many step rows it had recorded when it ended (they were deleted with it)
    steps: int
    started_at: datetime
    ended_at: datetime


@attrs.frozen
class Timeline:
    execution_id: str
    owner: str
    workflow: str
    key: str
    #: running, suspended, blocked or finished
    status: str
    outcome: str | None
    #: one line: why it is where it is ("sleeping until …", "blocked: …", "finished: failed")
    waiting: str
    interrupted_by: str | None
    interrupt_reason: str | None
    retry_of: str | None
    retried_by: str | None
    #: the executions started by retrying this one
    retries: list[str]
    view: ExecutionView
    entries: list[Entry]
    #: which run the entries are of: 1, then one more per run started after it
    run_number: int = 1
    #: the runs before it, oldest first: the links of the chain
    runs: list[RunEntry] = attrs.Factory(list)
    #: when the execution is interrupted if it has not finished (``start(..., timeout=)``)
    deadline_at: datetime | None = None
    #: a pause asked for (``paused`` once held), by whom and why
    paused_at: datetime | None = None
    paused_by: str | None = None
    pause_reason: str | None = None
    #: why it needs attention, since when
    attention_reason: str | None = None
    attention_at: datetime | None = None
    #: passes that failed in a row, and each one's error (``{"at", "error"}``), oldest first
    failed_passes: int = 0
    pass_errors: list[dict[str, Any]] = attrs.field(factory=list)
    #: the last resolution of its attention: who, and what they decided
    resolved_by: str | None = None
    resolution: str | None = None

    @property
    def now(self) -> datetime:
        return self.view.now


_EXTRA: LiteralString = """
SELECT interrupted_by, interrupt_reason, retry_of, retried_by, run_number, deadline_at,
       paused_at, paused_by, pause_reason,
       attention_reason, attention_at, failed_passes, pass_errors, resolved_by, resolution,
       ARRAY(SELECT r.execution_id FROM actor_workflow_executions r
              WHERE r.routing_key = %(rk)s AND r.retry_of = %(eid)s ORDER BY r.started_at) AS retries
  FROM actor_workflow_executions
 WHERE routing_key = %(rk)s AND execution_id = %(eid)s"""


_RUNS: LiteralString = """
SELECT run_number, outcome, steps, started_at, ended_at FROM actor_workflow_runs
 WHERE routing_key = %(rk)s AND execution_id = %(eid)s ORDER BY run_number"""


def _pending_of(step: StepView) -> Pending:
    return Pending(
        step=str(StepKey(step.step, step.scope, step.occurrence)),
        kind=step.kind,
        attempt=step.attempt,
        wait_tag=step.wait_tag,
        after_event=step.scanned if step.scanned is not None else step.wait_cursor,
        due_at=step.due_at,
        started_at=step.started_at,
    )


def _entry(step: StepView, now: datetime | None) -> Entry:
    pending = None if step.exit is not None else pending_note(_pending_of(step), now, named=False)
    return Entry(
        step=str(StepKey(step.step, step.scope, step.occurrence)),
        attempt=step.attempt,
        kind=step.kind,
        started_at=step.started_at,
        settled_at=step.settled_at,
        duration=None if step.settled_at is None else step.settled_at - step.started_at,
        exit=step.exit,
        due_at=step.due_at,
        pending=pending,
    )


def _retry_note(view: ExecutionView, now: datetime | None) -> str | None:
    """A failed attempt whose next attempt is scheduled: what the timer is for."""
    for step in reversed(view.steps):
        data = step.exit.data if step.exit is not None and step.exit.ok else None
        if step.kind == "activity" and isinstance(data, dict) and isinstance(data.get("retry_at_ms"), int):
            at = datetime.fromtimestamp(data["retry_at_ms"] / 1000, UTC)
            key = StepKey(step.step, step.scope, step.occurrence)
            return f"retrying activity {key} (attempt {step.attempt + 1}) at {when(at, now)}"
    return None


async def read_timeline(
    conn: psycopg.AsyncConnection[Any], app: Declarations, eid: ExecutionId, *, relative: bool = True
) -> Timeline | None:
    """The timeline of ``eid``, or ``None`` when no such execution is stored. Read it in one
    repeatable-read transaction for a consistent picture. ``relative`` false: its notes
    (``waiting``, what an entry waits for) give times alone, not how far they are from now, as
    JSON carries them."""
    view = await read_execution(conn, app, eid)
    if view is None:
        return None
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(_EXTRA, {"rk": eid.owner.routing_key, "eid": str(eid)})
    extra = await cur.fetchone()
    if extra is None:  # pragma: no cover -- the same snapshot just read the row
        return None
    runs: list[RunEntry] = []
    if extra["run_number"] > 1:
        await cur.execute(_RUNS, {"rk": eid.owner.routing_key, "eid": str(eid)})
        runs = [RunEntry(**r) for r in await cur.fetchall()]
    status = view.status
    finished = status == "finished"
    if view.status == "suspended" and view.blocked_reason is not None:
        status = "blocked"
    timer = view.timer
    now = view.now if relative else None
    waiting = why(
        status=view.status,
        outcome=view.outcome,
        blocked_reason=view.blocked_reason,
        interrupt=view.interrupt,
        interrupted_by=extra["interrupted_by"],
        interrupt_reason=extra["interrupt_reason"],
        pending=[_pending_of(s) for s in view.steps if s.exit is None],
        timer_due_at=timer.due_at if timer is not None else None,
        timer_parked=timer.parked_reason if timer is not None else None,
        now=now,
        rest=Rest.of(extra),
    )
    if waiting.startswith("resumes at"):
        waiting = _retry_note(view, now) or waiting
    return Timeline(
        execution_id=view.execution_id,
        owner=view.owner,
        workflow=view.workflow,
        key=view.key,
        status=status,
        outcome=view.outcome,
        waiting=waiting,
        interrupted_by=extra["interrupted_by"],
        interrupt_reason=extra["interrupt_reason"],
        retry_of=extra["retry_of"],
        retried_by=extra["retried_by"],
        retries=list(extra["retries"]),
        view=view,
        entries=[_entry(s, now) for s in view.steps],
        run_number=extra["run_number"],
        runs=runs,
        deadline_at=extra["deadline_at"],
        # a pause asked for while it ran is no pause once it finished
        **{name: None if finished and name in _PAUSE else extra[name] for name in _RECORDED},
        failed_passes=extra["failed_passes"],
        pass_errors=list(extra["pass_errors"] or ()),
    )


_PAUSE = ("paused_at", "paused_by", "pause_reason")
_RECORDED = (
    "paused_at",
    "paused_by",
    "pause_reason",
    "attention_reason",
    "attention_at",
    "resolved_by",
    "resolution",
)


# ---- rendering --------------------------------------------------------------------------------


def _deadline_and_runs(t: Timeline, now: datetime) -> list[str]:
    lines = []
    if t.deadline_at is not None:
        lines.append(f"  deadline   {when(t.deadline_at, now)}")
    if t.runs:
        lines.append(f"  run        {t.run_number} (the runs before it: {len(t.runs)})")
        shown = t.runs if len(t.runs) <= RUNS_SHOWN else t.runs[-RUNS_SHOWN:]
        if len(shown) < len(t.runs):
            lines.append(f"             ... {len(t.runs) - len(shown)} earlier runs")
        lines += [
            f"  run {r.run_number:<6} {iso_time(r.started_at)} .. {iso_time(r.ended_at)}: "
            f"{r.outcome}, {r.steps} steps"
            for r in shown
        ]
    return lines


def _rest_lines(t: Timeline) -> list[str]:
    """What a person's actions recorded: a pause, an attention and its failed passes, the last
    resolution."""
    lines = []
    if t.paused_at is not None:
        reason = f": {t.pause_reason}" if t.pause_reason else ""
        lines.append(f"  paused     by {t.paused_by}{reason}, since {when(t.paused_at, t.now)}")
    if t.attention_reason is not None and t.attention_at is not None:
        lines.append(f"  attention  since {when(t.attention_at, t.now)}: {one_line(t.attention_reason)}")
    lines += [
        f"  pass failed at {failure.get('at')}: {one_line(str(failure.get('error')))}"
        for failure in t.pass_errors
    ]
    if t.resolved_by is not None:
        lines.append(f"  resolved   by {t.resolved_by}: {t.resolution}")
    return lines


def render_timeline(t: Timeline) -> str:
    view, now = t.view, t.now
    status = t.status + (f" ({t.outcome})" if t.outcome else "")
    lines = [
        f"execution {t.owner} {t.workflow} {t.key!r}",
        f"  id         {t.execution_id}",
        f"  status     {status}",
        f"  why        {t.waiting}",
        f"  started    {when(view.started_at, now)}",
    ]
    if view.finished_at is not None:
        lines.append(
            f"  finished   {when(view.finished_at, now)} (took {span(view.finished_at - view.started_at)})"
        )
    if t.interrupted_by is not None or t.interrupt_reason:
        lines.append(f"  interrupt  {interrupted_note(t.interrupted_by, t.interrupt_reason)}")
    if t.retry_of is not None:
        by = f" (asked by {t.retried_by})" if t.retried_by else ""
        lines.append(f"  retry of   {t.retry_of}{by}")
    lines += [f"  retried as {r}" for r in t.retries]
    lines += _deadline_and_runs(t, now)
    lines += _rest_lines(t)
    lines += [
        f"  input      {view.payload.text}",
        f"  acts for   {view.principal.text}",
    ]
    if view.versions:
        lines.append(f"  versions   {json.dumps(view.versions, sort_keys=True)}")
    if view.result is not None:
        lines.append(f"  result     {view.result.text}")
    if view.parent_id is not None:
        lines.append(f"  parent     {view.parent_id}")
    if view.children is not None:
        lines.append(f"  children   {view.children.text()}")
    if view.timer is not None:
        lines.append(f"  timer      due {when(view.timer.due_at, now)}, attempts {view.timer.attempts}")
        if view.timer.last_error:
            lines.append(f"             last error: {one_line(view.timer.last_error)}")
    lines.append(f"timeline ({len(t.entries)} attempts)")
    for e in t.entries:
        took = f" took {span(e.duration)}" if e.duration is not None else ""
        outcome = e.exit.text if e.exit is not None else f"pending: {e.pending}"
        lines.append(f"  {iso_time(e.started_at)}  {e.step} attempt {e.attempt} ({e.kind}){took}: {outcome}")
        if e.exit is not None and not e.exit.ok and e.exit.data is not None:
            lines.append(f"      stored {json.dumps(e.exit.data, sort_keys=True)}")
    return "\n".join(lines)


def timeline_json(t: Timeline) -> dict[str, Any]:
    """The timeline as JSON-ready data: absolute times only, and no reading time (read it with
    ``relative=False``), so two reads of an unchanged execution are the same document."""
    data = {f.name: jsonable(getattr(t, f.name)) for f in attrs.fields(Timeline) if f.name != "view"}
    view = jsonable(t.view)
    data |= {
        k: view[k]
        for k in (
            "payload",
            "principal",
            "result",
            "timer",
            "started_at",
            "finished_at",
            "children",
            "parent_id",
        )
    }
    data["entries"] = []
    for e in t.entries:
        entry = jsonable(attrs.evolve(e, duration=None))
        del entry["duration"]
        entry["duration_seconds"] = None if e.duration is None else e.duration.total_seconds()
        data["entries"].append(entry)
    return data
