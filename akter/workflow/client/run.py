"""Handles on executions, and the workflow-aware client that ``App.client()`` returns.

``WorkflowActorHandle.start(Workflow, input)`` sends the member's start command (a turn) and
returns a ``Run``; ``client.run(Workflow, execution_id)`` re-attaches from an id alone. A
``Run`` polls, waits for the result (through the engine's one listener on ``akter_finished``,
``akter.store.listener``, with polling as the fallback; a database restart only delays it)
and interrupts: it sends the member's interrupt command (a turn, ``commands.py``) as the caller
of the handle or client it came from, so the actor's access policy decides and the execution
records who asked. Ids are checked before anything is read: a malformed id, another tenant's,
or another member's is ``InvalidExecutionId``.

The sync facade (``SyncWorkflowClient``) blocks on the engine's loop; its ``with_connection(conn)``
writes sends and starts inside the application's transaction instead, in the calling thread.
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
from collections.abc import Coroutine
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, LiteralString, Protocol, Self, TypeVar

import attrs
import psycopg
import psycopg_pool
from psycopg.rows import dict_row
from returns.result import Result

from akter import codec
from akter.actor.client import KernelActorHandle, KernelClient, KernelSyncClient, SyncActorHandle, _Portal
from akter.actor.declare import Actor, Command
from akter.actor.joined import Inline, JoinedSender, check_connection
from akter.callers import Anonymous, Caller
from akter.errors import CorruptRecord, InvalidExecutionId, InvalidInput, ResultTimeout
from akter.ids import ActorRef, CommandId, ExecutionId, check_execution_key
from akter.store.listener import Noted
from akter.store.sqlstate import is_connection_lost
from akter.workflow.api.commands import check_timeout, decode_interrupter, parse_for
from akter.workflow.api.declare import Workflow
from akter.workflow.api.payloads import Interrupt
from akter.workflow.client.schedule_admin import Schedules, SyncSchedules
from akter.workflow.core import exits
from akter.workflow.engine import prefix, queries

if TYPE_CHECKING:
    from akter.actor.sender import Sender
    from akter.store.listener import Listener

S = TypeVar("S")
I = TypeVar("I")  # noqa: E741 -- a workflow's input type
O = TypeVar("O")  # noqa: E741 -- the conventional name of an output type
T = TypeVar("T")

log = logging.getLogger("akter")

#: seconds between checks of a waiting ``result()`` when no notification arrives
POLL_FALLBACK = 1.0

# ``queries.POLL``, who asked for the interrupt, and the run it read (``result()`` checks a
# notified result against it)
POLL: LiteralString = (
    "SELECT p.*, x.interrupted_by, x.interrupt_reason, x.run_number FROM ("
    + queries.POLL
    + ") p, actor_workflow_executions x"
    " WHERE x.routing_key = %(rk)s AND x.execution_id = %(eid)s"
)


@attrs.frozen
class Status:
    """What ``run.poll()`` returns. ``result`` is set once ``status == "finished"``;
    ``blocked_reason`` says why a runner left the execution suspended without running it;
    ``interrupted_by`` is who first asked for the interrupt, from the execution's record: the
    principal (``User``, ``Anonymous``), or a ``System`` caller that acted for nobody."""

    status: str
    outcome: str | None
    result: Result[Any, Exception] | None
    interrupt_requested: bool
    blocked_reason: str | None
    interrupted_by: Caller | None = None

    @property
    def finished(self) -> bool:
        return self.status == "finished"


def decode_result(
    workflow: Workflow[Any, Any], data: bytes, by: str | None = None, reason: str | None = None
) -> Result[Any, Exception]:
    """The stored result of an execution of ``workflow``, read as a parent reads its child's
    (``exits.execution_result``): its ``Interrupted`` names who asked (``by``) and why."""
    return exits.execution_result(codec.decode_primitive(data), workflow.output, workflow.errors, by, reason)


class Run(Generic[O]):
    """One execution, seen from a client: ``caller`` is whom ``interrupt()`` is sent as."""

    def __init__(
        self,
        sender: Sender,
        results: Listener,
        workflow: Workflow[Any, O],
        eid: ExecutionId,
        *,
        caller: Caller | None = None,
        handed: bytes | None = None,
    ) -> None:
        self._sender = sender
        self._results = results
        self.workflow = workflow
        self._eid = eid
        #: the stored result, when the start turn that returned this run finished the
        #: execution itself (``prefix.py``): ``result()`` reads nothing then
        self._handed = handed
        self.caller: Caller = caller if caller is not None else Anonymous()
        self.execution_id = str(eid)
        self._params = {**eid.owner.key_params(), "eid": self.execution_id, "bucket": eid.owner.bucket}
        #: the run number the last status read found (``result()`` checks a notified result with it)
        self._run_read: int | None = None

    def __repr__(self) -> str:
        return f"<Run {self.workflow!r} {self._eid.key!r}>"

    async def poll(self) -> Status:
        async with self._sender.pool.connection() as conn:
            return await self._poll(conn)

    async def _poll(self, conn: psycopg.AsyncConnection[Any]) -> Status:
        """The status, read; the run it was read from is kept in ``_run_read``."""
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(POLL, self._params)
        row = await cur.fetchone()
        if row is None:
            raise InvalidExecutionId(f"no execution {self.execution_id} exists")
        result = None
        if row["result"] is not None:
            data = bytes(row["result"])
            result = decode_result(self.workflow, data, row["interrupted_by"], row["interrupt_reason"])
        self._run_read = int(row["run_number"])
        return Status(
            row["status"],
            row["outcome"],
            result,
            row["interrupt"],
            row["blocked_reason"],
            decode_interrupter(row["interrupted_by"]),
        )

    async def result(self, timeout: float | timedelta | None = None) -> Result[O, Exception]:
        """Wait for the outcome: ``Success(output)`` or ``Failure(error)`` — a declared error,
        ``Interrupted``, or a ``Defect``. ``ResultTimeout`` if ``timeout`` passes first."""
        if self._handed is not None:
            return decode_result(self.workflow, self._handed)
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        deadline = None if seconds is None else time.monotonic() + seconds

        def left() -> float:
            wait = POLL_FALLBACK
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
            return max(wait, 0.0)

        # The engine's one listener (``akter.store.listener``): subscribe before the first
        # check, so a finish committed after the check wakes us; a reconnect wakes us too.
        with self._results.subscribe(self.execution_id) as finished:
            await finished.ready(left())
            self._run_read = None  # the run the last check read: none yet
            while True:
                finished.clear()
                value, finished.value = finished.value, None
                if isinstance(value, bytes):
                    # a pass of this process finished it and handed the stored result over
                    return decode_result(self.workflow, value)
                if isinstance(value, Noted) and (noted := self._noted(value.text)) is not None:
                    return noted
                try:
                    # a restart may leave the pool empty for a while: never wait past a poll
                    async with self._sender.pool.connection(timeout=max(left(), 0.1)) as conn:
                        status = await self._poll(conn)
                except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
                    # a database restart is an ordinary event: keep waiting, check again
                    if not (isinstance(exc, psycopg_pool.PoolTimeout) or is_connection_lost(exc)):
                        raise
                    log.warning("result of %s: database unreachable (%s); waiting", self.execution_id, exc)
                else:
                    if status.result is not None:
                        return status.result
                wait = left()
                if wait <= 0:
                    raise ResultTimeout(f"{self.execution_id} did not finish within {seconds}s")
                await finished.wait(wait)

    def _noted(self, text: str) -> Result[O, Exception] | None:
        """The result a finish notified (``sql/functions/akter_wf_finish.sql``: ``<run>.<base64 result>``),
        or None to read the row instead: before any check (which run it ended is unknown), for another run
        than the one the last check read (an older run's finish, delivered late, of an id a keyed
        start ran again), or when it does not decode."""
        number, dot, data = text.partition(".")
        if self._run_read is None or not dot or number != str(self._run_read):
            return None
        try:
            return decode_result(self.workflow, base64.b64decode(data, validate=True))
        except (binascii.Error, CorruptRecord) as exc:
            log.warning("result of %s: notified result unreadable (%s); reading it", self.execution_id, exc)
            return None

    async def interrupt(self, *, command_id: str | None = None, reason: str | None = None) -> None:
        """Ask the execution to stop: it replays to its first unsettled step, runs its
        compensations, and finishes as interrupted. A turn of the member's interrupt command,
        sent as ``caller``: ``AccessDenied`` if the actor's policy refuses it, and a retry with
        the same ``command_id`` replays it. A finished execution is left as it is. The first
        asker and their ``reason`` are recorded; the result's ``Interrupted`` carries them."""
        cid = CommandId.parse(command_id) if command_id is not None else None
        command = self.workflow.interrupt_command
        payload = Interrupt(self.execution_id, reason)
        await self._sender.send(self._eid.owner, command, payload, cid, self.caller)


