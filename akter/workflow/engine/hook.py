"""The workflow layer's part in every turn (a kernel ``TurnHook``).

Inside the turn's transaction, under the owner's row lock:

* staged starts insert their execution rows (a repeated keyed start attaches). When a runner of
  this process owns the actor, the timer is armed as a recovery timer and the runner runs the
  first pass as soon as the turn commits — no ``NOTIFY``, claim or resume turn in between;
  otherwise the timer is due now, with a ``NOTIFY`` so the owning relay begins at once. A start
  this process's runner owns whose body ends before its first effect is finished by the turn
  itself (``prefix.py``): no timer, no pass;
* a resume marks its execution running and turns its timer into a recovery timer — or, when no
  runner of this process owns the actor, makes it due now (below);
* a start or resume handed to this process's runner takes the runner's *generation* of the actor
  inside the turn, which holds the row lock already, when the runner holds none: the pass then
  needs no activation commit of its own (who holds which generation: ``activation.py``);
* an interrupt checks its execution id, flags the execution with who asked and makes its timer
  due now, with a ``NOTIFY`` (one that needs attention is resolved as interrupted);
* a pause, unpause or resolution of an execution is applied by ``holds.py``;
* emitted events make the timers of pending matching waits due now (invariant 6).

After commit, a resume hands its execution to the runner of this process that owns the actor.
When none does — a relay delivered the resume after it lost the bucket in an outage, or the
resume came from a process that runs no workflows — the turn arms the execution's timer due now
and notifies instead, so the owner's relay delivers another resume and runs the pass at once.
Why not run the pass here anyway (the generation would fence it): taking a new generation on the
actor fences out the owner's passes of the actor's *other* executions, which would then wait for
their recovery timers — the delay moved, not removed — and the owner's next activation would
fence this process in turn. The decision is taken inside the turn's transaction, so the timer
commits with the receipt. A runner that owned the actor then and lost it during the commit
still runs the pass; its generation fences it if another process took over meanwhile.

The handoff is registered on the turn's record (``Committed.on_commit``), not kept here: a resume
whose commit fails is dropped with its record.

The kernel never imports this module; ``akter.App`` registers the hook when an actor type
declares workflows.
"""

from __future__ import annotations

import functools
import json
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from akter import codec, logs, telemetry
from akter.actor.kernel import Committed, UnderLock
from akter.actor.turn import Turn
from akter.callers import System
from akter.errors import CorruptRecord, ExecutionNotRetryable, InvalidExecutionId, InvalidInput
from akter.ids import ActorRef, ExecutionId
from akter.outbox import queries as outbox_queries
from akter.outbox.intents import encode_caller
from akter.workflow.api.commands import (
    ChildLinkMark,
    HoldMark,
    InterruptMark,
    ResumeMark,
    RetryMark,
    interrupter_key,
    parse_for,
    retry_key,
)
from akter.workflow.api.declare import LAYER, StartMark, WaitStep, Workflow, workflows_of
from akter.workflow.api.payloads import MAX_REASON
from akter.workflow.core import manifest
from akter.workflow.engine import child_serve, claim, deadline, holds, key_policy, prefix, queries
from akter.workflow.engine.key_policy import Decision

if TYPE_CHECKING:
    from akter.actor.declare import Actor
    from akter.tuning import EngineTuning
    from akter.workflow.engine.host import Handoff, Handoffs

log = logging.getLogger("akter.workflow")


