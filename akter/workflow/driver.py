"""The deterministic driver: steps a workflow body against its recorded history. No I/O.

The body and every branch of a race or ``akter.all`` is a *fiber*: a coroutine the driver steps
with ``send``/``throw``. Fibers are stepped in creation order, so a replay meets effects in the
order the first run did. When a fiber yields an effect the driver looks its step up in the
history handed to it:

* a settled step resumes the fiber at once with the recorded value (or raises the recorded
  error) — this is replay, and it costs no I/O;
* anything else becomes a **need**: run activity attempt *n*, register a clock, wait for an
  event, settle a race. ``advance(now)`` returns the needs; the pass (``passes.py``) does the I/O,
  records new rows with ``record()``, and calls ``advance`` again.

When every fiber is parked on a need that is not ready (a future clock, an event not yet
there), the pass suspends the execution. The body ends in an outcome; a failing or interrupted
outcome runs the registered compensations, and every outcome runs the finalizers, as fibers of
their own, before ``final`` is set.

A suspension abandons the fibers with ``close()``, which raises ``GeneratorExit`` (a
``BaseException``) at the await: ``except Exception`` in a body cannot swallow it, though a body's
``finally`` blocks do run at every suspension (``wf.finalizer`` is for end-of-execution work).
"""

from __future__ import annotations

import contextlib
from collections.abc import Coroutine
from typing import Any

import attrs
from returns.maybe import Nothing, Some

from akter import codec
from akter.errors import CorruptRecord, EffectDefect, Interrupted
from akter.workflow import exits
from akter.workflow.context import WorkflowContext, reset_driver, set_driver
from akter.workflow.declare import Workflow
from akter.workflow.effects import ActivityCall, All, Effect, Race, Sleep, Wait, as_coroutine
from akter.workflow.exits import Ok, Outcome, Raise


@attrs.frozen
class StepRow:
    """One recorded step row, as the pass loaded or wrote it."""

    step: str
    attempt: int
    kind: str
    exit: dict[str, Any] | None
    due_ms: int | None = None
    started_ms: int = 0
    cursor: int | None = None
    scanned: int | None = None


# ---- needs: what the driver asks the pass to do -------------------------------------------


@attrs.frozen
class RunActivity:
    call: ActivityCall
    attempt: int


@attrs.frozen
class RetryAt:
    """An attempt failed with a retryable defect; the next one may start at ``due_ms``."""

    call: ActivityCall
    due_ms: int


@attrs.frozen
class RegisterClock:
    effect: Sleep


@attrs.frozen
class ClockDue:
    effect: Sleep
    due_ms: int


@attrs.frozen
class AwaitEvent:
    effect: Wait
    row: StepRow | None


@attrs.frozen
class SettleRace:
    effect: Race
    winner: int


Need = RunActivity | RetryAt | RegisterClock | ClockDue | AwaitEvent | SettleRace


class _Join:
    """A race or an ``all``: a parent fiber waiting on child fibers."""

    def __init__(self, effect: Race | All, parent: _Fiber, replay_winner: int | None) -> None:
        self.effect = effect
        self.parent = parent
        self.children: list[_Fiber] = []
        self.results: dict[int, Outcome] = {}
        self.replay_winner = replay_winner
        self.winner: int | None = None


class _Fiber:
    __slots__ = ("blocked", "coro", "done", "index", "join", "next_in", "outcome", "owned_join")

    def __init__(self, coro: Coroutine[Any, Any, Any], join: _Join | None = None, index: int = 0) -> None:
        self.coro = coro
        self.join = join
        self.index = index
        self.next_in: Outcome | None = Ok(None)  # what to deliver at the next step
        self.blocked: Effect | None = None
        self.done = False
        self.outcome: Outcome | None = None
        self.owned_join: _Join | None = None


