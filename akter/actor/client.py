"""The kernel's clients: how code addresses actors and sends them commands.

These are the actor layer's halves of the public clients, not the public clients themselves:
``akter.Client``, ``akter.SyncClient`` and ``akter.ActorHandle`` (``akter.operate.client``) add
workflows and operations to them, and are what ``app.client()`` hands out. The kernel's classes
carry ``Kernel`` in their names so that no two classes are called ``Client``.

``KernelClient`` is tenant-agnostic; ``client.actor(Type, id, tenant=...)`` gives a
tenant-scoped handle. ``handle.send(command, payload)`` mints a command id (or takes the
caller's), runs the turn through the engine's ``Sender`` (``akter.actor.sender``: retries, the
clock), and returns a ``returns.result.Result``: ``Success(output)`` or ``Failure(declared
error)``. akter's own refusals (conflict, expiry, access, defects) are raised, because they are
bugs or operational conditions, not business outcomes.

``KernelSyncClient`` is the same for synchronous code (Django, Flask): its calls run on the
event loop of a ``_LoopThread``, the started App's one (``app.start_sync()``), or a private one
for the duration of a script's ``with app.sync_client():``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

import psycopg
from returns.maybe import Maybe
from returns.result import Result

from akter.actor import subscribe
from akter.actor.declare import Actor, Command
from akter.actor.joined import JoinedSender, check_connection
from akter.actor.kernel import Committed
from akter.actor.query import Event, Query
from akter.actor.snapshot import run_query
from akter.callers import Anonymous, Caller
from akter.errors import InvalidInput
from akter.ids import ActorRef, CommandId

if TYPE_CHECKING:
    from akter.actor.sender import Sender

S = TypeVar("S")
I = TypeVar("I")  # noqa: E741 -- named as in akter.actor.declare: a command's input type
O = TypeVar("O")  # noqa: E741 -- named as in akter.actor.declare: a command's output type
T = TypeVar("T")
E = TypeVar("E")


class KernelActorHandle(Generic[S]):
    """One actor of one tenant, as seen by one caller."""

    def __init__(self, sender: Sender, actor: Actor[S], ref: ActorRef, caller: Caller) -> None:
        self._sender = sender
        self.actor = actor
        self.ref = ref
        self.caller = caller

    async def send(
        self, command: Command[S, I, O], payload: I, *, command_id: str | None = None
    ) -> Result[O, Exception]:
        """Handle ``command`` as one turn. Retrying with the same ``command_id`` never runs the
        handler twice: the stored outcome is returned instead."""
        record = await self.send_record(command, payload, command_id=command_id)
        return record.outcome

    async def send_record(
        self, command: Command[S, I, O], payload: I, *, command_id: str | None = None
    ) -> Committed:
        """Like ``send``, returning the whole committed record (id, replayed, events)."""
        if command.actor is not self.actor:
            raise InvalidInput(f"{command!r} is not a command of {self.actor.name}")
        cid = CommandId.parse(command_id) if command_id is not None else None
        return await self._sender.send(self.ref, command, payload, cid, self.caller)

    async def query(self, query: Query[S, I, O], payload: I) -> Result[O, Exception]:
        """Answer a read-only ``query`` (``akter.actor.query``) from the actor's last committed
        state: no receipt, no row lock, nothing written; refused by the access policy like a
        command (``AccessDenied``), and a payload of the wrong type is ``InvalidInput``."""
        if not isinstance(query, Query) or query.actor is not self.actor:
            raise InvalidInput(f"{query!r} is not a query of {self.actor.name}")
        budget = self._sender.busy_timeout.total_seconds()
        return await run_query(self._sender.pool, query, self.ref, payload, self.caller, budget=budget)

    def events(self, after: int = 0) -> AsyncIterator[Event]:
        """The actor's events with a sequence above ``after``, in order, each once, as they
        commit; it never ends by itself (``akter.actor.subscribe``). Refused by the access
        policy like a query."""
        return subscribe.events(self._sender, self.actor, self.ref, self.caller, after)

    async def wait_for(
        self,
        event_type: type[E],
        *,
        where: Callable[[E], bool] | None = None,
        timeout: float | timedelta | None = None,
        after: int = 0,
    ) -> Maybe[E]:
        """The first event of ``event_type`` after ``after`` that ``where`` accepts, committed
        before the call or after it: ``Some(event)``, or ``Nothing`` once ``timeout`` passed."""
        return await subscribe.wait_for(
            self._sender, self.actor, self.ref, self.caller, event_type, where, timeout, after
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.ref} as {self.caller!r}>"


class KernelClient:
    """Sends commands to actors; ``akter.Client`` (what ``app.client()`` gives) is one."""

    def __init__(self, sender: Sender, caller: Caller | None = None) -> None:
        self.sender = sender
        self.caller: Caller = caller if caller is not None else Anonymous()

    def actor(
        self, actor: Actor[S], actor_id: str, *, tenant: str, caller: Caller | None = None
    ) -> KernelActorHandle[S]:
        self.sender.check_declared(actor)
        ref = ActorRef(tenant=tenant, actor_type=actor.name, actor_id=actor_id)
        return KernelActorHandle(self.sender, actor, ref, caller if caller is not None else self.caller)

    def new_command_id(self) -> str:
        """A fresh command id on the database clock; keep it to retry a send safely."""
        return str(self.sender.mint_command_id())

    def with_connection(self, conn: psycopg.AsyncConnection[Any]) -> Self:
        """A client of the same kind whose sends — commands, the intents their turns stage, the
        workflows they start — are written inside ``conn``'s transaction, which the
        application owns: they commit with it, or leave no trace (``akter.actor.joined``).
        Queries and subscriptions still read committed data through the engine's pool."""
        check_connection(conn, self.sender.session.url, sync=False)
        return self._rebind(JoinedSender(self.sender, conn))

    def _rebind(self, sender: Sender) -> Self:
        """This client on another sender (a subclass passes what else it holds)."""
        return type(self)(sender, self.caller)


