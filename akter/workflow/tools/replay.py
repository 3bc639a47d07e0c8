"""The replay check's decision: does this code replay a recorded execution? No I/O.

The manifest check (``compat.py``) compares declarations; it cannot see a body that now awaits
its steps in another order, skips one, or branches differently on the same recorded values.
``replay`` runs the code's body under the pure driver (``driver.py``) against an execution's
recorded input and step exits — nothing runs, nothing is written: a recorded step resumes the
body with its recorded value, anything else becomes a need the driver hands back, and the
replay stops there — and compares what the body asked for with what was recorded.

**The comparison.** Within one fiber (the body, one branch of a race or an ``all``: a *scope*,
see ``driver.StepKey``) awaits are sequential, so the recorded occurrences of a scope, ordered
by the time their first attempt was written, are the order the recording code awaited them in.
The replay records the occurrences the new code awaits, per scope, in order. The first index at
which the two sequences differ is the divergence: the recorded occurrence there, and what the
new code asked for instead (another step, or to end the branch). Scopes the replay abandoned
(a recorded race's losers, the siblings of a branch that raised, an interrupted body) may stop
early. Where a recorded step matches, its recorded value must still be one the new code would
have recorded: a race's winner must be one of its branches, a wait's event must still satisfy
its ``where``. A finished execution must also finish, with the recorded outcome.

``RecordedExecution`` is what the reader (``replay_read.py``) loads and what history files
(``akter.testing``) hold: stored values as cattrs primitives, decoded here with the new code's
types, so a value this code would read differently is reported, not guessed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from akter import codec
from akter.callers import Principal
from akter.errors import CorruptRecord, EffectDefect, InvalidInput
from akter.ids import ActorRef
from akter.workflow.api.declare import Race, Wait, Workflow, WorkflowContext
from akter.workflow.api.determinism import BUILTIN_KINDS
from akter.workflow.api.effects import Effect
from akter.workflow.core import children, exits
from akter.workflow.core.driver import (
    AwaitEvent,
    ClockDue,
    Driver,
    Need,
    RegisterClock,
    RetryAt,
    RunActivity,
    SettleRace,
    StepKey,
    StepRow,
)
from akter.workflow.core.exits import Ok, Outcome, Raise


@attrs.frozen
class RecordedStep:
    """One recorded attempt of one step occurrence. ``exit``: its cattrs primitive (None while
    pending); ``started_us``: when it was written, in microseconds (the order of a scope)."""

    key: StepKey
    attempt: int
    kind: str
    exit: Any
    started_us: int
    due_ms: int | None = None
    cursor: int | None = None
    scanned: int | None = None


@attrs.frozen
class RecordedExecution:
    """An execution as stored: its input and exits as cattrs primitives, not yet decoded.

    ``unreadable``: why a stored value could not even be read as a primitive (the reader found
    bytes that do not unframe); such an execution is reported, never replayed."""

    execution_id: str
    tenant: str
    actor_type: str
    actor_id: str
    workflow: str
    key: str
    status: str
    payload: Any
    principal: Principal | None
    versions: Mapping[str, int]
    steps: tuple[RecordedStep, ...]
    interrupt: bool = False
    outcome: str | None = None
    result: Any = None
    #: which run of the execution the steps are of (``continue_as_new.py``): seeds ``wf.random()``
    run_number: int = 1
    unreadable: str | None = None

    @property
    def finished(self) -> bool:
        return self.status == "finished"


@attrs.frozen
class Divergence:
    """Where the new code parts from the recording: ``at`` the recorded occurrence (or "the
    end"), ``recorded`` what was recorded there, ``asked`` what the new code asked for instead."""

    at: str
    recorded: str
    asked: str

    def text(self) -> str:
        return f"at {self.at}: recorded {self.recorded}; this code asked for {self.asked}"


@attrs.frozen
class Replay:
    """The verdict on one execution. ``replayed``: recorded occurrences the new code reached;
    ``point``: where its replay stopped (parked on a need, or finished)."""

    execution_id: str
    actor_type: str
    workflow: str
    finished: bool
    replayed: int
    point: str
    divergence: Divergence | None = None

    @property
    def ok(self) -> bool:
        return self.divergence is None


@attrs.frozen
class _Ask:
    """One await of a declared step by the new code, in the fiber of ``scope``."""

    scope: str
    key: StepKey
    kind: str
    effect: Effect

    def text(self) -> str:
        return f"{_a(self.kind)} {self.key}"


_ARTICLE = {"activity": "activity", "clock": "clock", "wait": "wait", "race": "race"}


def _a(kind: str) -> str:
    return _ARTICLE.get(kind, kind)


class _Recorder(Driver):
    """The driver, noting every occurrence the body awaits, in order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.asks: list[_Ask] = []
        super().__init__(*args, **kwargs)

    def _on_effect(self, fiber: Any, effect: Effect) -> None:
        # an id may be reused by a new effect once an old one is gone: forget any stale key
        self._keys.pop(id(effect), None)
        super()._on_effect(fiber, effect)
        key = self._keys.get(id(effect))
        step = getattr(effect, "step", None)
        if key is not None and step is not None:
            self.asks.append(_Ask(fiber.scope, key, step.kind, effect))
        builtin = getattr(effect, "builtin", None)
        if builtin is not None and fiber.blocked_key is not None:  # ``wf.now()``: recorded like a step
            self.asks.append(_Ask(fiber.scope, fiber.blocked_key, BUILTIN_KINDS[builtin], effect))


def replay(workflow: Workflow[Any, Any] | None, execution: RecordedExecution, *, now_ms: int) -> Replay:
    """Replay ``execution`` under ``workflow``'s body (None: this code does not declare it)."""

    def verdict(replayed: int, point: str, divergence: Divergence | None) -> Replay:
        return Replay(
            execution.execution_id,
            execution.actor_type,
            execution.workflow,
            execution.finished,
            replayed,
            point,
            divergence,
        )

    def refused(recorded: str, asked: str) -> Replay:
        return verdict(0, "not replayed", Divergence("the start", recorded, asked))

    if execution.unreadable is not None:
        return refused(f"a value that does not read: {execution.unreadable}", "nothing (not replayed)")
    if workflow is None:
        return refused(f"workflow {execution.actor_type}.{execution.workflow}", "nothing: it is not declared")
    try:
        payload: Any = codec.from_primitive(execution.payload, workflow.input)
    except CorruptRecord as exc:
        return refused(f"an input this code cannot read ({exc})", "nothing (not replayed)")
    history: dict[StepKey, list[StepRow]] = {}
    for step in sorted(execution.steps, key=lambda s: s.attempt):
        history.setdefault(step.key, []).append(_row(step))
    ctx = WorkflowContext(
        execution_id=execution.execution_id,
        key=execution.key,
        ref=ActorRef(execution.tenant, execution.actor_type, execution.actor_id),
        principal=execution.principal,
        versions=dict(execution.versions),
        run_number=execution.run_number,
    )
    driver: _Recorder | None = None
    try:
        driver = _Recorder(workflow, ctx, payload, history, interrupted=execution.interrupt)
        needs = driver.advance(now_ms)
        reached = {a.key for a in driver.asks} & history.keys()
        divergence = _compare(driver, execution)
        if divergence is None:
            divergence = _ending(driver, execution, needs)
        return verdict(len(reached), _point(driver, needs), divergence)
    except (CorruptRecord, EffectDefect) as exc:
        return verdict(
            0, "stopped", Divergence("a recorded step", "a value this code cannot replay", str(exc))
        )
    finally:
        if driver is not None:
            driver.close()


def _row(step: RecordedStep) -> StepRow:
    return StepRow(
        key=step.key,
        attempt=step.attempt,
        kind=step.kind,
        exit=step.exit,
        due_ms=step.due_ms,
        started_ms=step.started_us // 1000,
        cursor=step.cursor,
        scanned=step.scanned,
    )


def _recorded(execution: RecordedExecution) -> tuple[dict[StepKey, int], dict[StepKey, RecordedStep]]:
    """When each recorded occurrence was first written, and its last recorded attempt."""
    first: dict[StepKey, int] = {}
    last: dict[StepKey, RecordedStep] = {}
    for step in execution.steps:
        first[step.key] = min(first.get(step.key, step.started_us), step.started_us)
        if step.key not in last or last[step.key].attempt < step.attempt:
            last[step.key] = step
    return first, last


def _compare(driver: _Recorder, execution: RecordedExecution) -> Divergence | None:
    """The first recorded occurrence, over every scope, at which the new code asked for
    something else (see the module docstring)."""
    first, last = _recorded(execution)
    recorded: dict[str, list[StepKey]] = {}
    for key in sorted(first, key=lambda k: (first[k], k.occurrence, k.step)):
        recorded.setdefault(key.scope, []).append(key)
    asked: dict[str, list[_Ask]] = {}
    for ask in driver.asks:
        asked.setdefault(ask.scope, []).append(ask)
    found: list[tuple[int, Divergence]] = []
    for scope, keys in recorded.items():
        asks = asked.get(scope, [])
        for i, key in enumerate(keys):
            if i >= len(asks):
                if not any(scope.startswith(p) for p in driver.abandoned):
                    found.append(
                        (first[key], Divergence(str(key), _what(last[key]), _instead(driver, scope)))
                    )
                break
            ask = asks[i]
            problem = _mismatch(ask, last[key])
            if problem is not None:
                found.append((first[key], Divergence(str(key), _what(last[key]), problem)))
                break
    return min(found, key=lambda f: f[0])[1] if found else None


def _mismatch(ask: _Ask, row: RecordedStep) -> str | None:
    """Why the new code's await does not match the recorded occurrence, or None."""
    if ask.key != row.key or ask.kind != row.kind:
        return ask.text()
    exit_ = row.exit
    if isinstance(ask.effect, Race) and isinstance(exit_, dict) and "winner" in exit_:
        winner = int(exit_["winner"])
        if winner >= len(ask.effect.branches):
            return f"a race of {len(ask.effect.branches)} branches (the recorded winner was branch {winner})"
    if isinstance(ask.effect, Wait) and ask.effect.where is not None and isinstance(exit_, dict):
        match = exit_.get("ok")
        if isinstance(match, dict) and "event" in match:
            try:
                event: Any = codec.from_primitive(match["event"], ask.effect.step.event)
                matched = bool(ask.effect.where(event))
            except Exception as exc:
                return f"a wait whose where raised on the recorded event #{match.get('seq')}: {exc!r}"
            if not matched:
                return f"a wait whose where does not match the recorded event #{match.get('seq')}"
    return None


def _ending(driver: _Recorder, execution: RecordedExecution, needs: Sequence[Need]) -> Divergence | None:
    """A finished execution must finish again, as it did."""
    if not execution.finished:
        return None
    recorded = f"the end ({execution.outcome})"
    if driver.final is None:
        new = next((n for n in needs if not driver.history.get(n.key)), None)
        return Divergence("the end", recorded, _need(new) if new is not None else "to wait, unfinished")
    outcome, exit_ = _result(driver.workflow, driver.final)
    if outcome != execution.outcome or not _same_result(exit_, execution.result):
        return Divergence(
            "the end",
            f"{recorded} with {_shown(execution.result)}",
            f"to end ({outcome}) with {_shown(exit_)}",
        )
    return None


def _result(workflow: Workflow[Any, Any], final: Outcome) -> tuple[str, dict[str, Any]]:
    """The outcome column and result exit a pass would record for ``final`` (``passes.py``)."""
    if isinstance(final, Ok):
        try:
            return "succeeded", exits.encode_ok(final.value, workflow.output)
        except InvalidInput as exc:
            return "defect", {"defect": {"type": "Defect", "message": str(exc)}}
    exit_ = exits.encode_error(final.error, workflow.errors)
    for tag, outcome in (("interrupt", "interrupted"), ("compensation_failed", "compensation_failed")):
        if tag in exit_:
            return outcome, exit_
    return ("failed" if "error" in exit_ else "defect"), exit_


def _same_result(new: dict[str, Any], recorded: Any) -> bool:
    """The same tag, and the same value or error (a defect: the same type; its message may
    name this code's objects)."""
    if not isinstance(recorded, dict) or new.keys() != recorded.keys():
        return False
    if "defect" in new:
        return bool(new["defect"].get("type") == recorded["defect"].get("type"))
    return new == recorded


def _shown(value: Any) -> str:
    return f"{codec.canonical_json(value).decode()[:120]}"


def _what(row: RecordedStep) -> str:
    if row.exit is None:
        return f"{_a(row.kind)} {row.key}, pending"
    return f"{_a(row.kind)} {row.key}"


def _instead(driver: Driver, scope: str) -> str:
    """What the fiber of ``scope`` did instead of awaiting its next recorded step."""
    fiber = next((f for f in driver.fibers if f.scope == scope), None)
    where = "the body" if scope == "" else f"branch {scope.rstrip('/')}"
    if fiber is None:
        return f"nothing: this code never ran {where}"
    if fiber.done and isinstance(fiber.outcome, Ok):
        return f"{where} to return"
    if fiber.done and isinstance(fiber.outcome, Raise):
        return f"{where} to raise {type(fiber.outcome.error).__name__}: {fiber.outcome.error}"
    if fiber.owned_join is not None:
        return f"{where} to wait for {len(fiber.owned_join.children)} new branches"
    if fiber.blocked_key is not None:
        return f"{where} to wait at {fiber.blocked_key} instead"
    return f"{where} to stop there"


def _need(need: Need) -> str:  # noqa: PLR0911 -- one return per kind of need
    match need:
        case RunActivity(key=key, attempt=attempt):
            return f"activity {key}" + (f" attempt {attempt}" if attempt > 1 else "")
        case RetryAt(key=key):
            return f"activity {key}, to retry"
        case RegisterClock(key=key) | ClockDue(key=key):
            return f"clock {key}"
        case AwaitEvent(key=key):
            return f"wait {key}"
        case SettleRace(key=key, winner=winner):
            return f"race {key} to be settled for branch {winner}"
        case children.StartChildNeed(key=key):
            return f"child {key} to start"
        case children.AwaitChildNeed(key=key):
            return f"child {key} to finish"
    return repr(need)  # pragma: no cover


def _point(driver: Driver, needs: Sequence[Need]) -> str:
    if driver.final is not None:
        return (
            "finished" if isinstance(driver.final, Ok) else f"finished ({type(driver.final.error).__name__})"
        )
    if not needs:
        return "parked"
    shown = ", ".join(_need(n) for n in needs[:3])
    return f"at {shown}" + (f" and {len(needs) - 3} more" if len(needs) > 3 else "")
