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

**Occurrences.** Each await of a declared step is a new occurrence of it, identified by a
``StepKey``: the step's name, the fiber's *scope* (``""`` for the body, ``"<k>.<i>/"`` appended
for branch *i* of the *k*-th race or all its parent opened) and the count of that step's awaits
in that scope. A fiber's own sequence of awaits is deterministic given the values it receives,
so the key of every await is the same on every replay, whatever order parallel branches
finished in the first time, and whether or not a race's losers run again.

**Abandonment.** A race's losers and the siblings of an ``all`` branch that raised are closed;
their scopes are collected in ``abandoned`` so that the pass settles their pending waits and
clocks as abandoned (they must wake nothing). An abandoned step never resumes its fiber.

**Interrupts.** The pass lets in-flight attempts settle (cancelling async ones) before it calls
``interrupt()``; attempts settled after the interrupt carry ``after_interrupt`` in their exit and
are never delivered to the body. The body is abandoned at its first unsettled await, and the
compensations run: the undo of every compensated step that succeeded, including one that
succeeded after the interrupt arrived. A failing undo or finalizer does not stop the others; the
execution then ends with ``CompensationFailed`` carrying the body's outcome.

When every fiber is parked on a need that is not ready (a future clock, an event not yet
there), the pass suspends the execution. ``close()`` abandons the fibers by raising
``GeneratorExit`` (a ``BaseException``) at the await: ``except Exception`` in a body cannot
swallow it, though a body's ``finally`` blocks do run at every suspension (``wf.finalizer`` is
for end-of-execution work).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

import attrs
from returns.maybe import Nothing, Some

from akter import codec
from akter.errors import CompensationFailed, CorruptRecord, EffectDefect, Interrupted
from akter.workflow.api.declare import (
    ActivityCall,
    ActivityStep,
    ChildResult,
    Compensation,
    ContinueAsNew,
    Race,
    Sleep,
    StartChild,
    Wait,
    Workflow,
    WorkflowContext,
)
from akter.workflow.api.determinism import Now, RecordNow, resolve_now
from akter.workflow.api.effects import All, Effect, as_coroutine
from akter.workflow.api.history import FINISH_SCOPE as FINISH_SCOPE  # noqa: PLC0414 -- re-exported: the engine and tools import it here
from akter.workflow.api.history import StepKey as StepKey  # noqa: PLC0414 -- the engine and tools import it here
from akter.workflow.api.history import StepRow as StepRow  # noqa: PLC0414 -- the engine and tools import it here
from akter.workflow.api.running import reset_driver, set_driver
from akter.workflow.core import children, exits
from akter.workflow.core.exits import Ok, Outcome, Raise

# ---- needs: what the driver asks the pass to do -------------------------------------------


@attrs.frozen
class RunActivity:
    call: ActivityCall
    key: StepKey
    attempt: int


@attrs.frozen
class RetryAt:
    """An attempt failed with a retryable defect; the next one may start at ``due_ms``."""

    call: ActivityCall
    key: StepKey
    due_ms: int


@attrs.frozen
class RegisterClock:
    effect: Sleep
    key: StepKey


@attrs.frozen
class ClockDue:
    effect: Sleep
    key: StepKey
    due_ms: int


@attrs.frozen
class AwaitEvent:
    effect: Wait
    key: StepKey
    row: StepRow | None


@attrs.frozen
class SettleRace:
    effect: Race
    key: StepKey
    winner: int


Need = (
    RunActivity
    | RetryAt
    | RegisterClock
    | ClockDue
    | AwaitEvent
    | SettleRace
    | RecordNow
    | children.StartChildNeed
    | children.AwaitChildNeed
)


class _Never:
    """What resolving an abandoned step (or one settled after the interrupt) gives: nothing,
    ever — the fiber stays parked until its join or the pass closes it."""


_NEVER = _Never()


class _Join:
    """A race or an ``all``: a parent fiber waiting on child fibers."""

    def __init__(
        self, effect: Race | All, parent: _Fiber, key: StepKey | None, prefix: str, replay_winner: int | None
    ) -> None:
        self.effect = effect
        self.parent = parent
        self.key = key
        self.prefix = prefix
        self.children: list[_Fiber] = []
        #: branches of an ``all`` with a ``limit`` not started yet, in order
        self.waiting: list[tuple[int, Coroutine[Any, Any, Any]]] = []
        self.results: dict[int, Outcome] = {}
        self.replay_winner = replay_winner
        self.winner: int | None = None


