"""One execution's timeline (``akter.operate.timeline``) laid out horizontally: a lane per step
occurrence, a bar per attempt placed on the execution's own time axis (its start to its end, or
to now, or to its pending timer when that is later). Pure: it places what ``read_timeline``
read; the words (why it waits, what each attempt did) are the operate layer's and
``akter inspect``'s."""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs

from akter.inspect.decode import Shown, iso_time
from akter.inspect.render import step_line
from akter.inspect.views import StepView
from akter.operate.timeline import Entry, Timeline

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

    @property
    def span(self) -> str:
        seconds = (self.end - self.start).total_seconds()
        return f"{seconds:.1f}s" if seconds < 120 else f"{seconds / 60:.1f}min"


def _position(ts: datetime, start: datetime, total: float) -> float:
    return max(0.0, min(100.0, (ts - start).total_seconds() / total * 100))


def _bar(entry: Entry, step: StepView, start: datetime, total: float, now: datetime) -> Bar:
    left = _position(entry.started_at, start, total)
    width = max(MIN_WIDTH, _position(entry.settled_at or now, start, total) - left)
    label = entry.exit.text if entry.exit is not None else f"pending: {entry.pending}"
    times = f"started {iso_time(entry.started_at)}"
    if entry.settled_at is not None:
        times += f", settled {iso_time(entry.settled_at)} after {entry.duration}"
    return Bar(
        attempt=entry.attempt,
        kind=entry.kind,
        left=round(left, 2),
        width=round(min(width, 100 - left) if left < 100 else MIN_WIDTH, 2),
        pending=entry.exit is None,
        exit=entry.exit,
        label=label,
        title=f"{step_line(step, now)} ({times})",
    )


def lay_out(t: Timeline) -> Layout:
    view, now = t.view, t.now
    start = view.started_at
    end = view.finished_at or now
    dues = [e.due_at for e in t.entries if e.exit is None and e.due_at is not None]
    open_timer = view.timer if view.status != "finished" else None
    if open_timer is not None:
        dues.append(open_timer.due_at)
    end = max([end, *dues])
    total = max((end - start).total_seconds(), timedelta(milliseconds=1).total_seconds())
    lanes: dict[str, list[tuple[Entry, StepView]]] = {}
    # the entries are the view's steps, one for one, in the same order
    for entry, step in zip(t.entries, view.steps, strict=True):
        lanes.setdefault(entry.step, []).append((entry, step))
    laid = []
    for name, attempts in lanes.items():
        last = attempts[-1][0]
        due = None if last.due_at is None else round(_position(last.due_at, start, total), 2)
        bars = [_bar(entry, step, start, total, now) for entry, step in attempts]
        laid.append(Lane(name, last.kind, bars, due))
    timer = None if open_timer is None else round(_position(open_timer.due_at, start, total), 2)
    return Layout(start, end, laid, timer)
