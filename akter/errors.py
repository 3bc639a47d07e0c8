"""The one exception tree of akter.

Declared business errors (the ``errors=[...]`` of a command, workflow or activity) are never
wrapped: they travel as ``Failure(error)`` or are raised as themselves. Everything below is akter's
own, and every class says when it is raised and what it carries::

    AkterError
    ├── DeclarationError            an Actor / command / workflow / step / Retry declaration is invalid
    │                               (all problems, naming the workflow and the bad value)
    ├── ConfigurationError          no usable database, bad AKTER_* setting or settings value, bad APP path
    │   └── EmbeddedServerError     the embedded PostgreSQL could not be started
    ├── DatabaseUnavailable         PostgreSQL stayed unreachable past a retry budget; ``__cause__`` says how
    ├── SchemaError                 the database schema cannot be used by this akter
    │   └── SchemaTooNew            the database was migrated by a newer akter
    ├── IncompatibleStoredData      an App's actor types would misread data already stored
    ├── InvalidInput                bad input from a caller; nothing was written
    │   ├── InvalidActorId          empty, oversized or non-UTF-8 actor id or tenant
    │   ├── InvalidCommandId        a command id that is not ``v1.<issued>.<expires>.<uuid>``
    │   ├── InvalidExecutionId      malformed, foreign tenant, or another member's execution id
    │   ├── InvalidExecutionKey     a workflow key outside 1..256 UTF-8 bytes
    │   ├── ExecutionNotRetryable   a retry of an execution that neither failed nor is blocked
    │   ├── ExecutionKeyConflict    a keyed start whose key names an execution of another input
    │   ├── ExecutionNotResolvable  a resolution of an execution that does not need it (or not so)
    │   ├── InvalidResolution       a resolution's result or error is not of the step's declared types
    │   ├── InvalidTimerKey         an outbox key with a reserved prefix or bad size
    │   ├── UnknownCommand          the actor type declares no such command
    │   ├── UnknownSchedule         no schedule of that name in that tenant
    │   └── PayloadTooLarge         a command payload or workflow input over its actor type's cap
    ├── CommandRejected             a command was refused before its handler ran; nothing was written
    │   ├── CommandConflict         the id is known with another command or payload
    │   ├── CommandExpired          the id is past its expiry (the retry window)
    │   ├── AccessDenied            the caller may not send this command, or presents another's id
    │   ├── InternalCommand         a non-System caller reached an internal command (a defect)
    │   └── ActorBusy               the actor row stayed locked past the busy deadline
    ├── TurnClosed                  a Turn capability was used after its turn ended
    ├── StateTooLarge               encoded state is over the actor type's cap; the turn rolled back
    ├── EventTooLarge               an emitted event is over the actor type's cap; the turn rolled back
    ├── ResultTooLarge              an activity's result is over the cap; recorded as the attempt's defect
    ├── CorruptRecord               a stored row cannot be decoded; the bytes are kept untouched
    ├── UndeliverableIntent         an outbox row names an actor type or command the App lacks
    ├── Defect                      a handler raised an undeclared exception or emitted an undeclared
    │                               event; the turn rolled back
    ├── EffectDefect                a workflow body did something its driver cannot interpret
    ├── Interrupted                 the outcome of an interrupted execution (inside a Failure)
    ├── CompensationFailed          a compensation or finalizer failed; carries the body's outcome
    ├── ActivityOutcomeUnknown      an activity's effect cannot be known (its derived ids expired)
    └── ResultTimeout               run.result(timeout=...) gave up waiting; the run goes on

Every class is raised as drawn, but ``akter`` exports only those a user catches or sees in a
stored outcome, and the bases the rest are caught by. These are not exported (import them from
here, or catch their base)::

    EmbeddedServerError SchemaTooNew InvalidActorId InvalidCommandId InvalidExecutionKey
    ExecutionNotRetryable ExecutionNotResolvable InvalidResolution InvalidTimerKey UnknownCommand
    UnknownSchedule CommandConflict InternalCommand TurnClosed EffectDefect ResultTooLarge
    UndeliverableIntent

Most are caught as their base (``ConfigurationError``, ``SchemaError``, ``InvalidInput``,
``CommandRejected``). ``TurnClosed`` is a defect of code that kept a ``Turn`` past its turn;
``EffectDefect`` and ``ResultTooLarge`` reach users as the ``Defect`` of an outcome;
``UndeliverableIntent`` is what the relay records as a row's ``last_error``, never raised to a
caller.

``Defect`` carries the original exception's type name and message (and, in process, the exception
as ``__cause__``), because a handler defect must reach the caller and never commit anything; its
``str()`` names both (``ValueError: boom``), so a ``Failure`` of one never prints empty.

Control-flow signals are not in this tree and not ``Exception`` at all: like Trio's ``Cancelled``
they derive from ``BaseException``, so an ``except Exception`` (a user's, or a loop's that logs and
goes on) cannot swallow them. A workflow pass ends on ``akter.workflow.engine.passes.Stale`` (its
generation no longer holds); a workflow body is suspended with ``GeneratorExit`` at its await.

Raw driver errors (``psycopg.OperationalError``, ``psycopg_pool.PoolTimeout``) are retried where
they happen and become ``DatabaseUnavailable`` once the retry budget is spent; a caller never has
to catch psycopg's classes to learn that the database went away.
"""