class _Fiber:
    __slots__ = (
        "blocked",
        "blocked_key",
        "coro",
        "counts",
        "done",
        "index",
        "join",
        "joins",
        "live",
        "next_in",
        "outcome",
        "owned_join",
        "scope",
    )

    def __init__(
        self,
        coro: Coroutine[Any, Any, Any],
        scope: str,
        join: _Join | None = None,
        index: int = 0,
        *,
        live: bool = False,
    ) -> None:
        self.coro = coro
        self.scope = scope
        self.join = join
        self.index = index
        self.next_in: Outcome | None = Ok(None)  # what to deliver at the next step
        self.blocked: Effect | None = None
        self.blocked_key: StepKey | None = None
        self.done = False
        self.outcome: Outcome | None = None
        self.owned_join: _Join | None = None
        self.counts: dict[str, int] = {}
        self.joins = 0
        #: the fiber got past a step this pass settled (not a replay): ``wf.log`` emits
        self.live = live


class Driver:
    """Interprets one pass of one execution. Build it, then alternate ``advance`` and the I/O."""

    def __init__(
        self,
        workflow: Workflow[Any, Any],
        ctx: WorkflowContext,
        payload: Any,
        history: dict[StepKey, list[StepRow]],
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
        #: scope prefixes of abandoned branches whose pending waits and clocks must be settled
        self.abandoned: set[str] = set()
        #: the key each awaited effect got, so a compensation finds its forward step
        self._keys: dict[int, StepKey] = {}
        #: the fiber being stepped right now (``wf.random()`` reads its scope)
        self.current: _Fiber | None = None
        #: where the body's ``wf.log`` records are held instead of emitted (a start's prefix,
        #: ``prefix.py``, emits them only once its turn committed); None: emitted at once
        self.held_logs: list[Any] | None = None
        #: each occurrence's last row as loaded: a row replaced since was settled by this pass
        self._loaded = {key: rows[-1] for key, rows in history.items() if rows}
        body = workflow.fn(ctx, payload)
        if not isinstance(body, Coroutine):
            raise EffectDefect(f"the body of {workflow!r} did not return a coroutine")
        self._spawn(body, "", live=not self._loaded)

    # ---- public protocol -------------------------------------------------------------------

    def record(self, row: StepRow) -> None:
        """Add or replace a row the pass wrote or re-read (by occurrence and attempt)."""
        rows = [r for r in self.history.get(row.key, []) if r.attempt != row.attempt]
        rows.append(row)
        rows.sort(key=lambda r: r.attempt)
        self.history[row.key] = rows

    def interrupt(self) -> None:
        self.interrupted = True

    def advance(self, now_ms: int) -> list[Need]:
        """Step every fiber as far as the history allows; return what the rest needs."""
        while True:
            progressed = self._run_runnable()
            needs: dict[StepKey, Need] = {}
            for fiber in self._live():
                if fiber.blocked is None or fiber.owned_join is not None or fiber.blocked_key is None:
                    continue
                resolved = self._resolve(fiber.blocked, fiber.blocked_key, now_ms)
                if isinstance(resolved, Ok | Raise):
                    fiber.live = self._fresh(fiber.blocked_key)
                    fiber.next_in, fiber.blocked, fiber.blocked_key = resolved, None, None
                    progressed = True
                elif not isinstance(resolved, _Never):
                    needs.setdefault(resolved.key, resolved)
            for join in self._joins():
                need = self._join_need(join)
                if need is None:
                    progressed = progressed or join.parent.next_in is not None
                else:
                    needs.setdefault(need.key, need)
            if progressed:
                continue
            if self.phase == "body" and self.interrupted and self.final is None:
                self._abandon_body(Raise(Interrupted("interrupted")))
                continue
            if self.final is not None:
                return []
            return list(needs.values())

    def _fresh(self, key: StepKey | None) -> bool:
        """Whether the occurrence's row was written (or settled) by this pass."""
        if key is None:
            return False
        rows = self.history.get(key, [])
        return bool(rows) and rows[-1] is not self._loaded.get(key)

    def close(self) -> None:
        """Abandon every fiber (the pass is suspending or giving up)."""
        for fiber in self.fibers:
            self._close(fiber)

    def key_of(self, effect: Effect) -> StepKey | None:
        """The occurrence an awaited effect was given (None: not awaited in this pass)."""
        return self._keys.get(id(effect))

    def forward_result(self, entry: Compensation) -> Outcome | None:
        """What a compensated forward step ended with: the value the body received, or — for a
        step that settled after the interrupt, which the body never received — its recorded
        exit. None when it never settled successfully."""
        if entry.settled:
            return Ok(entry.result)
        key = self.key_of(entry.effect)
        if key is None or not isinstance(entry.effect, ActivityCall):
            return None
        rows = self.history.get(key, [])
        if not rows or rows[-1].exit is None or "ok" not in rows[-1].exit:
            return None
        outcome = exits.decode(rows[-1].exit, entry.effect.step.success, entry.effect.step.errors)
        return outcome if isinstance(outcome, Ok) else None

    # ---- stepping ---------------------------------------------------------------------------

    def _spawn(
        self,
        coro: Coroutine[Any, Any, Any],
        scope: str,
        join: _Join | None = None,
        index: int = 0,
        *,
        live: bool = False,
    ) -> _Fiber:
        fiber = _Fiber(coro, scope, join, index, live=live if join is None else join.parent.live)
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
        self.current = fiber
        try:
            if isinstance(delivered, Raise):
                yielded = fiber.coro.throw(delivered.error)
            else:
                yielded = fiber.coro.send(delivered.value if delivered is not None else None)
        except StopIteration as stop:
            self._finish(fiber, Ok(stop.value))
            return
        except (Exception, ContinueAsNew) as exc:
            self._finish(fiber, Raise(exc))
            return
        finally:
            self.current = None
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
        key: StepKey | None = None
        if step is not None:
            if step.workflow is not self.workflow or self.workflow.steps.get(step.name) is not step:
                self._close(fiber)
                defect = EffectDefect(f"unregistered step {step.name!r} awaited in {self.workflow!r}")
                self._finish(fiber, Raise(defect))
                return
            occurrence = fiber.counts[step.name] = fiber.counts.get(step.name, 0) + 1
            key = StepKey(step.name, fiber.scope, occurrence)
            self._keys[id(effect)] = key
        else:
            builtin = getattr(effect, "builtin", None)
            if builtin is not None:  # a built-in step (``determinism.py``): keyed by occurrence too
                occurrence = fiber.counts[builtin] = fiber.counts.get(builtin, 0) + 1
                key = StepKey(builtin, fiber.scope, occurrence)
            else:
                key = children.key_of(effect)  # a child's result: under its start's occurrence
        if isinstance(effect, Race | All):
            fiber.joins += 1
            self._open_join(fiber, effect, key, f"{fiber.scope}{fiber.joins}.")
            return
        fiber.blocked, fiber.blocked_key = effect, key

    def _open_join(self, fiber: _Fiber, effect: Race | All, key: StepKey | None, prefix: str) -> None:
        replay_winner: int | None = None
        if isinstance(effect, Race) and key is not None:
            rows = self.history.get(key, [])
            if rows and rows[-1].exit is not None:
                replay_winner = int(rows[-1].exit["winner"])
        join = _Join(effect, fiber, key, prefix, replay_winner)
        fiber.owned_join = join
        fiber.blocked = effect
        limit = effect.limit if isinstance(effect, All) else None
        for index, branch in enumerate(effect.branches):
            try:
                coro = as_coroutine(branch)
            except TypeError as exc:
                self._abandon_join(join)
                fiber.next_in, fiber.blocked, fiber.owned_join = Raise(EffectDefect(str(exc))), None, None
                return
            if replay_winner is not None and index != replay_winner:
                coro.close()  # a recorded race replays its winner only; losers never run again
                self.abandoned.add(f"{prefix}{index}/")
                continue
            if limit is not None and len(join.children) >= limit:
                join.waiting.append((index, coro))  # a branch's scope is its index: replays alike
                continue
            join.children.append(self._spawn(coro, f"{prefix}{index}/", join, index))

    def _finish(self, fiber: _Fiber, outcome: Outcome) -> None:
        fiber.done, fiber.outcome, fiber.blocked, fiber.blocked_key = True, outcome, None, None
        join = fiber.join
        if join is None:
            self._root_finished(outcome)
            return
        if join.parent.done:
            return
        join.results[fiber.index] = outcome
        if isinstance(join.effect, Race):
            if join.replay_winner is not None:
                self._resume_parent(join, outcome, live=fiber.live)
            elif join.winner is None:
                join.winner = fiber.index
                for child in join.children:
                    if child is not fiber:
                        self._abandon(child)
            return
        if isinstance(outcome, Raise):
            self._abandon_join(join)
            self._resume_parent(join, outcome, live=fiber.live)
        elif join.waiting:
            index, coro = join.waiting.pop(0)
            join.children.append(self._spawn(coro, f"{join.prefix}{index}/", join, index))
        elif len(join.results) == len(join.effect.branches):
            values = tuple(join.results[i].value for i in range(len(join.effect.branches)))  # type: ignore[union-attr]
            self._resume_parent(join, Ok(values), live=fiber.live)

    def _join_need(self, join: _Join) -> SettleRace | None:
        """A decided race waits for its settle to be recorded, then resumes its parent."""
        if not isinstance(join.effect, Race) or join.winner is None or join.replay_winner is not None:
            return None
        if join.key is None:  # pragma: no cover - a race's join is keyed by its step when made
            raise AssertionError(f"race join without a step key: {join!r}")
        rows = self.history.get(join.key, [])
        if rows and rows[-1].exit is not None:
            recorded = int(rows[-1].exit["winner"])
            outcome = join.results.get(recorded)
            if outcome is None:  # another pass settled the race for another branch
                raise CorruptRecord(f"race {join.key} recorded winner {recorded} unknown here")
            self._resume_parent(join, outcome, live=self._fresh(join.key))
            return None
        return SettleRace(join.effect, join.key, join.winner)

    def _resume_parent(self, join: _Join, outcome: Outcome, *, live: bool) -> None:
        parent = join.parent
        parent.owned_join, parent.blocked, parent.next_in = None, None, outcome
        parent.live = live

    def _abandon_join(self, join: _Join) -> None:
        for child in join.children:
            self._abandon(child)
        waiting, join.waiting = join.waiting, []
        for _, coro in waiting:
            coro.close()  # never started: nothing of it was recorded

    def _abandon(self, fiber: _Fiber) -> None:
        """Close a branch given up by its race or all, and mark its steps abandoned."""
        if not fiber.done:
            self.abandoned.add(fiber.scope)
        self._close(fiber)

    def _close(self, fiber: _Fiber) -> None:
        if fiber.owned_join is not None:
            join, fiber.owned_join = fiber.owned_join, None
            self._abandon_join(join)
        if not fiber.done:
            fiber.done = True
            fiber.blocked = None
            fiber.blocked_key = None
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
            self._spawn(_finish_phase(self, outcome), FINISH_SCOPE, live=self.fibers[0].live)
            return
        if self.body_outcome is None:  # pragma: no cover - set above when the body phase ended
            raise AssertionError("cleanups finished before the body did")
        failures = outcome.value if isinstance(outcome, Ok) else (f"cleanup raised {outcome.error!r}",)
        if not failures:
            self.final = self.body_outcome
            return
        original = self.body_outcome.error if isinstance(self.body_outcome, Raise) else None
        self.final = Raise(CompensationFailed(original, tuple(failures)))

    def _abandon_body(self, outcome: Outcome) -> None:
        for fiber in list(self.fibers):
            if not fiber.done:
                self.abandoned.add(fiber.scope)
            self._close(fiber)
        self._root_finished(outcome)

    # ---- resolving an effect against the history ------------------------------------------

    def _never_resumes(self, row: StepRow | None) -> bool:
        """An abandoned step, or (in an interrupted body) one that settled after the interrupt."""
        if row is None or row.exit is None:
            return False
        if exits.is_abandoned(row.exit):
            return True
        return self.phase == "body" and self.interrupted and exits.after_interrupt(row.exit)

    def _resolve(self, effect: Effect, key: StepKey, now_ms: int) -> Outcome | Need | _Never:  # noqa: PLR0911 -- one return per recorded state
        rows = self.history.get(key, [])
        last = rows[-1] if rows else None
        if self._never_resumes(last):
            return _NEVER
        if isinstance(effect, ActivityCall):
            return self._resolve_activity(effect, key, rows, now_ms)
        if isinstance(effect, Sleep):
            if last is None:
                return RegisterClock(effect, key)
            if last.exit is not None:
                return exits.decode(last.exit, None, ())
            if last.due_ms is None:
                raise CorruptRecord(f"clock {key} has no due time")
            return ClockDue(effect, key, last.due_ms)
        if isinstance(effect, Wait):
            if last is not None and last.exit is not None:
                return _decode_wait(effect, key, last.exit)
            return AwaitEvent(effect, key, last)
        if isinstance(effect, StartChild | ChildResult):
            ctx = self.ctx
            return children.resolve(effect, key, rows, ctx.execution_id, ctx.ref.tenant, ctx.run_number)
        if isinstance(effect, Now):
            now = resolve_now(effect, key, last)
            return now if isinstance(now, RecordNow) else Ok(now)
        raise EffectDefect(f"the driver cannot interpret {effect!r}")  # pragma: no cover

    def _resolve_activity(
        self, call: ActivityCall, key: StepKey, rows: list[StepRow], now_ms: int
    ) -> Outcome | Need:
        if not rows:
            return RunActivity(call, key, 1)
        last = rows[-1]
        if last.exit is None:
            return RunActivity(call, key, last.attempt)  # a rerun of an unsettled attempt reuses its number
        if exits.is_retryable_defect(last.exit):
            due = int(last.exit["retry_at_ms"])
            return RunActivity(call, key, last.attempt + 1) if due <= now_ms else RetryAt(call, key, due)
        return exits.decode(last.exit, call.step.success, call.step.errors)


def retry_at_ms(
    step: ActivityStep[Any], attempt: int, exit_: dict[str, Any], *, now_ms: int, interrupting: bool
) -> int | None:
    """When attempt ``attempt + 1`` of ``step`` is due after attempt ``attempt`` ended with
    ``exit_`` (as ``exits.encode_error`` records it), on the clock ``now_ms`` reads; ``None``
    when there is to be no other attempt. The retry policy, decided here without I/O:

    - only a defect is retried: a declared error is a business outcome, an interrupt is final;
    - never an unknown outcome (``ActivityOutcomeUnknown``): a new attempt's new ids could repeat
      an effect the receiver can no longer deduplicate (invariant 8);
    - never once the execution is being interrupted;
    - at most ``step.retry.times`` attempts (no limit when it is ``None``), each after
      ``step.retry.backoff.delay(attempt)``, which never exceeds the backoff's cap."""
    defect = exit_.get("defect")
    if not isinstance(defect, dict) or defect.get("type") == "ActivityOutcomeUnknown":
        return None
    if interrupting or step.retry.exhausted(attempt):
        return None
    return now_ms + int(step.retry.backoff.delay(attempt).total_seconds() * 1000)


def _decode_wait(effect: Wait, key: StepKey, exit_: dict[str, Any]) -> Outcome:
    if "ok" not in exit_:
        return exits.decode(exit_, None, ())
    match = exit_["ok"]
    if match is None:
        return Ok(Nothing)
    try:
        return Ok(Some(codec.from_primitive(match["event"], effect.step.event)))
    except Exception as exc:
        raise CorruptRecord(f"wait {key} recorded an undecodable event: {exc}") from exc


def _describe(thunk_result: Any) -> str:
    step = getattr(thunk_result, "step", None)
    return f"step {step.name!r}" if step is not None else type(thunk_result).__name__


async def _finish_phase(driver: Driver, outcome: Outcome) -> tuple[str, ...]:
    """Compensations (reverse order) when the body failed or was interrupted, then finalizers.
    A failing one does not stop the others; the failures are what this fiber returns."""
    ctx = driver.ctx
    failures: list[str] = []
    if isinstance(outcome, Raise) and not isinstance(outcome.error, ContinueAsNew):
        # a run that continues as new succeeded: nothing to undo
        for entry in reversed(ctx.compensations):
            forward = driver.forward_result(entry)
            if not isinstance(forward, Ok):
                continue  # the forward step never succeeded: nothing to undo
            failures.extend(await _run_cleanup("compensation", lambda e=entry, v=forward.value: e.undo(v)))
    for thunk in reversed(ctx.finalizers):
        failures.extend(await _run_cleanup("finalizer", thunk))
    return tuple(failures)


async def _run_cleanup(what: str, thunk: Any) -> list[str]:
    effect: Any = None
    try:
        effect = thunk()
        await effect
    except Exception as exc:
        return [f"{what} {_describe(effect)} failed: {type(exc).__name__}: {exits.recorded_message(exc)}"]
    return []
