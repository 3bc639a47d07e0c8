"""The workflow layer's part in every turn (a kernel ``TurnHook``).

Inside the turn's transaction, under the owner's row lock:

* staged starts insert their execution rows (a repeated keyed start attaches) and arm their
  timers due now, with a ``NOTIFY`` so the owning relay begins at once;
* a resume marks its execution running and turns its timer into a recovery timer — or, when no
  runner of this process owns the actor, makes it due now (below);
* an interrupt checks its execution id, flags the execution with who asked and makes its timer
  due now, with a ``NOTIFY``;
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
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import psycopg

from akter import codec, logs, telemetry
from akter.actor.kernel import Committed
from akter.actor.turn import Turn
from akter.callers import System
from akter.errors import InvalidExecutionId
from akter.ids import ActorRef
from akter.outbox import queries as outbox_queries
from akter.outbox.intents import encode_caller
from akter.workflow import manifest, queries
from akter.workflow.commands import LAYER, InterruptMark, ResumeMark, StartMark, interrupter_key, parse_for
from akter.workflow.declare import WaitStep, Workflow, workflows_of

if TYPE_CHECKING:
    from akter.actor.declare import Actor
    from akter.workflow.runner import WorkflowRunner

log = logging.getLogger("akter.workflow")

#: how far ahead a running execution's recovery timer is armed
RECOVERY_INTERVAL = timedelta(seconds=30)


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


class WorkflowHook:
    def __init__(self, actors: dict[str, Actor[Any]], recovery: timedelta = RECOVERY_INTERVAL) -> None:
        self.recovery = recovery
        #: per actor type, the event tags some workflow step waits on
        self.tags = {name: wait_tags(workflows_of(a)) for name, a in actors.items()}
        self.runners: list[WorkflowRunner] = []

    async def before_commit(
        self, conn: psycopg.AsyncConnection[Any], turn: Turn[Any], record: Committed
    ) -> None:
        ref = record.ref
        notify = False
        base = {**ref.key_params(), "bucket": ref.bucket}
        for item in turn.staged.get(LAYER, ()):
            if isinstance(item, StartMark):
                notify = True
                await conn.execute(queries.START, {**base, **self._start_params(turn, item)})
            elif isinstance(item, ResumeMark):
                runner = self._owner(ref)
                if runner is None:
                    # due now, with a notify: the owner's relay delivers another resume at once
                    due = None
                    notify = True
                    log.info(
                        "execution resumed where its actor is not owned",
                        extra=logs.fields(execution=item.execution_id),
                    )
                else:
                    due = datetime.fromtimestamp(record.now_ms / 1000, tz=UTC) + self.recovery
                    record.on_commit(functools.partial(runner.schedule, ref, item.execution_id))
                await conn.execute(queries.RESUME_TURN, {**base, "eid": str(item.execution_id), "due": due})
            elif isinstance(item, InterruptMark):
                notify = await self._interrupt(conn, turn, base, item) or notify
        if record.events:
            tags = sorted({tag for _, tag, _ in record.events} & self.tags.get(ref.actor_type, frozenset()))
            if tags:
                cur = await conn.execute(queries.WAKE_WAITS, {**base, "tags": tags, "due": None})
                notify = notify or cur.rowcount > 0
        if notify:
            await conn.execute(outbox_queries.NOTIFY, {"bucket_text": str(ref.bucket)})

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
        self, conn: psycopg.AsyncConnection[Any], turn: Turn[Any], base: dict[str, Any], item: InterruptMark
    ) -> bool:
        """Flag the execution; whether its timer was armed. Raises ``InvalidExecutionId`` (the
        turn then writes nothing) for an id that is not of this member, actor and tenant, or that
        names no execution."""
        eid = parse_for(item.workflow, item.execution_id, turn.ref.tenant, turn.ref)
        params = {**base, "eid": str(eid), "by": interrupter_key(turn.caller), "due": None}
        row = await (await conn.execute(queries.INTERRUPT, params)).fetchone()
        if row is None:  # pragma: no cover -- the statement selects one row from two scalar subqueries
            raise RuntimeError("the interrupt statement returned no row")
        status, armed = row
        if status is None:
            raise InvalidExecutionId(f"no execution {eid} exists")
        return bool(armed)

    def _owner(self, ref: ActorRef) -> WorkflowRunner | None:
        return next((runner for runner in self.runners if runner.owns(ref)), None)

    def after_commit(self, record: Committed) -> None:
        """Nothing: a resume's handoff is registered on its record before commit."""