from __future__ import annotations

from typing import Any


class AkterError(Exception):
    """Base of every error akter raises on its own behalf."""


class DeclarationError(AkterError):
    """A declaration is invalid. ``problems`` lists every problem found, not just the first."""

    def __init__(self, subject: str, problems: list[str]) -> None:
        self.subject = subject
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{subject} is not a valid declaration:\n{lines}")


class ConfigurationError(AkterError, ValueError):
    """akter cannot be configured as asked: a database URL, an ``AKTER_*`` variable, a settings
    value (``RelaySettings``, a pool's ``lock_timeout``, ``AKTER_FAULTS``), an APP path. Also a
    ``ValueError``, which is what such settings raised before they had their own class."""


class EmbeddedServerError(ConfigurationError):
    """The embedded PostgreSQL failed to start; the message says why and what to do."""


class DatabaseUnavailable(AkterError):
    """PostgreSQL could not be reached (refused, closed the connection, the pool had no
    connection to give) for longer than the retry budget of the operation — a send's
    ``busy_timeout``. Whether the last attempt committed is unknown: retry with the same command
    id, which replays a committed turn instead of running it twice. ``__cause__`` is the last
    driver error."""


class SchemaError(AkterError):
    """The database's schema is not one this akter can use."""


class SchemaTooNew(SchemaError):
    """The database carries migrations this akter does not know: it was migrated by a newer akter."""

    def __init__(self, database_version: int, known_version: int) -> None:
        self.database_version = database_version
        self.known_version = known_version
        super().__init__(
            f"the database schema is at version {database_version} but this akter knows migrations "
            f"up to {known_version}; upgrade akter instead of running an older one against it"
        )


class IncompatibleStoredData(AkterError):
    """An App's actor types would misread data already stored — a state field renamed without
    an upgrade, an event type removed while events of it are stored, a command payload changed
    while undelivered intents carry it. Raised when the App starts its engine, before anything
    is written. ``report`` is what ``akter workflows check`` prints for it (the message says it
    too); ``refusals`` are its lines as data (``akter.actor.compat.Refusal``)."""

    def __init__(self, report: str, refusals: tuple[Any, ...]) -> None:
        self.report = report
        self.refusals = refusals
        super().__init__(
            f"this App's actor types would misread data already stored in the database:\n{report}"
        )


class InvalidInput(AkterError, ValueError):
    """Input from a caller is malformed. Nothing was read or written on its behalf. A payload
    that would not read back as it was sent (a field of the wrong type, a naive datetime, a value
    JSON cannot hold) is one; its message names the field (``Ping.n: expected int, got str``)."""


class ExecutionKeyConflict(InvalidInput):
    """A keyed start found an execution under its key that was started with another input: one
    still open, or a finished one whose workflow's ``key_reuse`` policy is ``REFUSE`` (the
    default). Nothing was written. ``execution_id`` names the execution the key is taken by,
    ``finished`` says whether it has finished."""

    def __init__(self, message: str, *, execution_id: str = "", finished: bool = False) -> None:
        self.execution_id = execution_id
        self.finished = finished
        super().__init__(message)


