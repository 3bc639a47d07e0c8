"""The public clients: ``akter.Client`` (``app.client()``), ``akter.SyncClient``
(``app.sync_client()``) and ``akter.ActorHandle`` (``client.actor(...)``).

Each layer adds its half by inheritance, and only the top class carries the public name: the
kernel's ``KernelClient`` sends commands, queries and subscribes (``akter.actor.client``); the
workflow layer's ``WorkflowClient`` starts and re-attaches to executions and holds the schedules
(``akter.workflow.client.run``); this module mixes in the operator's methods — find, show, interrupt,
retry, pause, resume, resolve — which are sent as the client's caller. So a user who annotates
``client: akter.Client`` gets every method ``app.client()``'s client has."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any, Final, TypeVar

import psycopg

from akter import codec, tagged
from akter.actor.declare import Actor
from akter.actor.sender import Sender
from akter.callers import Caller
from akter.errors import InvalidExecutionId, InvalidInput, InvalidResolution
from akter.ids import ExecutionId
from akter.operate import actions
from akter.operate.actions import Acted, Engine
from akter.operate.query import (
    DEFAULT_PAGE,
    Count,
    ExecutionFilter,
    ExecutionRow,
    Page,
    iterate,
    read_counts,
    read_page,
)
from akter.operate.timeline import Timeline, read_timeline
from akter.workflow.client.run import SyncWorkflowClient, WorkflowActorHandle, WorkflowClient

S = TypeVar("S")

#: ``resolve(result=...)`` not given
_UNSET: Final[Any] = object()
#: what ``each_matching`` can do to every execution a filter matches
VERBS: Final = ("interrupt", "retry", "pause", "resume")


class Operations:
    """Finding and acting on executions across actors. Filters are an ``ExecutionFilter`` or
    its fields as keyword criteria (``tenant=``, ``workflow=``, ``status="blocked"``, ...)."""

    sender: Sender
    caller: Caller

    def executions(
        self, where: ExecutionFilter | None = None, /, *, page_size: int = DEFAULT_PAGE, **criteria: Any
    ) -> AsyncIterator[ExecutionRow]:
        """Every matching execution, newest first: ``async for row in client.executions(...)``.
        Pages of ``page_size`` rows are read as the loop goes; no connection is held between."""
        return iterate(self.sender.pool, ExecutionFilter.of(where, **criteria), page_size=page_size)

    async def execution_page(
        self,
        where: ExecutionFilter | None = None,
        /,
        *,
        limit: int = DEFAULT_PAGE,
        after: str | None = None,
        **criteria: Any,
    ) -> Page:
        """One page, newest first; ``page.next_cursor`` is the ``after`` of the next one."""
        async with self.sender.pool.connection() as conn:
            return await read_page(conn, ExecutionFilter.of(where, **criteria), limit=limit, after=after)

    async def execution_counts(self, where: ExecutionFilter | None = None, /, **criteria: Any) -> list[Count]:
        """How many executions match, by actor type, workflow, status and outcome."""
        async with self.sender.pool.connection() as conn:
            return await read_counts(conn, ExecutionFilter.of(where, **criteria))

    async def timeline(self, execution_id: str) -> Timeline:
        """One execution's record, step attempts, timer and why it waits, read in one snapshot;
        ``InvalidExecutionId`` when no such execution is stored."""
        eid = ExecutionId.parse(execution_id)
        async with self.sender.pool.connection() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            found = await read_timeline(conn, self.sender, eid)
        if found is None:
            raise InvalidExecutionId(f"no execution {execution_id} is stored (never started, or pruned)")
        return found

    async def interrupt_executions(
        self, *execution_ids: str, where: ExecutionFilter | None = None, reason: str | None = None
    ) -> list[Acted]:
        """Interrupt the executions named, and every open one ``where`` matches, with an
        optional ``reason`` that their result and timeline show."""
        engine: Engine = self.sender
        done = [await actions.interrupt(engine, i, caller=self.caller, reason=reason) for i in execution_ids]
        if where is not None:
            done += [a async for a in self.each_matching("interrupt", where, reason=reason)]
        return done

    async def retry_executions(
        self, *execution_ids: str, where: ExecutionFilter | None = None
    ) -> list[Acted]:
        """Retry the executions named, and every failed, defect or blocked one ``where`` matches:
        a failed one starts again as a new execution (``Acted.new_execution_id``) linked to it, a
        blocked one is offered to runners again now."""
        engine: Engine = self.sender
        done = [await actions.retry(engine, i, caller=self.caller) for i in execution_ids]
        if where is not None:
            done += [a async for a in self.each_matching("retry", where)]
        return done

    async def pause_executions(
        self, *execution_ids: str, where: ExecutionFilter | None = None, reason: str | None = None
    ) -> list[Acted]:
        """Pause the executions named, and every open one ``where`` matches: each finishes its
        in-flight attempts, then holds (``paused``) until resumed; timers keep firing meanwhile
        and what they bring is applied after the resume."""
        engine: Engine = self.sender
        done = [await actions.pause(engine, i, caller=self.caller, reason=reason) for i in execution_ids]
        if where is not None:
            done += [a async for a in self.each_matching("pause", where, reason=reason)]
        return done

    async def resume_executions(
        self, *execution_ids: str, where: ExecutionFilter | None = None
    ) -> list[Acted]:
        """Resume the paused executions named, and every paused one ``where`` matches."""
        engine: Engine = self.sender
        done = [await actions.unpause(engine, i, caller=self.caller) for i in execution_ids]
        if where is not None:
            done += [a async for a in self.each_matching("resume", where)]
        return done

    def each_matching(
        self, verb: str, where: ExecutionFilter, *, reason: str | None = None, page_size: int = DEFAULT_PAGE
    ) -> AsyncIterator[Acted]:
        """``verb`` (interrupt, retry, pause, resume) every execution ``where`` matches, yielding
        what each action did as it goes: one page of executions is held at a time, however many
        match (the ``*_executions`` methods collect these into a list)."""
        engine: Engine = self.sender
        who, size = self.caller, page_size
        if verb == "interrupt":
            return actions.interrupt_matching(engine, where, caller=who, reason=reason, page_size=size)
        if verb == "retry":
            return actions.retry_matching(engine, where, caller=who, page_size=size)
        if verb == "pause":
            return actions.pause_matching(engine, where, caller=who, reason=reason, page_size=size)
        if verb == "resume":
            return actions.unpause_matching(engine, where, caller=who, page_size=size)
        raise InvalidInput(f"each_matching does one of {', '.join(VERBS)}, not {verb!r}")

    async def resolve(
        self,
        execution_id: str,
        *,
        result: Any = _UNSET,
        error: Exception | None = None,
        retry: bool = False,
        fail: bool = False,
        reason: str | None = None,
    ) -> Acted:
        """Resolve an execution that needs attention with exactly one decision: ``result`` (the
        waiting activity's result, of its declared success type), ``error`` (one of its declared
        errors), ``retry=True`` (one more attempt, or one more pass) or ``fail=True``. The
        resolution is recorded as the attempt's exit with this client's caller, and the
        execution goes on. A value of the wrong type raises ``InvalidResolution`` and sends
        nothing; a refusal of the turn (``ExecutionNotResolvable``: it does not need attention,
        or another decision came first; ``AccessDenied``) is the ``Acted``'s ``error``."""
        chosen = [
            name
            for name, given in (
                ("result", result is not _UNSET),
                ("error", error is not None),
                ("retry", retry),
                ("fail", fail),
            )
            if given
        ]
        if len(chosen) != 1:
            raise InvalidInput(
                f"resolve with exactly one of result=, error=, retry=True, fail=True (got {chosen or 'none'})"
            )
        [decision] = chosen
        engine: Engine = self.sender
        value = None
        if decision in ("result", "error"):
            step = await actions.waiting_step(engine, execution_id)
            if step is not None:
                value = _resolution_value(step, result if decision == "result" else error)
        return await actions.resolve(
            engine, execution_id, caller=self.caller, decision=decision, value=value, reason=reason
        )


