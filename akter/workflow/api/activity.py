"""Inside an activity: ``akter.activity_context()`` and its client with derived command ids.

An activity attempt may send commands to actors. Their ids are *derived*: a hash of the
execution, the step, the attempt and the call's ordinal within the attempt, issued at the
attempt's recorded start. A rerun of the same attempt (its runner died) therefore repeats the
same ids, and receivers deduplicate them. Once an id is past its expiry (the rerun came later
than the retry window) the receiver no longer deduplicates it, so the activity dies with
``ActivityOutcomeUnknown``: nobody can know whether the first send took effect (invariant 8),
and the pass never retries an unknown outcome (a new attempt's new ids would repeat it).

Expiry is the database clock's call. The client refuses early on its own estimate of that clock
(``Session.skew_ms``), which costs nothing; but the estimate can be stale — the clock moved, or
the id expired on the way — so a ``CommandExpired`` from the receiver's turn, which reads
``akter_now()`` under the actor's lock, ends the activity the same way. It is never an ordinary
defect, because a defect is retried.

Commands from the body itself, outside an activity, are a defect: ``activity_context()`` raises
there, and awaiting a client call in a body is caught by the driver as a non-effect await.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import inspect
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs
from returns.result import Result

from akter.actor.declare import Actor, Command
from akter.callers import Principal, System
from akter.errors import ActivityOutcomeUnknown, CommandExpired, Defect, EffectDefect, InvalidInput
from akter.ids import ActorRef, CommandId

if TYPE_CHECKING:
    from akter.actor.sender import Sender

S = TypeVar("S")
I = TypeVar("I")  # noqa: E741 -- a command's input type
O = TypeVar("O")  # noqa: E741 -- the conventional name of an output type


@attrs.define
class ActivityContext:
    """The running attempt: ``execution_id``, ``step`` (its declared name), ``occurrence`` (which
    await of that step this is, 1-based, within ``scope``: ``""`` for the body, else the
    branch), ``attempt`` (1-based) and ``client``."""

    execution_id: str
    step: str
    attempt: int
    started_ms: int
    tenant: str
    principal: Principal | None
    sender: Sender
    occurrence: int = 1
    scope: str = ""
    #: the execution's run (``continue_as_new.py``): ids of run 2 on never repeat run 1's
    run_number: int = 1
    _ordinal: int = 0
    #: set when a send found its derived id expired: the outcome is unknown whatever the
    #: activity does next (a body catching the error cannot turn it into a success)
    unknown: ActivityOutcomeUnknown | None = None

    @property
    def _identity(self) -> str:
        """The step as derived ids name it: the bare name for the body's first occurrence (so
        ids derived before occurrences existed stay the same), else name#occurrence@scope."""
        run = "" if self.run_number == 1 else f"~run{self.run_number}"
        if self.scope == "" and self.occurrence == 1:
            return f"{self.step}{run}"
        return f"{self.step}#{self.occurrence}@{self.scope}{run}"

    @property
    def client(self) -> ActivityClient:
        return ActivityClient(self)

    def next_command_id(self) -> CommandId:
        self._ordinal += 1
        digest = hashlib.blake2b(
            f"{self.execution_id}\x00{self._identity}\x00{self.attempt}\x00{self._ordinal}".encode(),
            digest_size=16,
        ).hexdigest()
        return CommandId(
            issued_ms=self.started_ms,
            expires_ms=self.started_ms + self.sender.session.retry_window_ms,
            nonce=digest,
        )


_current: contextvars.ContextVar[ActivityContext | None] = contextvars.ContextVar(
    "akter_activity", default=None
)


def activity_context() -> ActivityContext:
    """The attempt running in this context. Outside an activity this is a defect."""
    ctx = _current.get()
    if ctx is None:
        raise EffectDefect(
            "activity_context() is only available inside an activity; a workflow body sends "
            "commands through activities, never directly"
        )
    return ctx


def set_context(ctx: ActivityContext | None) -> contextvars.Token[ActivityContext | None]:
    return _current.set(ctx)


def reset_context(token: contextvars.Token[ActivityContext | None]) -> None:
    _current.reset(token)


class ActivityClient:
    """Sends commands from an activity, in the execution's tenant, as
    ``System(source="workflow", ref=<execution id>, on_behalf_of=<principal>)``."""

    def __init__(self, ctx: ActivityContext) -> None:
        self._ctx = ctx

    def actor(self, actor: Actor[S], actor_id: str) -> ActivityActor[S]:
        self._ctx.sender.check_declared(actor)
        return ActivityActor(self._ctx, actor, ActorRef(self._ctx.tenant, actor.name, actor_id))


class ActivityActor(Generic[S]):
    def __init__(self, ctx: ActivityContext, actor: Actor[S], ref: ActorRef) -> None:
        self._ctx = ctx
        self.actor = actor
        self.ref = ref

    async def send(self, command: Command[S, I, O], payload: I) -> Result[O, Exception]:
        if command.actor is not self.actor:
            raise InvalidInput(f"{command!r} is not a command of {self.actor.name}")
        ctx = self._ctx
        cid = ctx.next_command_id()
        estimate_ms = ctx.sender.session.now_ms()
        if cid.expires_ms < estimate_ms:
            raise _unknown(ctx, command, cid, estimate_ms, "this process's estimate of the database clock")
        caller = System(source="workflow", ref=ctx.execution_id, on_behalf_of=ctx.principal)
        try:
            record = await ctx.sender.send(self.ref, command, payload, cid, caller)
        except CommandExpired as exc:
            now_ms = exc.database_now_ms
            raise _unknown(ctx, command, cid, now_ms, "the database clock at the receiver") from exc
        return record.outcome


def _unknown(
    ctx: ActivityContext, command: Command[Any, Any, Any], cid: CommandId, now_ms: int, clock: str
) -> ActivityOutcomeUnknown:
    ctx.unknown = ActivityOutcomeUnknown(
        f"{ctx.execution_id} step {ctx.step!r} attempt {ctx.attempt}: command {command.name} "
        f"would use id {cid}, expired {now_ms - cid.expires_ms} ms ago by {clock}; "
        "its first send may have taken effect"
    )
    return ctx.unknown


async def invoke(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], limit: Any) -> Any:
    """One attempt's call of an activity function: awaited when async, in a worker thread when
    not, and a ``Defect`` when it outruns the step's ``timeout`` (``limit``, or None)."""

    async def call() -> Any:
        if inspect.iscoroutinefunction(fn):
            return await fn(*args, **kwargs)
        result = await asyncio.to_thread(fn, *args, **kwargs)
        if inspect.isawaitable(result):
            return await result
        return result

    if limit is None:
        return await call()
    try:
        return await asyncio.wait_for(call(), limit.total_seconds())
    except TimeoutError as exc:
        raise Defect(f"attempt timed out after {limit}", error_type="TimeoutError") from exc
