"""The workflow runner: runs the passes of the executions whose owners this relay owns.

It plugs into a relay (``akter.outbox.relay.RelayPlugin``). Every resume arrives as an internal
turn the relay delivers (invariant 4); after that turn commits, the workflow hook hands the
execution here and a ``Pass`` runs it. Before an actor's first pass in this process the runner
*activates* it: it takes a new generation on the actor row, and every write of its passes
proves that generation still holds. A start or resume turn committed in this process takes
that generation inside the turn (``hook.py``), so a pass normally needs no activation commit of
its own; ``ACTIVATE`` remains for a pass scheduled without one. If another process activates
the actor later (ownership moved), this runner's writes fence out, and it forgets the
activation. Who holds which generation, and the hand-over from a turn to a fenced pass, are
decided in ``activation.py``; the runner is the ``PassHost`` of its passes and the ``Handoff``
its process's turns hand executions to (``host.py``), registered in the App's ``Handoffs``
while its relay runs.

A resume for an execution whose pass is already running wakes that pass (a new event, an
interrupt) instead of starting a second one; if it arrives as the pass is ending, the pass is
run again, so no wake-up is lost.

When its relay drains (``relay.stop()``: a ``DrainingPlugin``), the runner takes no new work:
``owns`` answers no, so a turn committed in this process arms its execution's timer due now for
the next owner instead of handing it here. Every running pass starts no new attempt, lets its
attempts in flight finish, writes their outcomes and makes its execution's timer due now
(``Pass._hand_off``), so whichever process owns the bucket next resumes it at once; the relay
keeps the buckets of the actors whose passes still run (``holding``) and releases each as they
end. A pass the drain timeout cuts short is cancelled: its attempts stay pending and its
recovery timer resumes it, as after a crash.

The runner also does retention of finished executions (and their steps) older than the
deployment's ``workflow_retention`` (default 7 days, never less than the retry window) in the
buckets this relay owns, in bounded batches. (Expired receipts are the relay's:
``akter.outbox.retention``; a resume whose id expired while the relays were down is renewed by
the delivery itself, ``akter.outbox.delivery``.) Its prune statement runs through
``akter.store.background.persist``: a failure is logged and backed off, never the end of the
process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from akter import logs
from akter.errors import ConfigurationError
from akter.ids import ActorRef, ExecutionId
from akter.store.background import persist
from akter.store.sqlstate import is_connection_lost
from akter.tuning import EngineTuning
from akter.workflow.api.declare import Workflow, workflows_of
from akter.workflow.engine import holds, prefix, queries
from akter.workflow.engine.activation import Activations
from akter.workflow.engine.host import Handoffs
from akter.workflow.engine.passes import Pass

if TYPE_CHECKING:
    from akter.actor.declare import Actor
    from akter.actor.sender import Sender
    from akter.outbox.relay import Relay
    from akter.store.listener import Listener

log = logging.getLogger("akter.workflow")

#: passes of one execution that may fail in a row before it needs attention (the default)
FAILED_PASS_LIMIT = 5


class WorkflowRunner:
    """The workflow engine of one relay: the ``PassHost`` of its passes and the ``Handoff`` its
    process's turns hand executions to (``host.py``)."""

    def __init__(
        self,
        actors: Mapping[str, Actor[Any]],
        handoffs: Handoffs,
        tuning: EngineTuning,
        *,
        retention: timedelta | None = None,
        drop_steps: bool = False,
        failed_pass_limit: int = FAILED_PASS_LIMIT,
    ) -> None:
        if failed_pass_limit < 1:
            raise ConfigurationError(f"failed_pass_limit must be at least 1, not {failed_pass_limit}")
        self.actors = actors
        #: passes of one execution that may fail in a row before it needs attention
        self.failed_pass_limit = failed_pass_limit
        #: where this runner registers while its relay runs, for the turns of this process
        self.handoffs = handoffs
        self.tuning = tuning
        #: delete steps when an execution finishes (smallest tables; no inspection afterwards)
        self.drop_steps = drop_steps
        #: None: the deployment's workflow_retention
        self.retention = retention
        self._relay: Relay | None = None
        #: who holds which generation, and which pass loop runs each execution
        self.activations = Activations(tuning.handoff_safety)
        self._passes: dict[str, Pass] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._quiet = asyncio.Event()
        self._quiet.set()
        self._claimed = False
        #: the relay drains: no new work, running passes hand their executions on
        self.stopping = False

    def claim(self) -> WorkflowRunner:
        """The runner for a relay about to start: this one, or — while another relay of the App
        runs it — a new runner with the same settings. Each relay has its own workflow engine:
        one runner serving two relays would judge ownership by only one of them."""
        if not self._claimed:
            self._claimed = True
            return self
        return WorkflowRunner(
            self.actors,
            self.handoffs,
            self.tuning,
            retention=self.retention,
            drop_steps=self.drop_steps,
            failed_pass_limit=self.failed_pass_limit,
        )

    def _owner(self) -> Relay:
        """The relay this runner serves (``run`` sets it before any pass or maintenance runs)."""
        if self._relay is None:
            raise RuntimeError("the workflow runner runs inside a relay: start it with relay.start()")
        return self._relay

    @property
    def sender(self) -> Sender:
        return self._owner().sender

    @property
    def listener(self) -> Listener:
        return self.sender.session.listener

    def workflow(self, actor_type: str, name: str) -> Workflow[Any, Any] | None:
        actor = self.actors.get(actor_type)
        return workflows_of(actor).get(name)

    def try_finish(
        self, workflow: Workflow[Any, Any], eid: ExecutionId, params: dict[str, Any]
    ) -> prefix.Finished | None:
        """A start turn's body run up to its first effect (``prefix.py``), when this runner runs
        that very declaration: its finish if it ended there, else None (the pass runs it)."""
        if self.workflow(eid.owner.actor_type, workflow.name) is not workflow:
            return None
        return prefix.run(workflow, eid, params)

    def owns(self, ref: ActorRef) -> bool:
        """Whether this runner takes new work of ``ref`` (a turn hands it its execution): it
        owns the bucket and its relay does not drain."""
        return not self.stopping and self._holds(ref)

    def _holds(self, ref: ActorRef) -> bool:
        return self._relay is not None and ref.bucket in self._relay.owned()

    # --- draining (``akter.outbox.relay.DrainingPlugin``) ---

    def drain(self) -> None:
        """Take no new work; every running pass hands its execution on at its next step
        boundary, once its attempts in flight finished."""
        self.stopping = True
        for p in self._passes.values():
            p.wake.set()
        self.activations.wake()

    async def drained(self) -> None:
        """Return once no pass runs any more."""
        await self._quiet.wait()

    def holding(self) -> frozenset[int]:
        """The buckets of the actors whose passes still run."""
        return frozenset(ref.bucket for ref in self.activations.actors())

    def in_flight(self) -> dict[str, int]:
        attempts = sum(len(p.inflight) + len(p.draining) for p in self._passes.values())
        return {"passes": len(self._tasks), "attempts": attempts}

    async def run(self, relay: Relay) -> None:
        self._relay = relay
        self.stopping = False  # the App's runner serves its next relay after a drain
        self.handoffs.attach(self)
        try:
            while True:
                await persist("execution retention", self.prune, log=log)
                await asyncio.sleep(self.tuning.prune_every.total_seconds())
        finally:
            self.handoffs.detach(self)
            for p in self._passes.values():
                for key in [*p.inflight, *p.draining]:
                    log.warning(
                        "activity attempt abandoned with its pass; it runs again when its recovery"
                        " timer resumes the execution",
                        extra=logs.fields(execution=p.eid, step=key),
                    )
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self._claimed = False

    def generation(self, ref: ActorRef) -> int | None:
        """The generation this runner holds of ``ref`` (while a pass of it runs or is scheduled)."""
        return self.activations.held(ref)

    def claiming(self, ref: ActorRef, turn: object) -> Callable[[], None]:
        return self.activations.claiming(ref, turn)

    def schedule(
        self,
        ref: ActorRef,
        eid: ExecutionId,
        generation: int | None = None,
        head: dict[str, Any] | None = None,
    ) -> None:
        """Run a pass of ``eid``; ``generation``: one a committed turn took (or found held) for
        this runner, so the pass needs no activation of its own; ``head``: the execution row as
        the start turn just wrote it (no steps yet), so its first pass needs no load."""
        if generation is not None:
            self.activations.handed(ref, generation)
        key = str(eid)
        if not self.activations.enter(ref, key):  # its loop is alive: it runs one more pass
            running = self._passes.get(key)
            if running is not None:
                running.wake.set()
            return
        self._quiet.clear()
        task = asyncio.create_task(self._run_pass(ref, eid, head), name=f"pass {key[:40]}")
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not self._tasks:
            self._quiet.set()

    async def idle(self) -> None:
        """Return when no pass is running or scheduled in this process."""
        await self._quiet.wait()

    def quiet(self) -> bool:
        return not self._tasks

    def forget(self, ref: ActorRef, generation: int) -> None:
        """Drop an activation that fenced out (another process activated the actor since)."""
        self.activations.forget(ref, generation)

    async def _take_generation(self, ref: ActorRef) -> int:
        """A new generation of ``ref`` for this runner, taken on its actor row."""
        async with self.sender.pool.connection() as conn:
            cur = await conn.execute(queries.ACTIVATE, ref.key_params())
            row = await cur.fetchone()
        if row is None:
            raise LookupError(f"{ref} has no actor row")
        return int(row[0])

    async def _run_pass(self, ref: ActorRef, eid: ExecutionId, head: dict[str, Any] | None) -> None:
        key = str(eid)
        try:
            await self._pass_loop(ref, eid, key, head)
        finally:
            self.activations.leave(ref, key)

    async def _pass_loop(
        self, ref: ActorRef, eid: ExecutionId, key: str, head: dict[str, Any] | None
    ) -> None:
        activations = self.activations
        while True:
            activations.again(key)  # this pass runs whatever was asked for until now
            try:
                generation = await activations.activate(ref, lambda: self._take_generation(ref))
                p = Pass(self, ref, eid, generation, head)
                head = None  # a pass run again loads what the first one wrote
                self._passes[key] = p
                try:
                    await p.run()
                finally:
                    self._passes.pop(key, None)
            except Exception as exc:
                if is_connection_lost(exc):
                    log.warning("pass of %s lost the database (%s); its timer will resume it", key, exc)
                else:
                    log.exception("pass of %s failed; its recovery timer will resume it", key)
                    try:
                        await self._failed(ref, eid, exc)
                    except Exception:  # the count is a guard; its failure must not end the runner
                        log.exception("could not count the failed pass of %s", key)
                return
            # a drain still runs a pass asked for meanwhile: it hands its execution on at once
            if p.stale and self._holds(ref) and await activations.newer(ref, p.generation, key):
                continue  # this process holds a newer generation, or a pass was asked for
            if not activations.again(key) or not self._holds(ref):
                return

    async def _failed(self, ref: ActorRef, eid: ExecutionId, exc: Exception) -> None:
        """Count a failed pass with its error; at ``failed_pass_limit`` in a row the execution
        needs attention instead of crash-looping on its recovery timer (``holds.py``)."""
        generation = self.activations.held(ref)
        if generation is None:
            return  # fenced out meanwhile: the new owner's passes count their own failures
        error = f"{type(exc).__name__}: {exc}"[:2000]
        params = {**ref.key_params(), "generation": generation, "eid": str(eid)}
        async with self.sender.pool.connection() as conn:
            cur = await conn.execute(
                holds.PASS_FAILED, {**params, "error": error, "limit": self.failed_pass_limit}
            )
            row = await cur.fetchone()
        if row is not None and row[2]:
            log.error(
                "execution needs attention: %d passes failed in a row",
                row[1],
                extra=logs.fields(execution=eid),
            )

    async def prune(self) -> int:
        """One retention round over the owned buckets; returns the number of executions deleted.
        Raises what the database raised (the run loop backs off and tries again)."""
        owned = sorted(self._owner().owned())
        if not owned:
            return 0
        async with self.sender.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT (extract(epoch FROM greatest(coalesce(%s, workflow_retention), retry_window))"
                " * 1000)::bigint FROM actor_deployment",
                (self.retention,),
            )
            row = await cur.fetchone()
            if row is None:  # actor_deployment has one row from sql/001_schema.sql on; akter never deletes it
                raise ConfigurationError("actor_deployment is empty; the schema was not migrated by akter")
            params = {"retention_ms": row[0], "limit": self.tuning.prune_batch, "buckets": owned}
            cur = await conn.execute(queries.PRUNE, params)
            deleted: int = cur.rowcount
        return deleted
