"""Rendering the views as text for people, or as JSON."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import attrs

from akter.workflow.core.driver import StepKey

if TYPE_CHECKING:
    pass

from akter.inspect.decode import Shown, iso_time, one_line
from akter.inspect.views import ActorView, ExecutionView, OutboxView, StepView

# ---- rendering --------------------------------------------------------------------------------


def span(delta: timedelta) -> str:
    seconds = abs(delta.total_seconds())
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
    return f"{int(seconds // 86400)}d{int(seconds % 86400 // 3600):02d}h"


def when(ts: datetime, now: datetime | None) -> str:
    """``ts`` in UTC, with how far it is from ``now`` on the database clock; ``now`` None: the
    time alone, as JSON shows it (two reads of an unchanged record say the same)."""
    if now is None:
        return iso_time(ts)
    delta = ts - now
    relative = f"in {span(delta)}" if delta > timedelta(0) else f"{span(delta)} ago"
    return f"{iso_time(ts)} ({relative})"


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
        lines.append(f"      last error: {one_line(row.last_error)}")
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


def _times(view: ExecutionView) -> list[str]:
    """When the execution started and finished, which run it is, and its deadline."""
    now = view.now
    lines = [f"  started    {when(view.started_at, now)}"]
    if view.finished_at is not None:
        lines.append(f"  finished   {when(view.finished_at, now)}")
    if view.run_number > 1:
        lines.append(f"  run        {view.run_number} (continued as new {view.run_number - 1} times)")
    if view.deadline_at is not None:
        lines.append(f"  deadline   {when(view.deadline_at, now)}")
    return lines


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
        *_times(view),
    ]
    if view.blocked_reason:
        lines.append(f"  blocked    {one_line(view.blocked_reason)}")
    lines += [
        f"  payload    {view.payload.text}",
        f"  principal  {view.principal.text}",
        f"  versions   {json.dumps(view.versions, sort_keys=True)}",
        f"  cursor     after event #{view.event_cursor}",
    ]
    if view.result is not None:
        lines.append(f"  result     {view.result.text}")
    if view.parent_id is not None:
        lines.append(f"  parent     {view.parent_id}")
    if view.children is not None:
        lines.append(f"  children   {view.children.text()}")
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
        f"  clock   {iso_time(now)} (database clock)",
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
            lines.append(f"      blocked: {one_line(x.blocked_reason)}")
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
        return iso_time(value)
    if attrs.has(type(value)):
        return {f.name: jsonable(getattr(value, f.name)) for f in attrs.fields(type(value))}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value


def to_json(view: ActorView | ExecutionView) -> str:
    """The view as one JSON document: times in ISO 8601 UTC, and without the time it was read
    (``now``), so two reads of unchanged rows are the same document."""
    data = jsonable(view)
    del data["now"]
    return json.dumps(data, indent=2, sort_keys=True)