class InvalidActorId(InvalidInput):
    """An actor id, tenant or actor type name is empty, too long or not valid UTF-8."""


class InvalidCommandId(InvalidInput):
    """A command id is not of the form ``v1.<issued ms>.<expires ms>.<uuid>``."""


class InvalidExecutionId(InvalidInput):
    """An execution id is malformed, names another tenant, or names another workflow member."""


class InvalidExecutionKey(InvalidInput):
    """A workflow key is empty or longer than 256 UTF-8 bytes; ``size`` is its byte count."""

    def __init__(self, message: str, size: int) -> None:
        self.size = size
        super().__init__(message)


class ExecutionNotRetryable(InvalidInput):
    """An operator's retry (``akter.wf.retry:<Workflow>``) named an execution there is nothing to
    retry of: it succeeded or was interrupted, it is running or suspended without being blocked,
    it was retried already, or its stored input no longer decodes. Nothing was written."""


class ExecutionNotResolvable(InvalidInput):
    """A resolution (``akter.wf.resolve:<Workflow>``, ``client.resolve``) or an operator's
    interrupt of an execution seen needing attention found it otherwise: it does not need
    attention (any more), another decision resolved it first (the message says whose), or it
    needs attention for another reason than the one resolved. Nothing was written."""


class InvalidResolution(InvalidInput):
    """A resolution supplied a result that is not of the waiting activity's declared success
    type, an error the activity does not declare, or a decision akter does not know. Nothing
    was written; the execution still needs attention."""


class InvalidTimerKey(InvalidInput):
    """An outbox intent key is empty, too long, or uses a prefix akter reserves."""


class UnknownCommand(InvalidInput):
    """The actor type declares no command of that name."""


class UnknownSchedule(InvalidInput):
    """No schedule of that name exists in that tenant (``client.schedules``, ``akter schedules``)."""


class PayloadTooLarge(InvalidInput):
    """A command payload (a workflow input is its start command's payload) encodes to more bytes
    than its actor type's ``max_payload_bytes``. Refused before anything was written: at a
    client's send, or in the handler of a ``Turn.send`` / ``Turn.start``. ``subject`` names the
    command; ``size`` and ``limit`` are canonical-JSON byte counts."""

    def __init__(self, subject: str, size: int, limit: int) -> None:
        self.subject = subject
        self.size = size
        self.limit = limit
        super().__init__(f"{subject} encodes to {size} bytes, over its limit of {limit}")


class CommandRejected(AkterError):
    """A command was refused before its handler ran. Nothing was written."""


class CommandConflict(CommandRejected):
    """The command id is already bound to another command name or another payload."""


class CommandExpired(CommandRejected):
    """The command id's expiry has passed; a retry must not be executed as new. ``database_now_ms``
    is the database clock that judged it."""

    def __init__(self, message: str, *, database_now_ms: int = 0) -> None:
        self.database_now_ms = database_now_ms
        super().__init__(message)


class AccessDenied(CommandRejected):
    """The caller may not send this command, or presented a command id another caller owns."""


class InternalCommand(CommandRejected):
    """A non-System caller reached an internal command. A defect in the caller; nothing written."""


class ActorBusy(CommandRejected):
    """The actor's row stayed locked by other transactions past the busy deadline."""


class TurnClosed(AkterError):
    """A Turn capability (state, emit, send, ...) was used after its turn ended."""


class StateTooLarge(AkterError):
    """The new state encodes to more bytes than the actor type allows. The turn rolled back."""

    def __init__(self, actor_type: str, size: int, limit: int) -> None:
        self.actor_type = actor_type
        self.size = size
        self.limit = limit
        super().__init__(f"{actor_type} state encodes to {size} bytes, over its limit of {limit}")