class WorkflowActorHandle(KernelActorHandle[S]):
    """An actor handle that can also start and find workflow executions."""

    def __init__(
        self, sender: Sender, results: Listener, actor: Actor[S], ref: ActorRef, caller: Caller
    ) -> None:
        super().__init__(sender, actor, ref, caller)
        self._results = results

    async def start(
        self,
        workflow: Workflow[I, O],
        payload: I,
        *,
        command_id: str | None = None,
        timeout: timedelta | None = None,
    ) -> Run[O]:
        """Start an execution (a turn running the member's start command). With a ``key``
        function on the workflow, a repeated start with the same input attaches to the
        execution (``key_policy.py``). ``timeout``: interrupt the execution if it has not
        finished that long after its start (``deadline.py``); the workflow's declared timeout
        otherwise."""
        timeout_ms = check_timeout(timeout, "start(timeout=)")
        if not isinstance(workflow, Workflow) or workflow.actor is not self.actor:
            raise InvalidExecutionId(f"{workflow!r} is not a workflow member of {self.actor.name}")
        if not isinstance(payload, workflow.input):
            # before the key function, which would meet a payload it was not written for
            raise InvalidInput(
                f"{workflow!r} takes a {workflow.input.__name__}, got {type(payload).__name__}"
            )
        if workflow.key is not None:
            try:
                key = workflow.key(payload)
            except Exception as exc:
                raise InvalidInput(f"the key function of {workflow!r} raised {exc!r}") from exc
            ExecutionId(self.ref, workflow.name, check_execution_key(key))
        given = CommandId.parse(command_id) if command_id is not None else None
        if workflow.key is None:
            # an execution id from this id (or one like the id the send will mint) fits
            ExecutionId(self.ref, workflow.name, str(given or self._sender.mint_command_id()))
        # an id not given is minted by the send itself, which mints it again if the database
        # clock has moved past it, and may take the turn in one round trip (a fresh id)
        with prefix.expecting() as handed:  # the result, if the start turn finished it
            command: Any
            body: Any
            if timeout_ms is None:
                command, body = workflow.start_command, payload
            else:
                command = workflow.start_with_command
                body = command.input(input=payload, timeout_ms=timeout_ms)
            record = await self._sender.send(self.ref, command, body, given, self.caller)
        text = record.outcome.unwrap()
        if text in handed:  # finished by its start turn: the id is the one it parsed already
            eid, result = handed[text]
            return Run(self._sender, self._results, workflow, eid, caller=self.caller, handed=result)
        return Run(self._sender, self._results, workflow, ExecutionId.parse(text), caller=self.caller)

    def run(self, workflow: Workflow[Any, O], execution_id: str) -> Run[O]:
        eid = parse_for(workflow, execution_id, self.ref.tenant, self.ref)
        return Run(self._sender, self._results, workflow, eid, caller=self.caller)