class _Handoff:
    """The executions one turn hands to this process's runner, under one generation: the first
    handoff takes it in the turn when the runner holds none, the others reuse it. While the turn
    is in flight with such a statement, the runner knows a generation may be on its way
    (``Handoff.claiming``): a pass it fences out waits for it."""

    def __init__(self, record: Committed, runner: Handoff | None, held: int | None) -> None:
        self.record = record
        self.runner = runner
        self.generation = held
        self._asked = held is not None

    def activate(self) -> bool:
        """Whether this handoff's statement takes the generation (only the turn's first does)."""
        first = not self._asked
        self._asked = True
        if first and self.runner is not None:
            # released once the turn's answers handed the generation over (the actions run in
            # order, with no wait between them), or when a turn that did not commit is dropped
            self.record.on_commit(self.runner.claiming(self.record.ref, self))
        return first

    def _took(self, row: tuple[Any, ...] | None) -> None:
        if row is not None and row[0] is not None:
            self.generation = int(row[0])

    def started(self, item: StartMark, params: dict[str, Any], row: tuple[Any, ...] | None) -> None:
        self._took(row)
        if row is None or not row[1] or self.runner is None:
            return  # a repeated keyed start attached: nothing new to run
        head = {
            "workflow": params["workflow"],
            "key": params["key"],
            "manifest_hash": params["manifest_hash"],
            "payload": params["payload"],
            "principal": params["principal"],
            "versions": params["versions"],
            "event_cursor": int(row[2]),
            "status": "running",
            "interrupt": False,
            "now_ms": self.record.now_ms,
            "step": None,
        }
        self.record.on_commit(
            functools.partial(self.runner.schedule, self.record.ref, item.execution_id, self.generation, head)
        )

    def woken(self, row: tuple[Any, ...] | None) -> None:
        """The executions an event of this turn woke (``queries.WAKE_HERE``): each one's pass
        runs here once the turn commits, as after a resume turn."""
        self._took(row)
        if self.runner is None or row is None:
            return
        for text, trace in zip(row[1] or (), row[2] or (), strict=True):
            self.record.on_commit(functools.partial(self._wake, ExecutionId.parse(text), trace))

    def _wake(self, eid: ExecutionId, trace: str | None) -> None:
        """Run ``eid``'s pass here, in the trace that started it (not the waking event's)."""
        if self.runner is not None:
            with telemetry.joined(trace):
                self.runner.schedule(self.record.ref, eid, self.generation)

    def resumed(self, item: ResumeMark, row: tuple[Any, ...] | None) -> None:
        self._took(row)
        if self.runner is not None:
            self.record.on_commit(
                functools.partial(
                    self.runner.schedule,
                    self.record.ref,
                    item.execution_id,
                    self.generation,
                    claim.head_of(row),
                )
            )


def wait_tags(workflows: dict[str, Workflow[Any, Any]]) -> frozenset[str]:
    return frozenset(
        step.event.__name__
        for wf in workflows.values()
        for step in wf.steps.values()
        if isinstance(step, WaitStep)
    )


def principal_caller(ref: ActorRef, turn: Turn[Any]) -> bytes:
    """The caller every resume of an execution runs as: the timer, on behalf of the principal
    that started it (names only; invariant 9)."""
    return encode_caller(System(source="timer", ref=str(ref), on_behalf_of=turn.principal))


def _link(
    record: Committed, base: dict[str, Any], item: ChildLinkMark, done: dict[str, prefix.Start]
) -> None:
    """A child's link to its parent; a child this turn finished names its parent in its row."""
    start = done.get(str(item.execution_id))
    if start is not None:
        start.link = item
    else:
        record.with_write(child_serve.LINK, {**base, **child_serve.link_params(item)})


def _write_finished(record: Committed, runner: Handoff | None, done: dict[str, prefix.Start]) -> None:
    """The starts whose body ended in this turn, written finished after the turn's other
    statements; their results are handed over once it committed (``prefix.py``)."""
    if runner is None or not done:
        return
    listener = runner.listener
    for start in done.values():
        answer = functools.partial(start.answered, record, listener)
        record.with_write(prefix.START_FINISHED, start.statement_params(), answer)