class EventTooLarge(AkterError):
    """An event the handler emitted encodes to more bytes than its actor type's
    ``max_event_bytes``. The turn rolled back: no state, no events, no receipt."""

    def __init__(self, actor_type: str, tag: str, size: int, limit: int) -> None:
        self.actor_type = actor_type
        self.tag = tag
        self.size = size
        self.limit = limit
        super().__init__(f"{actor_type} event {tag} encodes to {size} bytes, over its limit of {limit}")


class ResultTooLarge(AkterError):
    """An activity returned a value that encodes to more bytes than its actor type's
    ``max_result_bytes``. The attempt is recorded as a defect carrying this message (never the
    value), and retried or not under the activity's retry policy like any defect."""

    def __init__(self, step: str, size: int, limit: int) -> None:
        self.step = step
        self.size = size
        self.limit = limit
        super().__init__(f"the result of activity {step} encodes to {size} bytes, over its limit of {limit}")


class CorruptRecord(AkterError):
    """A stored row could not be decoded: not framed JSON, or JSON of another shape than its
    declared type (an unknown key, a missing required field, ``"5"`` for an ``int``). Nothing is
    decoded to a default; the row is left untouched for inspection."""


class UndeliverableIntent(AkterError):
    """An outbox row names an actor type or command the running App does not declare. The relay
    records it as the row's ``last_error`` and backs off, so a deploy that has it (another relay
    of a rolling deploy) can deliver it; after ``RelaySettings.max_attempts`` the row is parked
    for an operator (``akter outbox retry|delete``)."""


class Defect(AkterError):
    """An undeclared exception escaped a handler. Everything the turn did was rolled back.

    ``error_type`` is the original exception's class name (``""`` when akter itself found the
    defect) and ``message`` its message, each stored in its own field. ``str()`` shows both —
    ``ValueError: boom``, or ``ValueError`` alone for an empty message, the class being left
    out only when the message already names it — so ``<Failure: ValueError: boom>`` and an
    ``unwrap()``'s traceback say what failed; ``repr()`` is the constructor call."""

    def __init__(self, message: str, *, error_type: str = "") -> None:
        self.error_type = error_type
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        kind = self.error_type or type(self).__name__
        if not self.message:
            return kind
        if self.error_type and f"{self.error_type.rsplit('.', 1)[-1]}: " in self.message:
            return self.message
        return f"{kind}: {self.message}"

    def __repr__(self) -> str:
        typed = f", error_type={self.error_type!r}" if self.error_type else ""
        return f"{type(self).__name__}({self.message!r}{typed})"


class EffectDefect(AkterError):
    """A workflow body did something the deterministic driver cannot interpret: awaited a
    non-akter awaitable, declared a step at run time, used another workflow's step, sent a
    command outside an activity."""


class Interrupted(AkterError):
    """The execution was interrupted; ``run.result()`` returns ``Failure(Interrupted(...))``.
    ``by`` is who asked first (a principal's key, ``user:ann``) and ``reason`` what they gave,
    when the execution recorded them."""

    def __init__(
        self, message: str = "interrupted", *, by: str | None = None, reason: str | None = None
    ) -> None:
        self.by = by
        self.reason = reason
        super().__init__(message)


class CompensationFailed(AkterError):
    """A compensation (``wf.compensate``'s undo) or a finalizer failed while the execution
    ended. ``original`` is what the body ended with (its declared error, ``Interrupted``, a
    ``Defect``; ``None`` when the body succeeded and only a finalizer failed); ``failures`` has
    one line per failed undo or finalizer, naming its step when it was a step."""

    def __init__(self, original: BaseException | None, failures: tuple[str, ...]) -> None:
        self.original = original
        self.failures = tuple(failures)
        lines = "; ".join(self.failures)
        ended = "succeeded" if original is None else f"ended with {type(original).__name__}: {original}"
        super().__init__(f"the body {ended}, then {len(self.failures)} cleanup(s) failed: {lines}")


class ActivityOutcomeUnknown(AkterError):
    """An activity's outcome cannot be known: a command it would send is past its derived id's
    expiry, so sending it could duplicate an effect the receiver no longer deduplicates."""


class ResultTimeout(AkterError, TimeoutError):
    """``run.result(timeout=...)`` stopped waiting. The execution itself is unaffected."""