class WorkflowClient(KernelClient):
    """The client ``app.client()`` returns: sends commands, starts and re-attaches to executions."""

    def __init__(self, sender: Sender, results: Listener, caller: Caller | None = None) -> None:
        super().__init__(sender, caller)
        self.results = results

    def actor(
        self, actor: Actor[S], actor_id: str, *, tenant: str, caller: Caller | None = None
    ) -> WorkflowActorHandle[S]:
        self.sender.check_declared(actor)
        ref = ActorRef(tenant=tenant, actor_type=actor.name, actor_id=actor_id)
        who = caller if caller is not None else self.caller
        return WorkflowActorHandle(self.sender, self.results, actor, ref, who)

    def run(self, workflow: Workflow[Any, O], execution_id: str, *, tenant: str) -> Run[O]:
        """Re-attach to an execution from its id, within ``tenant``."""
        return Run(
            self.sender, self.results, workflow, parse_for(workflow, execution_id, tenant), caller=self.caller
        )

    def _rebind(self, sender: Sender) -> Self:
        return type(self)(sender, self.results, self.caller)

    @property
    def schedules(self) -> Schedules:
        """Add, list, pause, resume, trigger and delete schedules
        (``akter.workflow.client.schedule_admin``)."""
        return Schedules(self.sender)


