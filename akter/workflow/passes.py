"""A pass: one run of an execution's body, from its recorded prefix to the next park or finish.

1. Load the execution and all its steps in one query.
2. Check that this runner can replay it faithfully (``compat.py``); if not, leave it suspended
   for a compatible runner and say why (invariant 7).
3. Drive the body (``driver.py``): settled steps replay; needs become I/O here — activity
   attempts run as tasks (written pending first, settled once), clocks and waits are recorded
   and settled, a race's winner is recorded.
4. While activities run, a parked branch whose clock falls due, or a wake-up (an event, an
   interrupt) preempts the wait and the pass goes on.
5. When every branch is parked, suspend in one fenced transaction (re-checking interrupts and
   unscanned events under the row lock) and arm the timer at the earliest due time, or delete it;
   when the body is done, record the result, settle leftovers and delete the timer in one
   fenced statement.

Every write is fenced by the activation's generation; a ``Stale`` fence ends the pass quietly.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from psycopg.rows import dict_row

from akter import codec, faults
from akter.errors import ActivityOutcomeUnknown, CorruptRecord, Defect, Interrupted
from akter.ids import ActorRef, ExecutionId
from akter.outbox.intents import decode_caller
from akter.workflow import activity, compat, exits, queries
from akter.workflow.context import WorkflowContext
from akter.workflow.declare import Workflow
from akter.workflow.driver import (
    AwaitEvent,
    ClockDue,
    Driver,
    Need,
    RegisterClock,
    RetryAt,
    RunActivity,
    SettleRace,
    StepRow,
)
from akter.workflow.effects import Wait
from akter.workflow.exits import Ok, Raise

if TYPE_CHECKING:
    from akter.workflow.runner import WorkflowRunner

log = logging.getLogger("akter.workflow")

SCAN_BATCH = 200
#: a suspension whose timer is due within this many ms notifies the relay at once
NOTIFY_WITHIN_MS = 10_000
INTERRUPT_EXIT = codec.encode({"interrupt": {}})


class Stale(Exception):
    """This runner's generation no longer holds: another activation owns the actor."""


def _row(r: dict[str, Any]) -> StepRow:
    return StepRow(
        step=r["step"],
        attempt=r["attempt"],
        kind=r["kind"],
        exit=None if r["exit"] is None else codec.decode_primitive(bytes(r["exit"])),
        due_ms=r["due_ms"],
        started_ms=r["started_ms"] or 0,
        cursor=r["wait_cursor"],
        scanned=r["scanned"],
    )