def _resolution_value(step: Any, supplied: Any) -> str:
    """The JSON a resolution carries for ``step``: a result checked against its success type, or
    a declared error with its fields; ``InvalidResolution`` for anything else."""
    if isinstance(supplied, Exception) and not isinstance(supplied, step.errors):
        declared = ", ".join(e.__name__ for e in step.errors) or "none"
        raise InvalidResolution(
            f"{type(supplied).__name__} is not an error {step.qualified_name} declares ({declared})"
        )
    try:
        if isinstance(supplied, Exception):
            return json.dumps(tagged.error(supplied)["error"])
        return codec.check(supplied, step.success).decode()
    except (InvalidInput, TypeError, ValueError) as exc:
        raise InvalidResolution(f"the value supplied for {step.qualified_name}: {exc}") from exc


class SyncOperations:
    """The same, blocking, for ``app.sync_client()``."""

    def _operations(self) -> tuple[Any, Operations]:
        loop, client = getattr(self, "_loop"), getattr(self, "_client")  # noqa: B009 -- set by SyncClient
        if not isinstance(client, Operations):  # the sync facade wraps what the async one made
            raise TypeError(f"expected a workflow client, got {type(client).__name__}")
        return loop, client

    def executions(
        self, where: ExecutionFilter | None = None, /, *, page_size: int = DEFAULT_PAGE, **criteria: Any
    ) -> Iterator[ExecutionRow]:
        """Every matching execution, newest first, read a page at a time as iteration goes."""
        loop, client = self._operations()
        where = ExecutionFilter.of(where, **criteria)
        after: str | None = None
        while True:
            page: Page = loop.run(client.execution_page(where, limit=page_size, after=after))
            yield from page.rows
            if page.next_cursor is None:
                return
            after = page.next_cursor

    def execution_page(
        self,
        where: ExecutionFilter | None = None,
        /,
        *,
        limit: int = DEFAULT_PAGE,
        after: str | None = None,
        **criteria: Any,
    ) -> Page:
        loop, client = self._operations()
        return loop.run(client.execution_page(where, limit=limit, after=after, **criteria))  # type: ignore[no-any-return]

    def execution_counts(self, where: ExecutionFilter | None = None, /, **criteria: Any) -> list[Count]:
        loop, client = self._operations()
        return loop.run(client.execution_counts(where, **criteria))  # type: ignore[no-any-return]

    def timeline(self, execution_id: str) -> Timeline:
        loop, client = self._operations()
        return loop.run(client.timeline(execution_id))  # type: ignore[no-any-return]

    def interrupt_executions(
        self, *execution_ids: str, where: ExecutionFilter | None = None, reason: str | None = None
    ) -> list[Acted]:
        loop, client = self._operations()
        return loop.run(client.interrupt_executions(*execution_ids, where=where, reason=reason))  # type: ignore[no-any-return]

    def retry_executions(self, *execution_ids: str, where: ExecutionFilter | None = None) -> list[Acted]:
        loop, client = self._operations()
        return loop.run(client.retry_executions(*execution_ids, where=where))  # type: ignore[no-any-return]

    def pause_executions(
        self, *execution_ids: str, where: ExecutionFilter | None = None, reason: str | None = None
    ) -> list[Acted]:
        loop, client = self._operations()
        return loop.run(client.pause_executions(*execution_ids, where=where, reason=reason))  # type: ignore[no-any-return]

    def resume_executions(self, *execution_ids: str, where: ExecutionFilter | None = None) -> list[Acted]:
        loop, client = self._operations()
        return loop.run(client.resume_executions(*execution_ids, where=where))  # type: ignore[no-any-return]

    def resolve(self, execution_id: str, **decision: Any) -> Acted:
        loop, client = self._operations()
        return loop.run(client.resolve(execution_id, **decision))  # type: ignore[no-any-return]