class SyncRun(Generic[O]):
    def __init__(self, loop: Any, run: Run[O]) -> None:
        self._loop = loop
        self._run = run
        self.execution_id = run.execution_id

    def poll(self) -> Status:
        return self._loop.run(self._run.poll())  # type: ignore[no-any-return]

    def result(self, timeout: float | timedelta | None = None) -> Result[O, Exception]:
        return self._loop.run(self._run.result(timeout))  # type: ignore[no-any-return]

    def interrupt(self, *, command_id: str | None = None, reason: str | None = None) -> None:
        self._loop.run(self._run.interrupt(command_id=command_id, reason=reason))


class Portal(Protocol):
    """Runs a coroutine to its end for a caller that blocks: the engine's loop thread
    (``akter.actor.client``), or the calling thread itself (``akter.actor.joined.Inline``)."""

    def run(self, coro: Coroutine[Any, Any, T]) -> T: ...


class SyncWorkflowActorHandle(SyncActorHandle[S]):
    """``WorkflowActorHandle``, blocking. Its sends and starts run on ``writes``: the engine's
    loop, or, for a client joined to the application's transaction (``with_connection``), the
    calling thread, on the application's connection. What does not write (a ``SyncRun``'s
    ``poll()`` and ``result()``, queries, subscriptions) runs on the engine and reads committed
    data."""

    def __init__(self, loop: _Portal, handle: KernelActorHandle[S], writes: Portal | None = None) -> None:
        super().__init__(loop, handle)
        self._writes = loop if writes is None else writes

    def send(
        self, command: Command[S, I, O], payload: I, *, command_id: str | None = None
    ) -> Result[O, Exception]:
        return self._writes.run(self._handle.send(command, payload, command_id=command_id))

    def start(
        self,
        workflow: Workflow[I, O],
        payload: I,
        *,
        command_id: str | None = None,
        timeout: timedelta | None = None,
    ) -> SyncRun[O]:
        started = self._workflows().start(workflow, payload, command_id=command_id, timeout=timeout)
        return SyncRun(self._loop, self._writes.run(started))

    def run(self, workflow: Workflow[Any, O], execution_id: str) -> SyncRun[O]:
        return SyncRun(self._loop, self._workflows().run(workflow, execution_id))

    def _workflows(self) -> WorkflowActorHandle[S]:
        handle = self._handle
        if not isinstance(handle, WorkflowActorHandle):  # the sync facade wraps what the async one made
            raise TypeError(f"expected a WorkflowActorHandle, got {type(handle).__name__}")
        return handle


class SyncWorkflowClient(KernelSyncClient):
    """``WorkflowClient``, blocking; ``writes`` as for ``SyncWorkflowActorHandle``."""

    def __init__(self, loop: _Portal, client: KernelClient, writes: Portal | None = None) -> None:
        super().__init__(loop, client)
        self._writes = loop if writes is None else writes

    def actor(
        self, actor: Actor[S], actor_id: str, *, tenant: str, caller: Caller | None = None
    ) -> SyncWorkflowActorHandle[S]:
        return SyncWorkflowActorHandle(
            self._loop, self._client.actor(actor, actor_id, tenant=tenant, caller=caller), self._writes
        )

    def run(self, workflow: Workflow[Any, O], execution_id: str, *, tenant: str) -> SyncRun[O]:
        return SyncRun(self._loop, self._workflows().run(workflow, execution_id, tenant=tenant))

    @property
    def schedules(self) -> SyncSchedules:
        return SyncSchedules(self._loop, self._workflows().schedules)

    def with_connection(self, conn: psycopg.Connection[Any]) -> SyncWorkflowClient:
        """A client whose sends and starts are written inside ``conn``'s transaction, which the
        application owns, in the calling thread (``akter.actor.joined``), so a Django view's
        transaction and akter's writes are one transaction on one connection."""
        client = self._workflows()
        check_connection(conn, client.sender.session.url, sync=True)
        return SyncWorkflowClient(self._loop, client._rebind(JoinedSender(client.sender, conn)), Inline())

    def _workflows(self) -> WorkflowClient:
        client = self._client
        if not isinstance(client, WorkflowClient):  # the sync facade wraps what the async one made
            raise TypeError(f"expected a WorkflowClient, got {type(client).__name__}")
        return client
