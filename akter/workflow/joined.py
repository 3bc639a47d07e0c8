"""The sync client inside the application's transaction: ``sync_client.with_connection(conn)``.

The turns of a joined sync client run in the calling thread on the application's
``psycopg.Connection`` (``akter.actor.joined.Inline``), never on the engine's event-loop
thread, so a Django view's transaction and akter's writes are one transaction on one
connection. What does not write — a ``SyncRun``'s ``poll()`` and ``result()``, queries,
subscriptions — runs on the engine as usual and reads committed data.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TypeVar

from returns.result import Result

from akter.actor.declare import Actor, Command
from akter.actor.joined import Inline
from akter.callers import Caller
from akter.workflow.declare import Workflow
from akter.workflow.run import SyncRun, SyncWorkflowActorHandle, SyncWorkflowClient, WorkflowActorHandle

S = TypeVar("S")
I = TypeVar("I")  # noqa: E741 -- a command's or workflow's input type
O = TypeVar("O")  # noqa: E741 -- an output type


class SyncJoinedActorHandle(SyncWorkflowActorHandle[S]):
    """Sends and starts in the calling thread, on the application's connection."""

    def send(
        self, command: Command[S, I, O], payload: I, *, command_id: str | None = None
    ) -> Result[O, Exception]:
        return Inline().run(self._handle.send(command, payload, command_id=command_id))

    def start(
        self,
        workflow: Workflow[I, O],
        payload: I,
        *,
        command_id: str | None = None,
        timeout: timedelta | None = None,
    ) -> SyncRun[O]:
        handle = self._handle
        if not isinstance(handle, WorkflowActorHandle):  # the sync facade wraps what the async one made
            raise TypeError(f"expected a WorkflowActorHandle, got {type(handle).__name__}")
        started = handle.start(workflow, payload, command_id=command_id, timeout=timeout)
        return SyncRun(self._loop, Inline().run(started))


class SyncJoinedClient(SyncWorkflowClient):
    def actor(
        self, actor: Actor[S], actor_id: str, *, tenant: str, caller: Caller | None = None
    ) -> SyncJoinedActorHandle[S]:
        return SyncJoinedActorHandle(
            self._loop, self._client.actor(actor, actor_id, tenant=tenant, caller=caller)
        )
