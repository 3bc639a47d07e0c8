"""Deterministic helpers of a workflow body: ``wf.now()``, ``wf.random()``, ``wf.uuid4()``, ``wf.log``.

A body is replayed from the start on every pass, so anything it reads from the world must come
back the same on every replay. These helpers give the three things a body most often reaches for
(the time, a random number, a fresh id) and a logger that does not repeat itself on replay.

``await wf.now()``
    The database clock at a recorded point: a built-in step (name ``@now``, kind ``clock``)
    recorded by one fenced write (``sql/functions/akter_wf_record.sql`` with a zero delay) whose due
    time is ``akter_now()`` as the statement read it; every replay resumes the body with that
    recorded time. It is an occurrence like any other (``@now#1``, ``@now#2`` in each branch), so
    a loop that reads the time once per iteration gets one row per iteration. ``@`` is not
    allowed in declared step names, so a built-in never collides with a declared step, and the
    compatibility check (``compat.py``) knows built-ins are declared by akter itself.

``wf.random()`` / ``wf.uuid4()``
    No write. The value is a function of the execution id, its run number, the calling branch's
    scope and how many times that branch called a seeded helper before (a count kept per branch,
    like the occurrence counts of steps): SHA-256 of those four, as a float in ``[0, 1)`` (53
    bits) or as the 16 bytes of a version-4 UUID. A branch's own sequence of calls is
    deterministic given the values it receives (the driver's premise for occurrences), so each
    call gets the same position — and the same value — on every replay, whatever order parallel
    branches ran in. Why no write: a recorded value would cost one commit per call and can only
    return what the derivation already returns; what a record would add is surviving a code
    change that inserts a call before another, which shifts positions — the same contract as
    Temporal's seeded ``workflow.random()``: change the sequence of calls behind a version
    marker (``wf.version``). The values are unpredictable to anyone who does not know the
    execution id, but not secret: never use them as credentials.

``wf.log``
    A ``logging`` logger facade (``akter.workflow.body``) whose records are emitted only when the
    step the call follows in its branch was settled by this pass — the first time the body got
    past that point — and dropped on replay passes. A call before a branch's first step emits in
    the pass that starts the execution (or the branch). Records carry the execution as a field.
    At least once, not exactly once: a pass that dies before its next write is replayed by the
    next pass, which logs again what it cannot know was logged.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from akter import logs
from akter.errors import CorruptRecord, EffectDefect
from akter.workflow.api.effects import Effect
from akter.workflow.api.running import current_driver

if TYPE_CHECKING:
    from akter.workflow.api.history import StepKey, StepRow

#: built-in step names start with ``@``, which a declared step name cannot contain
BUILTIN_PREFIX = "@"
NOW_STEP = "@now"
#: the per-branch counter the seeded helpers share (not a step: nothing is recorded)
SEED_COUNTER = "@seed"
#: the kind each built-in step is recorded as
BUILTIN_KINDS = {NOW_STEP: "clock"}

body_log = logging.getLogger("akter.workflow.body")


class Seeded(Protocol):
    """What the seeded helpers and ``wf.log`` read of the body's context: a
    ``context.WorkflowContext``, which imports this module."""

    @property
    def execution_id(self) -> str: ...

    @property
    def run_number(self) -> int: ...


def is_builtin(step: str) -> bool:
    return step.startswith(BUILTIN_PREFIX)


@attrs.frozen(eq=False)
class Now(Effect):
    """``await wf.now()``: the database clock, recorded once."""

    builtin = NOW_STEP


@attrs.frozen
class RecordNow:
    """The need of a ``wf.now()`` not recorded yet: the pass records it."""

    effect: Now
    key: StepKey


def resolve_now(effect: Now, key: StepKey, last: StepRow | None) -> RecordNow | datetime:
    if last is None or last.exit is None:
        return RecordNow(effect, key)
    if last.due_ms is None:
        raise CorruptRecord(f"{key} has no recorded time")
    return datetime.fromtimestamp(last.due_ms / 1000, tz=UTC)


def _position_digest(ctx: Seeded) -> bytes:
    driver = current_driver()
    fiber = None if driver is None else driver.current
    if driver is None or fiber is None or driver.ctx is not ctx:
        raise EffectDefect("wf.random() and wf.uuid4() are called from the workflow body they belong to")
    n = fiber.counts[SEED_COUNTER] = fiber.counts.get(SEED_COUNTER, 0) + 1
    seed = f"{ctx.execution_id}\x00{ctx.run_number}\x00{fiber.scope}\x00{n}"
    return hashlib.sha256(seed.encode()).digest()


def random(ctx: Seeded) -> float:
    return (int.from_bytes(_position_digest(ctx)[:8], "big") >> 11) / float(1 << 53)


def uuid4(ctx: Seeded) -> uuid.UUID:
    return uuid.UUID(bytes=_position_digest(ctx)[:16], version=4)


def _record(
    level: int, msg: str, args: tuple[Any, ...], extra: dict[str, Any], kwargs: dict[str, Any]
) -> logging.LogRecord:
    """The record ``body_log.log`` would have made here (the caller's place, the exception being
    handled), to be handled later."""
    exc_info = kwargs.get("exc_info")
    if isinstance(exc_info, BaseException):
        exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
    elif exc_info and not isinstance(exc_info, tuple):
        exc_info = sys.exc_info()
    stack_info = bool(kwargs.get("stack_info", False))
    # two frames more than ``log`` asks for: this function's and ``log``'s own
    fn, lno, func, sinfo = body_log.findCaller(stack_info, kwargs["stacklevel"] + 1)
    return body_log.makeRecord(body_log.name, level, fn, lno, msg, args, exc_info or None, func, extra, sinfo)


class ReplaySafeLogger:
    """``wf.log``: ``debug``/``info``/``warning``/``error``/``exception``/``log`` as on a
    ``logging.Logger``, emitted only past a step this pass settled (see the module docstring)."""

    def __init__(self, ctx: Seeded) -> None:
        self._ctx = ctx

    def _live(self) -> bool:
        driver = current_driver()
        if driver is None:
            return True  # a body called directly (a unit test of it): there is no replay
        # no fiber stepping: the pass is closing the body, whose ``finally`` runs every pass
        return driver.current is not None and driver.current.live

    def log(self, level: int, msg: str, *args: Any, **kwargs: Any) -> None:
        if not body_log.isEnabledFor(level) or not self._live():
            return
        extra = {**logs.fields(execution=self._ctx.execution_id), **kwargs.pop("extra", {})}
        kwargs.setdefault("stacklevel", 3)
        driver = current_driver()
        held = None if driver is None else driver.held_logs
        if held is not None:  # a start's prefix (``prefix.py``): emitted once its turn committed
            held.append(_record(level, msg, args, extra, kwargs))
            return
        body_log.log(level, msg, *args, extra=extra, **kwargs)

    def debug(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self.log(logging.DEBUG, msg, *args, **kwargs)

    def info(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self.log(logging.INFO, msg, *args, **kwargs)

    def warning(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self.log(logging.WARNING, msg, *args, **kwargs)

    def error(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self.log(logging.ERROR, msg, *args, **kwargs)

    def exception(self, msg: str, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("exc_info", True)
        self.log(logging.ERROR, msg, *args, **kwargs)