class ActorHandle(WorkflowActorHandle[S]):
    """One actor of one tenant, as one caller sees it (``client.actor(Type, id, tenant=...)``):
    ``send`` and ``send_record`` a command, ``query``, ``events`` and ``wait_for`` its events,
    ``start`` a workflow member and ``run`` one by execution id."""


class Client(Operations, WorkflowClient):
    """``app.client()``: sends commands, starts and re-attaches to executions, manages
    schedules, and operates on executions. Never constructed by hand: the App hands it out."""

    def actor(
        self, actor: Actor[S], actor_id: str, *, tenant: str, caller: Caller | None = None
    ) -> ActorHandle[S]:
        made = super().actor(actor, actor_id, tenant=tenant, caller=caller)
        return ActorHandle(self.sender, self.results, made.actor, made.ref, made.caller)


class SyncClient(SyncOperations, SyncWorkflowClient):
    """``app.sync_client()``: the same as ``Client``, blocking, for code without an event loop."""

    def with_connection(self, conn: psycopg.Connection[Any]) -> SyncClient:
        """A ``SyncClient`` whose sends and starts are written inside ``conn``'s transaction,
        which the application owns, in the calling thread (``akter.actor.joined``)."""
        joined = super().with_connection(conn)
        return SyncClient(joined._loop, joined._client, joined._writes)