class Pass:
    def __init__(self, runner: WorkflowRunner, ref: ActorRef, eid: ExecutionId, generation: int) -> None:
        self.runner = runner
        self.runtime = runner.runtime
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
        self.inflight: dict[str, asyncio.Task[StepRow]] = {}
        self.driver: Driver | None = None

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.runtime.skew_ms

    async def _one(self, sql: Any, extra: dict[str, Any] | None = None) -> dict[str, Any] | None:
        async with self.runtime.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(sql, {**self.params, **(extra or {})})
            return await cur.fetchone() if cur.description else None

    async def _fenced(self, sql: Any, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        row = await self._one(sql, extra)
        if row is None or not row["fenced"]:
            raise Stale(f"generation {self.generation} of {self.ref} no longer holds")
        return row

    async def _reload(self, step: str) -> None:
        async with self.runtime.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(queries.STEP_ROW, {**self.params, "step": step})
            for r in await cur.fetchall():
                assert self.driver is not None
                self.driver.record(_row(r))

    # ---- the pass ---------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            await self._run()
        except Stale as exc:
            log.info("pass of %s abandoned: %s", self.eid, exc)
            self.runner.forget(self.ref, self.generation)
        finally:
            for task in self.inflight.values():
                task.cancel()
            if self.inflight:
                await asyncio.gather(*self.inflight.values(), return_exceptions=True)
            if self.driver is not None:
                self.driver.close()

    async def _run(self) -> None:
        async with self.runtime.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(queries.LOAD, self.params)
            rows = await cur.fetchall()
        if not rows:
            log.warning("execution %s has no row; nothing to run", self.eid)
            return
        head = rows[0]
        if head["status"] == "finished":
            return
        self.runtime.skew_ms = head["now_ms"] - time.time_ns() // 1_000_000
        workflow = self.runner.workflow(self.ref.actor_type, head["workflow"])
        history: dict[str, list[StepRow]] = {}
        for r in rows:
            if r["step"] is not None:
                history.setdefault(r["step"], []).append(_row(r))
        reasons = await compat.replay_problems(self.runner.app, self.runtime.pool, self.params, head, history)
        if reasons or workflow is None:
            await self._leave_blocked(reasons or [f"workflow {head['workflow']!r} is not declared here"])
            return
        payload: Any = codec.decode(bytes(head["payload"]), workflow.input)
        principal = decode_caller(bytes(head["principal"])).on_behalf_of
        versions = head["versions"] if isinstance(head["versions"], dict) else json.loads(head["versions"])
        ctx = WorkflowContext(
            execution_id=str(self.eid), key=head["key"], ref=self.ref, principal=principal, versions=versions
        )
        self.cursor = head["event_cursor"]
        self.principal = principal
        self.driver = Driver(workflow, ctx, payload, history, interrupted=head["interrupt"])
        await self._drive(workflow)

    async def _leave_blocked(self, reasons: list[str]) -> None:
        reason = "; ".join(reasons)
        log.warning("execution %s left suspended for a compatible runner: %s", self.eid, reason)
        due = datetime.fromtimestamp(self.now_ms() / 1000, tz=UTC) + self.runner.recheck
        await self._one(queries.LEAVE_BLOCKED, {"reason": reason, "due": due})

    async def _drive(self, workflow: Workflow[Any, Any]) -> None:
        driver = self.driver
        assert driver is not None
        while True:
            now = self.now_ms()
            try:
                needs = driver.advance(now)
            except CorruptRecord as exc:
                await self._leave_blocked([f"recorded history does not decode: {exc}"])
                return
            if driver.final is not None:
                await self._finish(workflow, driver.final)
                return
            progressed = False
            parked: list[int] = []
            wanted: set[str] = set()
            for need in needs:
                result = await self._serve(need, now, wanted)
                if result is True:
                    progressed = True
                elif isinstance(result, int):
                    parked.append(result)
            for step, task in list(self.inflight.items()):
                if step not in wanted:
                    task.cancel()  # a race's loser, or an interrupt
                    del self.inflight[step]
            if progressed:
                continue
            if self.inflight:
                await self._await_progress(min(parked) if parked else None)
                continue
            if await self._suspend(min(parked) if parked else None):
                return

    async def _serve(  # noqa: PLR0911 -- one return per kind of need reads as the table it is
        self, need: Need, now: int, wanted: set[str]
    ) -> bool | int | None:
        """Do what a need asks. True: something was recorded (advance again); an int: parked
        until that time (ms); None: parked with no due time, or running in the background."""
        match need:
            case RunActivity(call=call):
                wanted.add(call.step.name)
                if call.step.name not in self.inflight:
                    self.inflight[call.step.name] = asyncio.create_task(self._attempt(need))
                return None
            case RetryAt(due_ms=due):
                return due
            case RegisterClock(effect=effect):
                after = effect.duration.total_seconds() * 1000
                await self._fenced(queries.RECORD, _record_params("clock", effect.step.name, after_ms=after))
                await self._reload(effect.step.name)
                return True
            case ClockDue(effect=effect, due_ms=due):
                if due > now:
                    return due
                row = await self._fenced(
                    queries.SETTLE_CLOCK, {"step": effect.step.name, "exit": codec.encode({"ok": None})}
                )
                await self._reload(effect.step.name)
                return True if row["settled"] else due + 5
            case AwaitEvent():
                return await self._wait(need)
            case SettleRace(effect=effect, winner=winner):
                exit_ = codec.encode({"winner": winner})
                await self._fenced(queries.RECORD, _record_params("race", effect.step.name, exit_=exit_))
                await self._reload(effect.step.name)
                return True
        raise AssertionError(need)  # pragma: no cover

    async def _await_progress(self, due_ms: int | None) -> None:
        timeout = None if due_ms is None else max(0.0, (due_ms - self.now_ms()) / 1000)
        waker = asyncio.ensure_future(self.wake.wait())
        try:
            done, _ = await asyncio.wait(
                [*self.inflight.values(), waker], timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            waker.cancel()
        self.wake.clear()
        assert self.driver is not None
        for step, task in list(self.inflight.items()):
            if task.done():
                del self.inflight[step]
                self.driver.record(task.result())  # a Stale here ends the pass
        if waker in done:
            await self._check_interrupt()

    async def _check_interrupt(self) -> None:
        row = await self._one(queries.POLL)
        if row is not None and row["interrupt"] and self.driver is not None:
            self.driver.interrupt()

    # ---- activities ---------------------------------------------------------------------------

    async def _attempt(self, need: RunActivity) -> StepRow:
        call, attempt = need.call, need.attempt
        step = call.step
        due = datetime.fromtimestamp(self.now_ms() / 1000, tz=UTC) + self.runner.hook.recovery
        begun = await self._fenced(queries.BEGIN_ATTEMPT, {"step": step.name, "attempt": attempt, "due": due})
        started_ms = begun["started_ms"]
        if begun["exit"] is not None:  # another runner settled it; take its exit
            return StepRow(
                step.name, attempt, "activity", codec.decode_primitive(bytes(begun["exit"])), None, started_ms
            )
        await faults.hit("workflow.before_activity", self.ref.actor_id, str(self.eid))
        ctx = activity.ActivityContext(
            execution_id=str(self.eid),
            step=step.name,
            attempt=attempt,
            started_ms=started_ms,
            tenant=self.ref.tenant,
            principal=self.principal,
            runtime=self.runtime,
        )
        token = activity.set_context(ctx)
        try:
            value = await self._call(call.fn, call.args, call.kwargs, step.timeout)
            exit_: dict[str, Any] = exits.encode_ok(value, step.success)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            exit_ = exits.encode_error(exc, step.errors)
            if "defect" in exit_:
                log.warning("activity %s of %s attempt %d failed: %r", step.name, self.eid, attempt, exc)
                # an unknown outcome is never retried: a new attempt's new ids could repeat an
                # effect the receiver can no longer deduplicate (invariant 8)
                if attempt < step.retry.times and not isinstance(exc, ActivityOutcomeUnknown):
                    delay = step.retry.backoff.delay(attempt)
                    exit_["retry_at_ms"] = self.now_ms() + int(delay.total_seconds() * 1000)
        finally:
            activity.reset_context(token)
        await faults.hit("workflow.before_settle", self.ref.actor_id, str(self.eid))
        settled = await self._fenced(
            queries.SETTLE, {"step": step.name, "attempt": attempt, "exit": codec.encode(exit_)}
        )
        recorded = codec.decode_primitive(bytes(settled["exit"]))
        return StepRow(step.name, attempt, "activity", recorded, None, started_ms)

    @staticmethod
    async def _call(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], limit: Any) -> Any:
        async def invoke() -> Any:
            if inspect.iscoroutinefunction(fn):
                return await fn(*args, **kwargs)
            result = await asyncio.to_thread(fn, *args, **kwargs)
            if inspect.isawaitable(result):
                return await result
            return result

        if limit is None:
            return await invoke()
        try:
            return await asyncio.wait_for(invoke(), limit.total_seconds())
        except TimeoutError as exc:
            raise Defect(f"attempt timed out after {limit}", error_type="TimeoutError") from exc

    # ---- waits -------------------------------------------------------------------------------

    async def _wait(self, need: AwaitEvent) -> bool | int | None:
        effect, row = need.effect, need.row
        step = effect.step
        tag = step.event.__name__
        if row is None:
            after = None if effect.timeout is None else effect.timeout.total_seconds() * 1000
            await self._fenced(
                queries.RECORD, _record_params("wait", step.name, after_ms=after, tag=tag, cursor=self.cursor)
            )
            await self._reload(step.name)
            return True
        scanned = row.scanned if row.scanned is not None else self.cursor
        async with self.runtime.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                queries.SCAN, {**self.params, "tag": tag, "after": scanned, "limit": SCAN_BATCH}
            )
            events = await cur.fetchall()
        now = events[0]["now_ms"] if events else self.now_ms()
        last = scanned
        for ev in events:
            if row.due_ms is not None and ev["created_ms"] > row.due_ms:
                break  # after the deadline: it cannot win the race with the timeout
            try:
                primitive = codec.decode_primitive(bytes(ev["value"]))
                value: Any = codec.from_primitive(primitive, step.event)
                matched = effect.where is None or bool(effect.where(value))
            except Exception as exc:
                return await self._settle_wait(
                    effect,
                    {"defect": {"type": type(exc).__qualname__, "message": str(exc)}},
                    ev["sequence"],
                    timed_out=False,
                )
            if matched:
                match = {"ok": {"seq": ev["sequence"], "event": primitive}}
                return await self._settle_wait(effect, match, ev["sequence"], timed_out=False)
            last = ev["sequence"]
        if last != scanned:
            await self._fenced(queries.MARK_SCANNED, {"step": step.name, "scanned": last})
            await self._reload(step.name)
        if len(events) == SCAN_BATCH:
            return True
        if row.due_ms is not None and now >= row.due_ms:
            return await self._settle_wait(effect, {"ok": None}, last, timed_out=True)
        return row.due_ms

    async def _settle_wait(self, effect: Wait, exit_: dict[str, Any], seq: int, *, timed_out: bool) -> bool:
        result = await self._fenced(
            queries.SETTLE_WAIT,
            {
                "step": effect.step.name,
                "tag": effect.step.event.__name__,
                "exit": codec.encode(exit_),
                "scanned": seq,
                "cursor": seq,
                "timeout": timed_out,
            },
        )
        if result["settled"] and not timed_out and "ok" in exit_:
            self.cursor = max(self.cursor, seq)
        await self._reload(effect.step.name)
        return True

    # ---- suspend and finish -----------------------------------------------------------------

    async def _suspend(self, due_ms: int | None) -> bool:
        """Suspend under the fence; False when the pass must go on (interrupt, new events)."""
        async with self.runtime.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            async with conn.transaction():
                await cur.execute(queries.SUSPEND_CHECK, self.params)
                check = await cur.fetchone()
                if check is None or not check["fenced"]:
                    raise Stale(f"generation {self.generation} of {self.ref} no longer holds")
                if check["interrupt"] and self.driver is not None and not self.driver.interrupted:
                    self.driver.interrupt()
                    return False
                if check["unscanned"]:
                    return False
                await faults.hit("workflow.before_suspend", self.ref.actor_id, str(self.eid))
                if due_ms is None:
                    await cur.execute(queries.SUSPEND_IDLE, self.params)
                else:
                    due = datetime.fromtimestamp(due_ms / 1000, tz=UTC)
                    await cur.execute(queries.SUSPEND, {**self.params, "due": due})
                    if due_ms <= self.now_ms() + NOTIFY_WITHIN_MS:
                        # a timer due soon must not wait for the relay's next poll: wake it to
                        # rescan and learn the new next-due time
                        await cur.execute("SELECT pg_notify('akter_outbox', %s)", (str(self.ref.bucket),))
        log.debug("execution %s suspended until %s", self.eid, due_ms)
        return True

    async def _finish(self, workflow: Workflow[Any, Any], final: Ok | Raise) -> None:
        if isinstance(final, Ok):
            outcome, exit_ = "succeeded", exits.encode_ok(final.value, workflow.output)
        elif isinstance(final.error, Interrupted):
            outcome, exit_ = "interrupted", {"interrupt": {}}
        else:
            exit_ = exits.encode_error(final.error, workflow.errors)
            outcome = "failed" if "error" in exit_ else "defect"
            if outcome == "defect":
                log.warning("execution %s ended with a defect: %r", self.eid, final.error)
        row = await self._fenced(
            queries.FINISH,
            {
                "outcome": outcome,
                "result": codec.encode(exit_),
                "interrupt_exit": INTERRUPT_EXIT,
                "drop_steps": self.runner.drop_steps,
            },
        )
        log.info("execution %s %s", self.eid, outcome if row["finished"] else "was already finished")


def _record_params(
    kind: str,
    step: str,
    *,
    exit_: bytes | None = None,
    after_ms: float | None = None,
    tag: str | None = None,
    cursor: int | None = None,
) -> dict[str, Any]:
    return {
        "kind": kind,
        "step": step,
        "exit": exit_,
        "after_ms": after_ms,
        "wait_tag": tag,
        "cursor": cursor,
    }
