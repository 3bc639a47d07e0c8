"""Why an execution is where it is, in one line: what the list shows beside each row and the
timeline shows at its head. Pure: it reads what the queries read and decides the words."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from akter.inspect.decode import one_line
from akter.inspect.render import when
from akter.workflow.core.exits import interrupted_note


@attrs.frozen
class Pending:
    """A step occurrence's attempt written pending and not settled yet."""

    step: str
    kind: str
    attempt: int
    wait_tag: str | None
    #: a wait: the owner's events at or below this sequence are behind it
    after_event: int | None
    due_at: datetime | None
    started_at: datetime


#: more pending children than this are summed up in one note
CHILDREN_NAMED = 3


@attrs.frozen
class Rest:
    """What a person's actions recorded on an open execution: a pause asked for, and why it
    needs attention."""

    paused_at: datetime | None = None
    paused_by: str | None = None
    pause_reason: str | None = None
    attention_reason: str | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Rest:
        return cls(**{f.name: row.get(f.name) for f in attrs.fields(cls)})

    def paused_note(self) -> str:
        by = f" by {self.paused_by}" if self.paused_by else ""
        reason = f": {' '.join(self.pause_reason.split())}" if self.pause_reason else ""
        return f"paused{by}{reason}"


def pending_note(p: Pending, now: datetime | None, *, named: bool = True) -> str:
    """What one pending step waits for; ``named`` adds which step it is. ``now`` None: its
    times without how far they are from now (``render.when``)."""
    step = f" ({p.step})" if named else ""
    if p.kind == "clock" and p.due_at is not None:
        return f"sleeping until {when(p.due_at, now)}{step}"
    if p.kind == "wait":
        until = f"until {when(p.due_at, now)}" if p.due_at is not None else "with no deadline"
        return f"waiting for {p.wait_tag} after event #{p.after_event} {until}{step}"
    if p.kind == "activity":
        return f"running activity {p.step} attempt {p.attempt} since {when(p.started_at, now)}"
    if p.kind == "child":
        return f"waiting for child {p.step} since {when(p.started_at, now)}"
    return f"{p.kind} {p.step} pending since {when(p.started_at, now)}"


def why(  # noqa: PLR0911 -- one answer per situation, in the order an operator asks
    *,
    status: str,
    outcome: str | None,
    blocked_reason: str | None,
    interrupt: bool,
    interrupted_by: str | None,
    interrupt_reason: str | None,
    pending: Sequence[Pending],
    timer_due_at: datetime | None,
    timer_parked: str | None,
    now: datetime | None,
    rest: Rest | None = None,
) -> str:
    if status == "finished":
        if outcome == "interrupted":
            return f"finished: {interrupted_note(interrupted_by, interrupt_reason)}"
        return f"finished: {outcome}"
    if interrupt:
        return (
            f"{interrupted_note(interrupted_by, interrupt_reason)}; stopping (compensating, then finishing)"
        )
    rest = rest or Rest()
    if status == "needs_attention":
        also = f" ({rest.paused_note()} too)" if rest.paused_at is not None else ""
        return f"needs attention: {one_line(rest.attention_reason or 'no reason recorded')}{also}"
    if status == "paused":
        since = f" since {when(rest.paused_at, now)}" if rest.paused_at is not None else ""
        then = f"; then {' or '.join(pending_note(p, now) for p in pending)}" if pending else ""
        return f"{rest.paused_note()}{since}{then}"
    if rest.paused_at is not None:
        return f"pausing ({rest.paused_note()}): its in-flight attempts settle, then it holds"
    if status == "suspended" and blocked_reason is not None:
        return f"blocked: {one_line(blocked_reason)}"
    if timer_parked is not None:
        return f"blocked: its resume timer is parked: {one_line(timer_parked)}"
    if pending:
        children = [p for p in pending if p.kind == "child"]
        if len(children) > CHILDREN_NAMED:  # a fan-out: one line, not one note per child
            others = [pending_note(p, now) for p in pending if p.kind != "child"]
            return " or ".join([*others, f"waiting for {len(children)} children"])
        return " or ".join(pending_note(p, now) for p in pending)
    if status == "running":
        return "running a pass"
    if timer_due_at is not None:
        return f"resumes at {when(timer_due_at, now)}"
    return "suspended with nothing due (no timer)"