class SyncActorHandle(Generic[S]):
    def __init__(self, loop: _Portal, handle: KernelActorHandle[S]) -> None:
        self._loop = loop
        self._handle = handle
        self.ref = handle.ref

    def send(
        self, command: Command[S, I, O], payload: I, *, command_id: str | None = None
    ) -> Result[O, Exception]:
        return self._loop.run(self._handle.send(command, payload, command_id=command_id))

    def query(self, query: Query[S, I, O], payload: I) -> Result[O, Exception]:
        """``ActorHandle.query``, blocking."""
        return self._loop.run(self._handle.query(query, payload))

    def events(self, after: int = 0) -> Iterator[Event]:
        """``ActorHandle.events`` as a blocking iterator; close it (or leave its ``for``) to
        stop listening."""
        stream = self._handle.events(after)

        async def step() -> Event:
            return await anext(stream)

        try:
            while True:
                try:
                    yield self._loop.run(step())
                except StopAsyncIteration:
                    return
        finally:
            with contextlib.suppress(RuntimeError):  # the engine closed first: nothing to close
                self._loop.run(_aclose(stream))

    def wait_for(
        self,
        event_type: type[E],
        *,
        where: Callable[[E], bool] | None = None,
        timeout: float | timedelta | None = None,
        after: int = 0,
    ) -> Maybe[E]:
        """``ActorHandle.wait_for``, blocking."""
        return self._loop.run(self._handle.wait_for(event_type, where=where, timeout=timeout, after=after))


class KernelSyncClient:
    """The synchronous facade: the same operations, blocking, for code without an event loop."""

    def __init__(self, loop: _Portal, client: KernelClient) -> None:
        self._loop = loop
        self._client = client

    def actor(
        self, actor: Actor[S], actor_id: str, *, tenant: str, caller: Caller | None = None
    ) -> SyncActorHandle[S]:
        return SyncActorHandle(self._loop, self._client.actor(actor, actor_id, tenant=tenant, caller=caller))

    def new_command_id(self) -> str:
        return self._client.new_command_id()


async def _aclose(stream: AsyncIterator[Any]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


class _Portal:
    """Runs coroutines on an event loop that another thread runs: ``run`` blocks the calling
    thread until the coroutine is done there. The sync facade is built on it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            coro.close()
            raise RuntimeError("the akter sync facade was called from its own event loop; await instead")
        if self.loop.is_closed() or not self.loop.is_running():
            coro.close()
            raise RuntimeError("the akter sync facade is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()


class _LoopThread(_Portal):
    """A ``_Portal`` onto an event loop in a thread of its own. Built on ``asyncio.Runner``, so
    ``stop`` shuts it down properly: tasks left running are cancelled, async generators and the
    default executor are shut down, the loop is closed and the thread joined. A daemon thread,
    so a process that never calls ``stop`` can still exit."""

    def __init__(self, name: str = "akter-sync") -> None:
        ready = threading.Event()
        self._stopping: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, args=(ready,), name=name, daemon=True)
        self._thread.start()
        ready.wait()

    def _main(self, ready: threading.Event) -> None:
        with asyncio.Runner() as runner:
            self.loop = runner.get_loop()
            runner.run(self._serve(ready))

    async def _serve(self, ready: threading.Event) -> None:
        self._stopping = asyncio.Event()
        ready.set()
        await self._stopping.wait()

    def stop(self) -> None:
        if self._thread.is_alive() and self._stopping is not None:
            self.loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join()