class Driver:
    """Interprets one pass of one execution. Build it, then alternate ``advance`` and the I/O."""

    def __init__(
        self,
        workflow: Workflow[Any, Any],
        ctx: WorkflowContext,
        payload: Any,
        history: dict[str, list[StepRow]],
        *,
        interrupted: bool = False,
    ) -> None:
        if workflow.fn is None:
            raise EffectDefect(f"{workflow!r} has no body")
        self.workflow = workflow
        self.ctx = ctx
        self.history = history
        self.interrupted = interrupted
        self.fibers: list[_Fiber] = []
        self.phase = "body"
        self.body_outcome: Outcome | None = None
        #: the execution's outcome once the body and its compensations/finalizers are done
        self.final: Outcome | None = None
        body = workflow.fn(ctx, payload)
        if not isinstance(body, Coroutine):
            raise EffectDefect(f"the body of {workflow!r} did not return a coroutine")
        self._spawn(body)

    # ---- public protocol -------------------------------------------------------------------

    def record(self, row: StepRow) -> None:
        """Add or replace a row the pass wrote or re-read (by step and attempt)."""
        rows = [r for r in self.history.get(row.step, []) if r.attempt != row.attempt]
        rows.append(row)
        rows.sort(key=lambda r: r.attempt)
        self.history[row.step] = rows

    def interrupt(self) -> None:
        self.interrupted = True

    def advance(self, now_ms: int) -> list[Need]:
        """Step every fiber as far as the history allows; return what the rest needs."""
        while True:
            progressed = self._run_runnable()
            needs: dict[str, Need] = {}
            for fiber in self._live():
                if fiber.blocked is None or fiber.owned_join is not None:
                    continue
                resolved = self._resolve(fiber.blocked, now_ms)
                if isinstance(resolved, Ok | Raise):
                    fiber.next_in, fiber.blocked = resolved, None
                    progressed = True
                else:
                    needs.setdefault(_need_key(resolved), resolved)
            for join in self._joins():
                need = self._join_need(join)
                if need is None:
                    progressed = progressed or join.parent.next_in is not None
                else:
                    needs.setdefault(_need_key(need), need)
            if progressed:
                continue
            if self.phase == "body" and self.interrupted and self.final is None:
                self._abandon_body(Raise(Interrupted("interrupted")))
                continue
            if self.final is not None:
                return []
            return list(needs.values())

    def close(self) -> None:
        """Abandon every fiber (the pass is suspending or giving up)."""
        for fiber in self.fibers:
            self._close(fiber)

    # ---- stepping ---------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, Any], join: _Join | None = None, index: int = 0) -> _Fiber:
        fiber = _Fiber(coro, join, index)
        self.fibers.append(fiber)
        return fiber

    def _live(self) -> list[_Fiber]:
        return [f for f in self.fibers if not f.done]

    def _joins(self) -> list[_Join]:
        return [f.owned_join for f in self._live() if f.owned_join is not None]

    def _run_runnable(self) -> bool:
        progressed = False
        while True:
            runnable = next((f for f in self.fibers if not f.done and f.next_in is not None), None)
            if runnable is None:
                return progressed
            progressed = True
            self._step(runnable)

    def _step(self, fiber: _Fiber) -> None:
        delivered, fiber.next_in = fiber.next_in, None
        token = set_driver(self)
        try:
            if isinstance(delivered, Raise):
                yielded = fiber.coro.throw(delivered.error)
            else:
                yielded = fiber.coro.send(delivered.value if delivered is not None else None)
        except StopIteration as stop:
            self._finish(fiber, Ok(stop.value))
            return
        except Exception as exc:
            self._finish(fiber, Raise(exc))
            return
        finally:
            reset_driver(token)
        if not isinstance(yielded, Effect):
            what = type(yielded).__name__ if yielded is not None else "a bare yield (asyncio.sleep?)"
            self._close(fiber)
            self._finish(
                fiber,
                Raise(
                    EffectDefect(
                        f"{self.workflow!r} awaited {what}, which is not an akter effect: a body runs "
                        f"under akter's driver, not an event loop; put I/O in an activity"
                    )
                ),
            )
            return
        self._on_effect(fiber, yielded)

    def _on_effect(self, fiber: _Fiber, effect: Effect) -> None:
        step = getattr(effect, "step", None)
        if step is not None and (
            step.workflow is not self.workflow or self.workflow.steps.get(step.name) is not step
        ):
            self._close(fiber)
            self._finish(
                fiber, Raise(EffectDefect(f"unregistered step {step.name!r} awaited in {self.workflow!r}"))
            )
            return
        if isinstance(effect, Race | All):
            self._open_join(fiber, effect)
            return
        fiber.blocked = effect

    def _open_join(self, fiber: _Fiber, effect: Race | All) -> None:
        replay_winner: int | None = None
        if isinstance(effect, Race):
            rows = self.history.get(effect.step.name, [])
            if rows and rows[-1].exit is not None:
                replay_winner = int(rows[-1].exit["winner"])
        join = _Join(effect, fiber, replay_winner)
        fiber.owned_join = join
        fiber.blocked = effect
        for index, branch in enumerate(effect.branches):
            try:
                coro = as_coroutine(branch)
            except TypeError as exc:
                self._abandon_join(join)
                fiber.next_in, fiber.blocked, fiber.owned_join = Raise(EffectDefect(str(exc))), None, None
                return
            if replay_winner is not None and index != replay_winner:
                coro.close()  # a recorded race replays its winner only; losers never run again
                continue
            join.children.append(self._spawn(coro, join, index))

    def _finish(self, fiber: _Fiber, outcome: Outcome) -> None:
        fiber.done, fiber.outcome, fiber.blocked = True, outcome, None
        join = fiber.join
        if join is None:
            self._root_finished(outcome)
            return
        if join.parent.done:
            return
        join.results[fiber.index] = outcome
        if isinstance(join.effect, Race):
            if join.replay_winner is not None:
                self._resume_parent(join, outcome)
            elif join.winner is None:
                join.winner = fiber.index
                for child in join.children:
                    if child is not fiber:
                        self._close(child)
            return
        if isinstance(outcome, Raise):
            self._abandon_join(join)
            self._resume_parent(join, outcome)
        elif len(join.results) == len(join.effect.branches):
            values = tuple(join.results[i].value for i in range(len(join.effect.branches)))  # type: ignore[union-attr]
            self._resume_parent(join, Ok(values))

    def _join_need(self, join: _Join) -> Need | None:
        """A decided race waits for its settle to be recorded, then resumes its parent."""
        if not isinstance(join.effect, Race) or join.winner is None or join.replay_winner is not None:
            return None
        rows = self.history.get(join.effect.step.name, [])
        if rows and rows[-1].exit is not None:
            recorded = int(rows[-1].exit["winner"])
            outcome = join.results.get(recorded)
            if outcome is None:  # another pass settled the race for another branch
                raise CorruptRecord(f"race {join.effect.step.name!r} recorded winner {recorded} unknown here")
            self._resume_parent(join, outcome)
            return None
        return SettleRace(join.effect, join.winner)

    def _resume_parent(self, join: _Join, outcome: Outcome) -> None:
        parent = join.parent
        parent.owned_join, parent.blocked, parent.next_in = None, None, outcome

    def _abandon_join(self, join: _Join) -> None:
        for child in join.children:
            self._close(child)

    def _close(self, fiber: _Fiber) -> None:
        if fiber.owned_join is not None:
            self._abandon_join(fiber.owned_join)
            fiber.owned_join = None
        if not fiber.done:
            fiber.done = True
            fiber.blocked = None
            fiber.next_in = None
        token = set_driver(self)
        try:
            fiber.coro.close()
        except RuntimeError:
            pass  # the body caught GeneratorExit and awaited again; it is abandoned all the same
        finally:
            reset_driver(token)

    # ---- the end of the body, compensations and finalizers ---------------------------------

    def _root_finished(self, outcome: Outcome) -> None:
        if self.phase == "body":
            self.body_outcome = outcome
            self.phase = "finish"
            self._spawn(_finish_phase(self.ctx, outcome))
        else:
            assert self.body_outcome is not None
            self.final = self.body_outcome

    def _abandon_body(self, outcome: Outcome) -> None:
        for fiber in list(self.fibers):
            self._close(fiber)
        self._root_finished(outcome)

    # ---- resolving an effect against the history ------------------------------------------

    def _resolve(self, effect: Effect, now_ms: int) -> Outcome | Need:
        if isinstance(effect, ActivityCall):
            return self._resolve_activity(effect, now_ms)
        if isinstance(effect, Sleep):
            rows = self.history.get(effect.step.name, [])
            if not rows:
                return RegisterClock(effect)
            row = rows[-1]
            if row.exit is not None:
                return exits.decode(row.exit, None, ())
            assert row.due_ms is not None
            return ClockDue(effect, row.due_ms)
        if isinstance(effect, Wait):
            rows = self.history.get(effect.step.name, [])
            if rows and rows[-1].exit is not None:
                return _decode_wait(effect, rows[-1].exit)
            return AwaitEvent(effect, rows[-1] if rows else None)
        raise EffectDefect(f"the driver cannot interpret {effect!r}")  # pragma: no cover

    def _resolve_activity(self, call: ActivityCall, now_ms: int) -> Outcome | Need:
        rows = self.history.get(call.step.name, [])
        if not rows:
            return RunActivity(call, 1)
        last = rows[-1]
        if last.exit is None:
            return RunActivity(call, last.attempt)  # a rerun of an unsettled attempt reuses its number
        if exits.is_retryable_defect(last.exit):
            due = int(last.exit["retry_at_ms"])
            return RunActivity(call, last.attempt + 1) if due <= now_ms else RetryAt(call, due)
        return exits.decode(last.exit, call.step.success, call.step.errors)


def _need_key(need: Need) -> str:
    if isinstance(need, SettleRace):
        return need.effect.step.name
    return need.effect.step.name if not isinstance(need, RunActivity | RetryAt) else need.call.step.name


def _decode_wait(effect: Wait, exit_: dict[str, Any]) -> Outcome:
    if "ok" not in exit_:
        return exits.decode(exit_, None, ())
    match = exit_["ok"]
    if match is None:
        return Ok(Nothing)
    try:
        return Ok(Some(codec.from_primitive(match["event"], effect.step.event)))
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptRecord(f"wait {effect.step.name!r} recorded an undecodable event: {exc}") from exc


async def _finish_phase(ctx: WorkflowContext, outcome: Outcome) -> None:
    """Compensations (reverse order) when the body failed or was interrupted, then finalizers.
    A failing compensation or finalizer does not stop the others; the body's outcome stands."""
    if isinstance(outcome, Raise):
        for undo in reversed(ctx.compensations):
            # a failing undo is recorded as its own step's exit; the body's outcome stands
            with contextlib.suppress(Exception):
                await undo()
    for thunk in reversed(ctx.finalizers):
        with contextlib.suppress(Exception):
            await thunk()
