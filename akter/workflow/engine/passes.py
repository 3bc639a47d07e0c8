"""A pass: one run of an execution's body, from its recorded prefix to the next park or finish.

1. Load the execution and all its steps in one query (or take the head a start or resume turn
   handed over with it: an execution with no step yet needs no load).
2. Check that this runner can replay it faithfully (``compat.py``); if not, leave it suspended
   for a compatible runner and say why (invariant 7).
3. Drive the body (``driver.py``): settled steps replay; needs become I/O here — activity
   attempts run as tasks (written pending first, settled once), clocks and waits are recorded
   and settled, a race's winner is recorded.
4. While activities run, a parked branch whose clock falls due, or a wake-up (an event, an
   interrupt) preempts the wait and the pass goes on.
5. When every branch is parked until a time at most ``tuning.hold_ms`` away (a short sleep, a
   retry's backoff), wait for it in the pass; the recovery timer stays armed should the process
   die. Otherwise suspend through one lock-first function (``akter_wf_suspend_settled``, then
   ``sql/functions/akter_wf_suspend.sql``): it settles abandoned branches' waits, re-checks
   interrupts and unscanned events after the row lock is held, and arms the timer at the
   earliest due time, or deletes it; when the body is done, record the result, settle leftovers
   and delete the timer the same way (``akter_wf_finish_settled``).

**Interrupts.** When the pass learns of an interrupt it starts nothing new, cancels in-flight
async attempts (recording them as interrupted) and awaits sync ones (they cannot be cancelled;
their timeout bounds them), recording each attempt's real outcome marked ``after_interrupt``.
Only then does the driver abandon the body and run the compensations — so nothing is undone
before its forward action settled, and a step that succeeded after the interrupt is undone too.

**Holds.** A pass that knows of a pause, or ran an attempt whose outcome is unknown (declared
``on_unknown="attention"``), starts nothing new, lets its in-flight attempts settle, and holds
(``holds.py``): the execution is ``paused`` or ``needs_attention`` until a person acts. An
interrupt goes first. An exception escaping a pass is counted by the runner; passes failing in a
row make the execution need attention too.

**No spinning.** A suspension refused because something new arrived makes the pass read it and
go on. A refusal that brings nothing the pass could act on (no row changed since the last one)
is never retried at once: the pass backs off, doubling up to ``tuning.max_backoff``, and logs it
(invariant 13).

**One statement per step boundary.** An attempt's outcome is recorded in the driver as soon as
its work returns, and written with the pass's next write — the next attempt's pending row (one
round trip with other passes' boundaries, ``combine.py``), a record, the suspension or the
finish — or on its own before the pass waits for anything else. That carrier, and every write
it lands in, is ``outcomes.Outcomes`` (``self.out``): one place to read where attempt *n*'s
outcome goes. Nothing outside the pass acts on the outcome before it is written: the next
attempt's work starts only once that statement committed.

**Drains.** While the relay drains (``host.stopping``), a pass starts nothing new, lets its
attempts in flight finish (a race's loser is given up as usual), then writes their outcomes and
makes the execution's timer due now in one fenced transaction (``_hand_off``): the next owner of
the bucket resumes it at once. A body that finished meanwhile is finished, not handed on.

Every write is fenced by the activation's generation; a ``Stale`` fence ends the pass quietly.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from psycopg.rows import dict_row

from akter import codec, faults, logs, telemetry
from akter.actor import limits
from akter.errors import CorruptRecord, Defect, InvalidInput
from akter.ids import ActorRef, ExecutionId
from akter.outbox.intents import decode_caller
from akter.workflow.api import activity
from akter.workflow.api.declare import ContinueAsNew, Workflow, WorkflowContext
from akter.workflow.api.determinism import RecordNow
from akter.workflow.core import children, exits, finish
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
    retry_at_ms,
)
from akter.workflow.core.exits import Ok, Raise
from akter.workflow.core.step_params import key_params as _key_params
from akter.workflow.core.step_params import record_params as _record_params
from akter.workflow.core.step_params import step_row as _row
from akter.workflow.engine import adopt, child_serve, continue_as_new, holds, queries, waiting
from akter.workflow.engine.outcomes import CLOCK_EXIT, Outcomes, Stale, rewrote

if TYPE_CHECKING:
    from akter.workflow.engine.host import PassHost

log = logging.getLogger("akter.workflow")

INTERRUPT_EXIT = codec.encode({"interrupt": {}})
ABANDONED_EXIT = codec.encode(exits.ABANDONED)
__all__ = ["Pass", "Stale"]  # Stale is ``outcomes.py``'s: the pass is where it ends


class Pass:
    def __init__(
        self,
        host: PassHost,
        ref: ActorRef,
        eid: ExecutionId,
        generation: int,
        head: dict[str, Any] | None = None,
    ) -> None:
        #: what the engine hands the pass: pool, tuning, declarations (``host.py``)
        self.host = host
        self.tuning = host.tuning
        #: the execution row as its start turn wrote it: a first pass with nothing to load
        self.head = head
        self.sender = host.sender
        self.ref = ref
        self.eid = eid
        self.generation = generation
        self.wake = asyncio.Event()
        self.params: dict[str, Any] = {
            **ref.key_params(),
            "eid": str(eid),
            "generation": generation,
            "bucket": ref.bucket,
        }
        self.cursor = 0
        self.inflight: dict[StepKey, asyncio.Task[StepRow]] = {}
        #: attempts given up by a race or an interrupt, settling in the background
        self.draining: dict[StepKey, asyncio.Task[StepRow]] = {}
        #: attempts the pass cancelled on purpose: they record themselves as interrupted
        self.cancelled: set[StepKey] = set()
        #: the call each attempt runs, to tell an async (cancellable) one from a sync one
        self._calls: dict[StepKey, Any] = {}
        #: the pass has seen the interrupt; attempts settled from now on are after_interrupt
        self.interrupting = False
        #: rows this pass changed: a refused suspension with no change since the last is backed off
        self.writes = 0
        self.driver: Driver | None = None
        #: the pass ended because its generation no longer held
        self.stale = False
        #: where attempt outcomes recorded in the driver wait for the pass's next write, and
        #: every fenced write of the pass (``outcomes.py``)
        self.out = Outcomes(
            host.sender.pool, ref, self.params, recovery=self.tuning.recovery, most=self.tuning.combine_most
        )
        #: the children the driver waits on, read once per round: a result, or None while running
        self.child_results: dict[str, bytes | None] = {}
        #: a pause is asked for: start nothing new, let what runs settle, then hold (holds.py)
        self.pausing = False
        #: an attempt whose outcome is unknown, left pending for a person (holds.py)
        self.attention: holds.Attention | None = None
        #: passes of this execution that failed in a row before this one
        self.failed = 0

    def _driver(self) -> Driver:
        """The driver of this pass (set once the execution loaded and was judged replayable)."""
        if self.driver is None:  # pragma: no cover -- only called after _run built it
            raise RuntimeError(f"the pass of {self.eid} has no driver yet")
        return self.driver

    def now_ms(self) -> int:
        return self.sender.session.now_ms()

    async def _record(self, params: dict[str, Any]) -> None:
        await self.out.record(self._driver(), params)
        self.writes += 1

    # ---- the pass ---------------------------------------------------------------------------

    @telemetry.traced_pass
    async def run(self) -> None:
        try:
            await self._run()
        except Stale as exc:
            self.stale = True
            log.info("pass abandoned: %s", exc, extra=logs.fields(execution=self.eid))
            self.host.forget(self.ref, self.generation)
        finally:
            tasks = [*self.inflight.values(), *self.draining.values()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            if self.driver is not None:
                self.driver.close()

    async def _run(self) -> None:
        await faults.hit("workflow.before_pass", self.ref.actor_id, str(self.eid))
        loaded = self.head is None
        if self.head is not None:
            rows = [self.head]
            self.head = None
        else:
            async with self.sender.pool.connection() as conn:
                cur = conn.cursor(row_factory=dict_row)
                await cur.execute(queries.LOAD, self.params)
                rows = await cur.fetchall()
        if not rows:
            log.warning("execution has no row; nothing to run", extra=logs.fields(execution=self.eid))
            return
        head = rows[0]
        if head["status"] in ("finished", *holds.RESTING):
            return  # a resume delivered while it rests changes nothing (holds.py)
        if loaded:  # a start's row carries its turn's clock, read earlier: no estimate from it
            self.sender.session.observe_clock(head["now_ms"])
        workflow = self.host.workflow(self.ref.actor_type, head["workflow"])
        try:
            history: dict[StepKey, list[StepRow]] = {}
            for r in rows:
                if r["step"] is not None:
                    row = _row(r)
                    history.setdefault(row.key, []).append(row)
        except CorruptRecord as exc:
            await self._leave_blocked([f"recorded history does not decode: {exc}"])
            return
        reasons = await adopt.replay_problems(self.host.actors, self.sender.pool, self.params, head, history)
        if reasons or workflow is None:
            await self._leave_blocked(reasons or [f"workflow {head['workflow']!r} is not declared here"])
            return
        try:
            payload: Any = codec.decode(bytes(head["payload"]), workflow.input)
            principal = decode_caller(bytes(head["principal"])).on_behalf_of
        except CorruptRecord as exc:
            # parked with a visible reason, never retried in a loop (invariant 13)
            await self._leave_blocked([f"the execution's stored input does not decode: {exc}"])
            return
        versions = head["versions"] if isinstance(head["versions"], dict) else json.loads(head["versions"])
        ctx = WorkflowContext(
            execution_id=str(self.eid),
            key=head["key"],
            ref=self.ref,
            principal=principal,
            versions=versions,
            run_number=head.get("run_number", 1),
        )
        self.cursor = head["event_cursor"]
        self.principal = principal
        self.interrupting = bool(head["interrupt"])
        self.pausing = bool(head.get("pause"))
        self.failed = int(head.get("failed_passes") or 0)
        self.driver = Driver(workflow, ctx, payload, history, interrupted=self.interrupting)
        try:
            await self._drive(workflow)
        except CorruptRecord as exc:
            await self._leave_blocked([f"recorded history does not decode: {exc}"])

    @telemetry.traced_blocked
    async def _leave_blocked(self, reasons: list[str]) -> None:
        reason = "; ".join(reasons)
        log.warning(
            "execution left suspended for a compatible runner: %s",
            reason,
            extra=logs.fields(execution=self.eid),
        )
        due = datetime.fromtimestamp(self.now_ms() / 1000, tz=UTC) + self.tuning.recheck
        await self.out.fenced_now(queries.LEAVE_BLOCKED, {"reason": reason, "due": due})

    async def _drive(self, workflow: Workflow[Any, Any]) -> None:  # noqa: PLR0912, PLR0915 -- the pass's states, in order
        driver = self._driver()
        backoff = 0.0
        refused_at = -1
        while True:
            if self.interrupting and not driver.interrupted:
                # start nothing new; let what runs settle, then abandon the body
                if self.inflight:
                    await self._await_progress(None)
                    continue
                driver.interrupt()
            if self.wake.is_set():  # a wake-up (a pause, an interrupt) while the pass was busy
                self.wake.clear()
                await self._check_interrupt()
            if (self.pausing or self.attention is not None) and not self.interrupting:
                if self.inflight:  # in-flight attempts settle first; nothing new starts
                    await self._await_progress(None)
                elif await self._hold():
                    return
                continue
            now = self.now_ms()
            needs = driver.advance(now)
            if driver.final is not None:
                await self._settle_draining()
                await self._finish(workflow, driver.final)
                return
            if self.host.stopping:  # the relay drains: nothing new starts
                if await self._drained(needs):
                    return
                continue
            progressed = False
            parked: list[int] = []
            wanted: set[StepKey] = set()
            self.child_results = await child_serve.prefetch(self.sender.pool, needs)
            for need in needs:
                result = await self._serve(need, now, wanted)
                if result is True:
                    progressed = True
                elif isinstance(result, int):
                    parked.append(result)
            for key in [k for k in self.inflight if k not in wanted]:
                self._give_up(key)  # a race's loser, or a branch an all abandoned
            if progressed:
                continue
            if self.inflight:
                await self._await_progress(min(parked) if parked else None)
                continue
            if parked and min(parked) - self.now_ms() <= self.tuning.hold_ms and not self.draining:
                # due in a moment (a short sleep, a retry's backoff): wait here rather than
                # suspend and be resumed through the relay; the recovery timer stays armed
                await self._await_progress(min(parked))
                continue
            await self._settle_draining()
            if await self._suspend(min(parked) if parked else None):
                return
            if self.writes == refused_at:
                # refused again with nothing changed since the last refusal: never spin
                backoff = min(self.tuning.max_backoff, max(0.01, backoff * 2))
                log.warning(
                    "suspension refused twice with nothing new; retrying in %.2fs",
                    backoff,
                    extra=logs.fields(execution=self.eid),
                )
                await self._await_progress(self.now_ms() + int(backoff * 1000))
            else:
                backoff = 0.0
            refused_at = self.writes

    async def _serve(  # noqa: PLR0911 -- one return per kind of need reads as the table it is
        self, need: Need, now: int, wanted: set[StepKey]
    ) -> bool | int | None:
        """Do what a need asks. True: something was recorded (advance again); an int: parked
        until that time (ms); None: parked with no due time, or running in the background."""
        match need:
            case RunActivity(key=key):
                wanted.add(key)
                if key not in self.inflight and key not in self.draining:
                    self._calls[key] = need.call
                    # the settles so far ride on this attempt's pending write (one statement)
                    carry = self.out.take()
                    self.inflight[key] = asyncio.create_task(self._attempt(need, carry))
                return None
            case RetryAt(due_ms=due):
                return due
            case RegisterClock(effect=effect, key=key):
                after = effect.duration.total_seconds() * 1000
                await self._record(_record_params("clock", key, after_ms=after))
                return True
            case ClockDue(key=key, due_ms=due):
                if due - now > self.tuning.hold_ms:
                    return due  # suspended until then (or held, should it come closer)
                if due - now > self.tuning.settle_ahead_ms:
                    return due - self.tuning.settle_ahead_ms  # held in process: woken a little early
                return await self._settle_clock(key)
            case AwaitEvent():
                served = await waiting.serve(need, self.out, self._driver(), self.cursor, self.now_ms)
                self.writes += served.wrote
                if served.cursor is not None:  # the event it matched: later waits start after it
                    self.cursor = max(self.cursor, served.cursor)
                return served.result
            case SettleRace(key=key, winner=winner):
                exit_ = codec.encode({"winner": winner})
                await self._record(_record_params("race", key, exit_=exit_))
                return True
            case children.StartChildNeed() | children.AwaitChildNeed():
                started = await child_serve.serve(
                    need, self.out, self._driver(), self.child_results, self.principal
                )
                self.writes += started is True
                return started
            case RecordNow(key=key):
                # a zero clock: its due time is the database clock the statement read (akter_wf_record)
                await self._record(_record_params("clock", key, after_ms=0))
                return True
        raise AssertionError(need)  # pragma: no cover

    async def _settle_clock(self, key: StepKey) -> bool | int:
        """Settle a clock due now or within ``tuning.settle_ahead_ms``: True once settled; else the
        time (on the estimate) to ask again — the database clock is not there yet."""
        await faults.hit("workflow.before_clock_settle", self.ref.actor_id, str(self.eid))
        extra = {**_key_params(key), "exit": CLOCK_EXIT, "hold_ms": self.tuning.settle_hold_ms}
        row = await self.out.fenced(queries.SETTLE_CLOCK, extra)
        self.sender.session.observe_clock(row["now_ms"])  # read as the statement ended
        if row["settled"]:  # the row is as the pass wrote it: nothing to read back
            rewrote(self._driver(), key, exit_=CLOCK_EXIT)
            self.writes += 1
            return True
        if row["due_ms"] is None:  # no open clock row: read what the record says
            await self.out.reload(self._driver(), key)
            return True
        # due further than the server waits (the clock moved, or the estimate is off)
        return self.now_ms() + max(1, int(row["due_ms"]) - int(row["now_ms"]) - self.tuning.settle_ahead_ms)

    def _give_up(self, key: StepKey) -> None:
        """An attempt nobody awaits any more: an async one is cancelled and records itself as
        interrupted; a sync one cannot be stopped and settles with its real outcome. Either way
        it settles in the background (``draining``) and the pass goes on."""
        task = self.inflight.pop(key)
        self.draining[key] = task
        if self._cancellable(key):
            self.cancelled.add(key)
            task.cancel()

    def _cancellable(self, key: StepKey) -> bool:
        fn = getattr(self._calls.get(key), "fn", None)
        return inspect.iscoroutinefunction(fn)

    async def _settle_draining(self) -> None:
        """Wait for given-up attempts to record their real outcome before suspending or
        finishing: nothing is undone, and no execution ends, while an effect is still running."""
        while self.draining:
            key, task = next(iter(self.draining.items()))
            await asyncio.wait([task])
            del self.draining[key]
            self._take(task)

    async def _await_progress(self, due_ms: int | None) -> None:
        await self.out.flush()
        timeout = None if due_ms is None else max(0.0, (due_ms - self.now_ms()) / 1000)
        waker = asyncio.ensure_future(self.wake.wait())
        try:
            done, _ = await asyncio.wait(
                [*self.inflight.values(), waker], timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            waker.cancel()
        self.wake.clear()
        for key, task in list(self.inflight.items()):
            if task.done():
                del self.inflight[key]
                self._take(task)
        if waker in done:
            await self._check_interrupt()

    def _take(self, task: asyncio.Task[StepRow]) -> None:
        """Record what a finished attempt task settled. One cancelled before it wrote its
        outcome (it never started, or was still writing its pending row) recorded nothing: the
        driver asks for it again, or the finish settles its pending row as interrupted."""
        if task.cancelled():
            return
        self._driver().record(task.result())  # a Stale raised by the attempt ends the pass here

    async def _check_interrupt(self) -> None:
        row = await self.out.one(queries.POLL)
        if row is not None and row["interrupt"]:
            self._learn_interrupt()
        if row is not None:
            self.pausing = bool(row["pause"])

    def _learn_interrupt(self) -> None:
        if self.interrupting:
            return
        self.interrupting = True
        if self.attention is not None:  # its outcome stays unknown; the interrupt abandons it
            attention, self.attention = self.attention, None
            self.out.add(attention.interrupted())
            self._driver().record(attention.row(after_interrupt=True))
        for key in [k for k in self.inflight if self._cancellable(k)]:
            self.cancelled.add(key)
            self.inflight[key].cancel()

    # ---- activities ---------------------------------------------------------------------------

    @telemetry.traced_attempt
    async def _attempt(self, need: RunActivity, carry: list[tuple[StepKey, int, bytes]]) -> StepRow:
        call, key, attempt = need.call, need.key, need.attempt
        step = call.step
        begun = await self.out.begin(key, attempt, carry)
        started_ms = begun["started_ms"]
        if begun["exit"] is not None:  # another runner settled it; take its exit
            return StepRow(
                key, attempt, "activity", codec.decode_primitive(bytes(begun["exit"])), None, started_ms
            )
        await faults.hit("workflow.before_activity", self.ref.actor_id, str(self.eid))
        ctx = activity.ActivityContext(
            execution_id=str(self.eid),
            step=key.step,
            occurrence=key.occurrence,
            scope=key.scope,
            run_number=self._driver().ctx.run_number,
            attempt=attempt,
            started_ms=started_ms,
            tenant=self.ref.tenant,
            principal=self.principal,
            sender=self.sender,
        )
        token = activity.set_context(ctx)
        try:
            value = await activity.invoke(call.fn, call.args, call.kwargs, step.timeout)
            exit_: dict[str, Any] = exits.encode_ok(value, step.success)
            # over the cap: this attempt's defect
            limits.check_result(step.workflow.actor, step.qualified_name, exit_["ok"])
        except asyncio.CancelledError:
            if key not in self.cancelled:
                raise  # the pass itself is ending: the recovery timer reruns this attempt
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            exit_ = {"interrupt": {}}
        except Exception as exc:
            exit_ = exits.encode_error(exc, step.errors)
            if "defect" in exit_:
                log.warning(
                    "activity attempt failed: %r",
                    exc,
                    extra=logs.fields(execution=self.eid, step=key, attempt=attempt),
                )
                due = retry_at_ms(step, attempt, exit_, now_ms=self.now_ms(), interrupting=self.interrupting)
                if due is not None:
                    exit_["retry_at_ms"] = due
        finally:
            activity.reset_context(token)
        if ctx.unknown is not None and "interrupt" not in exit_:
            # a send found its derived id expired: whatever the activity did with that error
            # (caught it, returned normally, raised another), its outcome is unknown (invariant 8)
            if step.on_unknown == "attention" and not self.interrupting:
                # left pending for a person to resolve (holds.py); the pass holds
                self.attention = holds.Attention(key, attempt, started_ms, str(ctx.unknown))
                return self.attention.row(after_interrupt=False)
            exit_ = exits.encode_error(ctx.unknown, ())
        if self.interrupting:
            exit_["after_interrupt"] = True
        await faults.hit("workflow.before_settle", self.ref.actor_id, str(self.eid))
        # recorded in the driver now, written with the pass's next write (one statement per step
        # boundary): the body goes on in memory, and nothing outside the pass acts on the
        # outcome before that write commits — the next attempt's work starts after it
        encoded = codec.encode(exit_)
        self.out.add((key, attempt, encoded))
        self.writes += 1
        return StepRow(key, attempt, "activity", codec.decode_primitive(encoded), None, started_ms)

    # ---- suspend and finish -----------------------------------------------------------------

    @telemetry.traced_suspend
    async def _suspend(self, due_ms: int | None) -> bool:
        """Suspend under the fence; False when the pass must go on (interrupt, new events)."""
        driver = self._driver()
        await faults.hit("workflow.before_suspend", self.ref.actor_id, str(self.eid))
        due = None if due_ms is None else datetime.fromtimestamp(due_ms / 1000, tz=UTC)
        check = await self.out.carrying(
            child_serve.SUSPEND if child_serve.has_children(driver.history) else queries.SUSPEND,
            {
                "due": due,
                "abandon": sorted(driver.abandoned),
                "knows_interrupt": self.interrupting,
                "abandoned": ABANDONED_EXIT,
                "notify_within": timedelta(milliseconds=self.tuning.notify_within_ms),
                **child_serve.suspend_params(self.child_results),
            },
        )
        if check["interrupt"]:
            self._learn_interrupt()
            self.writes += 1
            return False
        if check["unscanned"]:
            return False
        log.debug("execution suspended until %s", due, extra=logs.fields(execution=self.eid))
        if self.failed:  # a pass that ended well: failures are counted in a row (holds.py)
            await self.out.fenced_now(holds.RESET_FAILURES)
            self.failed = 0
        return True

    async def _drained(self, needs: list[Need]) -> bool:
        """One round of a drain: True once the execution is handed on; False while attempts
        in flight still run (the pass waited for one)."""
        wanted = {need.key for need in needs if isinstance(need, RunActivity)}
        for key in [k for k in self.inflight if k not in wanted]:
            self._give_up(key)  # a race's loser, as in any round
        if self.inflight:
            await self._await_progress(None)
            return False
        await self._hand_off()
        return True

    async def _hand_off(self) -> None:
        """The relay drains: write the outcomes of the attempts that ran and make the timer due
        now, under the fence in one transaction, so whichever process owns the bucket next
        resumes the execution at once instead of after its recovery timer."""
        await self._settle_draining()
        await self.out.hand_off()
        log.info("execution handed on by the relay's drain", extra=logs.fields(execution=self.eid))

    async def _hold(self) -> bool:
        """Hold a paused execution, or one whose attempt needs attention (holds.py); False
        when the pass must go on (an interrupt it did not know of, a resume meanwhile)."""
        driver = self._driver()
        await self._settle_draining()
        attention = self.attention
        due_ms = holds.held_due(driver.history)
        check = await self.out.carrying(
            holds.HOLD,
            {
                "due": None if due_ms is None else datetime.fromtimestamp(due_ms / 1000, tz=UTC),
                "abandon": sorted(driver.abandoned),
                "knows_interrupt": self.interrupting,
                "abandoned": ABANDONED_EXIT,
                **holds.hold_params(attention),
            },
        )
        self.writes += 1
        if check["interrupt"]:
            self._learn_interrupt()
            return False
        if not check["held"]:
            self.pausing = False  # resumed before it held: go on
            return False
        log.info(
            "execution %s",
            "paused" if attention is None else f"needs attention: {attention.reason}",
            extra=logs.fields(execution=self.eid),
        )
        if attention is None:
            telemetry.pass_ended("paused")
        else:
            telemetry.pass_ended("needs_attention", {"akter.attention.reason": attention.reason})
        return True

    async def _finish(self, workflow: Workflow[Any, Any], final: Ok | Raise) -> None:
        if isinstance(final, Raise) and isinstance(final.error, ContinueAsNew):
            try:
                await self._continue(workflow, final.error)
            except InvalidInput as exc:
                final = Raise(Defect(str(exc), error_type="InvalidInput"))
            else:
                return
        outcome, exit_ = self._result(workflow, final)
        result = codec.encode(exit_)
        row = await self.out.carrying(
            queries.FINISH,
            {
                "outcome": outcome,
                "result": result,
                "interrupt_exit": INTERRUPT_EXIT,
                "drop_steps": self.host.drop_steps,
            },
        )
        log.info(
            "execution %s",
            outcome if row["finished"] else "was already finished",
            extra=logs.fields(execution=self.eid),
        )
        if row["finished"] and outcome != "interrupted":
            # committed: a ``run.result()`` waiting in this process has it now, not after the
            # notification's trip through the server and a read (an interrupt's result names
            # who asked, which the row holds: that one is read)
            self.sender.session.listener.hand_over(str(self.eid), result)

    async def _continue(self, workflow: Workflow[Any, Any], signal: ContinueAsNew) -> None:
        """End this run and start the next (``continue_as_new.py``), then run its first pass
        here: the generation still holds, so no resume needs to go through the relay."""
        row = await self.out.carrying(
            continue_as_new.CONTINUE,
            {**continue_as_new.params(workflow, signal), "recovery": self.tuning.recovery},
        )
        log.info(
            "execution %s",
            "continued as new" if row["continued"] else "was already finished",
            extra=logs.fields(execution=self.eid),
        )
        if row["continued"]:
            self.host.schedule(self.ref, self.eid, self.generation)

    @telemetry.traced_outcome
    def _result(self, workflow: Workflow[Any, Any], final: Ok | Raise) -> tuple[str, dict[str, Any]]:
        """The execution's outcome column and result exit (``finish.py``: a start turn that
        finishes its execution stores the same)."""
        outcome, exit_, final = finish.outcome_of(workflow, final)
        finish.report(self.eid, outcome, final)
        return outcome, exit_