class WorkflowHook:
    def __init__(self, actors: dict[str, Actor[Any]], handoffs: Handoffs, tuning: EngineTuning) -> None:
        #: the runners of this process a turn may hand its executions to
        self.handoffs = handoffs
        self.tuning = tuning
        #: per actor type, the event tags some workflow step waits on
        self.tags = {name: wait_tags(workflows_of(a)) for name, a in actors.items()}

    async def before_commit(self, conn: UnderLock, turn: Turn[Any], record: Committed) -> None:
        ref = record.ref
        notify = False
        base = {**ref.key_params(), "bucket": ref.bucket}
        # a turn in the application's transaction commits when the application does, and runs
        # nothing after it: its starts and resumes go through the relay, as for another owner
        runner = None if record.joined else self._owner(ref)
        # the generation the first handoff of this turn takes (or the runner holds): the
        # statements travel with the turn's write, their answers come once it committed
        handoff = _Handoff(record, runner, None if runner is None else runner.generation(ref))
        staged: dict[str, Any] = {}  # the inputs of this turn's keyed starts (``key_policy.py``)
        #: the starts whose body ended in the turn (``prefix.py``), written after the loop
        done: dict[str, prefix.Start] = {}
        for item in turn.staged.get(LAYER, ()):
            if isinstance(item, StartMark):
                notify = (
                    await self._start(
                        conn,
                        turn,
                        record,
                        base=base,
                        item=item,
                        runner=runner,
                        handoff=handoff,
                        staged=staged,
                        done=done,
                    )
                    or notify
                )
            elif isinstance(item, ResumeMark):
                params = {**base, "eid": str(item.execution_id)}
                if runner is None:
                    # due now, with a notify: the owner's relay delivers another resume at once
                    notify = True
                    log.info(
                        "execution resumed where its actor is not owned",
                        extra=logs.fields(execution=item.execution_id),
                    )
                    record.with_write(queries.RESUME_TURN, {**params, "due": None})
                    continue
                params |= {"due": self._recovery_due(record), "activate": handoff.activate()}
                # the statement also returns the execution's head when it has no step yet, so
                # its pass runs without a load (``claim.py``)
                record.with_write(claim.RESUME_HERE_HEAD, params, functools.partial(handoff.resumed, item))
            elif isinstance(item, InterruptMark):
                notify = await self._interrupt(conn, turn, base, item) or notify
            elif isinstance(item, RetryMark):
                await self._retry(conn, turn, base, item)
                notify = True
            elif isinstance(item, ChildLinkMark):
                _link(record, base, item, done)
            elif isinstance(item, HoldMark):
                notify = await holds.apply(conn, turn, base, item) or notify
        _write_finished(record, runner, done)
        if record.events:
            tags = sorted({tag for _, tag, _ in record.events} & self.tags.get(ref.actor_type, frozenset()))
            if tags and runner is not None:
                # the turn resumes what it wakes, for this process's runner: no relay hop
                params = {**base, "tags": tags, "due": self._recovery_due(record)}
                record.with_write(
                    queries.WAKE_HERE, {**params, "activate": handoff.activate()}, handoff.woken
                )
            elif tags:
                cur = await conn.execute(queries.WAKE_WAITS, {**base, "tags": tags, "due": None})
                notify = notify or cur.rowcount > 0
        if notify:
            record.with_write(outbox_queries.NOTIFY, {"bucket_text": str(ref.bucket)})

    async def _start(
        self,
        conn: UnderLock,
        turn: Turn[Any],
        record: Committed,
        *,
        base: dict[str, Any],
        item: StartMark,
        runner: Handoff | None,
        handoff: _Handoff,
        staged: dict[str, Any],
        done: dict[str, prefix.Start],
    ) -> bool:
        """Write a staged start (or attach, or start a new run: ``key_policy.py``) with its
        deadline (``deadline.py``); whether the relay must be notified. A plain start whose
        body ends before its first effect is left in ``done``, finished (``prefix.py``)."""
        decision = await key_policy.judge(conn, base, item, staged) if item.keyed else Decision.START
        if decision is Decision.ATTACH:
            return False  # the same input (or KeyReuse.ATTACH): the start returns the execution
        params = {**base, **self._start_params(turn, item)}
        deadline_params = deadline.arm_params(base, item)
        if decision is Decision.NEW_RUN:
            await conn.execute(key_policy.NEW_RUN, params)
            if deadline_params is not None:
                await conn.execute(deadline.ARM, deadline_params)
            return True
        if runner is None:
            record.with_write(queries.START, params)
            if deadline_params is not None:
                record.with_write(deadline.ARM, deadline_params)
            return True
        finished = runner.try_finish(item.workflow, item.execution_id, params)
        if finished is not None:  # written after the turn's other statements (its link)
            done[params["eid"]] = prefix.Start(item, params, finished)
            return False
        # this process runs the first pass itself, once the turn commits, from what the turn
        # wrote (no load): the timer is only the recovery should it die first
        params |= {"due": self._recovery_due(record), "activate": handoff.activate()}
        record.with_write(queries.START_HERE, params, functools.partial(handoff.started, item, params))
        if deadline_params is not None:
            record.with_write(deadline.ARM, deadline_params)
        return False

    def _recovery_due(self, record: Committed) -> datetime:
        """The recovery time of a pass this process runs, on the database clock the turn read."""
        return datetime.fromtimestamp(record.now_ms / 1000, tz=UTC) + self.tuning.recovery

    def _start_params(self, turn: Turn[Any], item: StartMark) -> dict[str, Any]:
        workflow = item.workflow
        _, digest = manifest.of(workflow)
        return {
            "eid": str(item.execution_id),
            "workflow": workflow.name,
            "key": item.execution_id.key,
            "manifest_hash": digest,
            "payload": codec.encode(item.payload, workflow.input),
            "principal": principal_caller(turn.ref, turn),
            "versions": json.dumps({k: v.current for k, v in workflow.versions.items()}),
            "due": None,
            "trace": telemetry.carrier(),
        }

    async def _interrupt(
        self, conn: UnderLock, turn: Turn[Any], base: dict[str, Any], item: InterruptMark
    ) -> bool:
        """Flag the execution; whether its timer was armed. Raises ``InvalidExecutionId`` (the
        turn then writes nothing) for an id that is not of this member, actor and tenant, or that
        names no execution."""
        eid = parse_for(item.workflow, item.execution_id, turn.ref.tenant, turn.ref)
        if item.reason is not None and not (isinstance(item.reason, str) and len(item.reason) <= MAX_REASON):
            raise InvalidInput(f"an interrupt's reason is a str of at most {MAX_REASON} characters")
        by = interrupter_key(turn.caller)
        params = {**base, "eid": str(eid), "by": by, "reason": item.reason, "due": None}
        row = await (await conn.execute(queries.INTERRUPT, params)).fetchone()
        if row is None:  # pragma: no cover -- the statement selects one row from two scalar subqueries
            raise RuntimeError("the interrupt statement returned no row")
        status, armed = row
        if status is None:
            raise InvalidExecutionId(f"no execution {eid} exists")
        if status == "needs_attention":  # the interrupt is its resolution
            await holds.interrupt_attention(conn, item.workflow, eid, turn.caller, params, item.reason)
        return bool(armed)

    async def _retry(self, conn: UnderLock, turn: Turn[Any], base: dict[str, Any], item: RetryMark) -> None:
        """Start a failed or defect execution again, or offer a blocked one to runners now
        (``commands.py``); ``ExecutionNotRetryable`` (nothing written) for anything else."""
        eid = parse_for(item.workflow, item.execution_id, turn.ref.tenant, turn.ref)
        new = ExecutionId(turn.ref, item.workflow.name, retry_key(eid.key))
        params = {**base, "eid": str(eid), "new_eid": str(new)}
        row = await (await conn.execute(queries.RETRY_READ, params)).fetchone()
        if row is None:
            raise InvalidExecutionId(f"no execution {eid} exists")
        status, outcome, blocked_reason, payload, principal, taken_by = row
        if status != "finished":
            if blocked_reason is None:
                raise ExecutionNotRetryable(f"{eid} is {status} and not blocked: there is nothing to retry")
            await conn.execute(queries.OFFER_NOW, params)
            return
        if outcome not in ("failed", "defect"):
            raise ExecutionNotRetryable(f"{eid} {outcome}; only a failed or defect execution is retried")
        if taken_by is not None:
            already = (
                "was retried already as"
                if taken_by == str(eid)
                else "cannot be retried: its retry key is taken by"
            )
            raise ExecutionNotRetryable(f"{eid} {already} {new}")
        try:
            value: Any = codec.decode(bytes(payload), item.workflow.input)
        except CorruptRecord as exc:
            raise ExecutionNotRetryable(f"the input of {eid} no longer decodes: {exc}") from exc
        start = self._start_params(turn, StartMark(new, item.workflow, value))
        # the retry acts for whom the original acted for; who asked for it is kept beside
        await conn.execute(queries.START, {**base, **start, "principal": bytes(principal)})
        link = {**base, "eid": str(new), "retry_of": str(eid), "by": interrupter_key(turn.caller)}
        await conn.execute(queries.RETRY_LINK, link)

    def _owner(self, ref: ActorRef) -> Handoff | None:
        return self.handoffs.owner(ref)

    def after_commit(self, record: Committed) -> None:
        """Nothing: a resume's handoff is registered on its record before commit."""
