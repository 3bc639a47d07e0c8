"""One execution as a horizontal timeline: a lane per step occurrence, a bar per attempt placed
on the execution's own time axis (its start to its end, or to now, or to its pending timer when
that is later), and a sentence saying why it waits. Pure: it lays out an ``ExecutionView``."""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs

from akter.inspect.decode import Shown, iso_time, one_line
from akter.inspect.render import step_line, when
from akter.inspect.views import ExecutionView, StepView
from akter.workflow.driver import StepKey

#: the narrowest bar drawn, in percent of the axis, so an instant attempt stays visible
MIN_WIDTH = 0.6


@attrs.frozen
class Bar:
    attempt: int
    kind: str
    left: float
    width: float
    pending: bool
    #: the settled exit, decoded (or undecodable, with its stored JSON)
    exit: Shown | None
    label: str
    title: str


@attrs.frozen
class Lane:
    name: str
    kind: str
    bars: list[Bar]
    #: where the step's own timer falls (a sleep's wake-up, a wait's deadline), in percent
    due: float | None


@attrs.frozen
class Layout:
    start: datetime
    end: datetime
    lanes: list[Lane]
    #: the execution's pending timer on the axis, in percent (``None`` when there is none)
    timer: float | None
    waiting: str
    live: bool

    @property
    def span(self) -> str:
        seconds = (self.end - self.start).total_seconds()
        return f"{seconds:.1f}s" if seconds < 120 else f"{seconds / 60:.1f}min"


def why_waiting(view: ExecutionView) -> str:
    """What the execution is doing, in the words of ``akter inspect``."""
    now = view.now
    if view.status == "finished":
        result = f": {view.result.text}" if view.result is not None else ""
        return f"finished {view.outcome or ''} {when(view.finished_at or now, now)}{result}".strip()
    if view.blocked_reason:
        return f"blocked: {one_line(view.blocked_reason)}"
    head = "interrupt requested; " if view.interrupt else ""
    pending = [s for s in view.steps if s.pending]
    if pending:
        step = pending[-1]
        if step.kind == "clock" and step.due_at is not None:
            return f"{head}sleeping until {when(step.due_at, now)}"
        return head + step_line(step, now).split(": ", 1)[-1]
    if view.timer is not None:
        return f"{head}{view.status}, next pass due {when(view.timer.due_at, now)}"
    return f"{head}{view.status}"


def _position(ts: datetime, start: datetime, total: float) -> float:
    return max(0.0, min(100.0, (ts - start).total_seconds() / total * 100))


def _bar(step: StepView, start: datetime, total: float, now: datetime) -> Bar:
    end = step.settled_at or now
    left = _position(step.started_at, start, total)
    width = max(MIN_WIDTH, _position(end, start, total) - left)
    label = step.exit.text if step.exit is not None else "pending"
    times = f"started {iso_time(step.started_at)}"
    if step.settled_at is not None:
        times += f", settled {iso_time(step.settled_at)} after {(step.settled_at - step.started_at)}"
    return Bar(
        attempt=step.attempt,
        kind=step.kind,
        left=round(left, 2),
        width=round(min(width, 100 - left) if left < 100 else MIN_WIDTH, 2),
        pending=step.pending,
        exit=step.exit,
        label=label,
        title=f"{step_line(step, now)} ({times})",
    )


def lay_out(view: ExecutionView) -> Layout:
    now = view.now
    start = view.started_at
    end = view.finished_at or now
    dues = [s.due_at for s in view.steps if s.pending and s.due_at is not None]
    if view.timer is not None and view.status != "finished":
        dues.append(view.timer.due_at)
    end = max([end, *dues])
    total = max((end - start).total_seconds(), timedelta(milliseconds=1).total_seconds())
    lanes: dict[StepKey, list[StepView]] = {}
    for step in view.steps:
        lanes.setdefault(StepKey(step.step, step.scope, step.occurrence), []).append(step)
    laid = []
    for key, attempts in lanes.items():
        last = attempts[-1]
        due = _position(last.due_at, start, total) if last.due_at is not None else None
        bars = [_bar(s, start, total, now) for s in attempts]
        laid.append(Lane(str(key), last.kind, bars, None if due is None else round(due, 2)))
    timer = None
    if view.timer is not None and view.status != "finished":
        timer = round(_position(view.timer.due_at, start, total), 2)
    return Layout(start, end, laid, timer, why_waiting(view), live=view.status != "finished")
