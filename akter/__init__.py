"""akter: durable workflows as members of actors, stored in PostgreSQL.

The public surface is exactly ``__all__`` (pinned by ``tests/unit/test_exports.py``); everything
else is internal and may change without notice.

``App``, ``Relay`` and ``RelaySettings`` are imported when first used (``__getattr__``), so that
a process that needs neither — ``akter migrate``, a script that only declares — does not load
the relay and the composition root.
"""

from typing import TYPE_CHECKING

from akter.actor.client import ActorHandle, Client, SyncClient
from akter.actor.declare import Command, allow_all, deny_anonymous, users_only
from akter.actor.query import Event, Query, View
from akter.actor.turn import Turn
from akter.actor.upgrade import Upgrade
from akter.callers import Anonymous, Caller, Principal, System, User
from akter.errors import (
    AccessDenied,
    ActivityOutcomeUnknown,
    ActorBusy,
    AkterError,
    CommandConflict,
    CommandExpired,
    CommandRejected,
    CompensationFailed,
    ConfigurationError,
    CorruptRecord,
    DatabaseUnavailable,
    DeclarationError,
    Defect,
    EffectDefect,
    EmbeddedServerError,
    EventTooLarge,
    ExecutionKeyConflict,
    ExecutionNotResolvable,
    ExecutionNotRetryable,
    IncompatibleStoredData,
    InternalCommand,
    Interrupted,
    InvalidActorId,
    InvalidCommandId,
    InvalidExecutionId,
    InvalidExecutionKey,
    InvalidInput,
    InvalidResolution,
    InvalidTimerKey,
    PayloadTooLarge,
    ResultTimeout,
    ResultTooLarge,
    SchemaError,
    SchemaTooNew,
    StateTooLarge,
    TurnClosed,
    UndeliverableIntent,
    UnknownCommand,
    UnknownSchedule,
)
from akter.ids import ActorRef, CommandId
from akter.operate.query import ExecutionFilter
from akter.workflow.activity import ActivityContext, activity_context
from akter.workflow.children import ChildHandle, ChildStep
from akter.workflow.context import WorkflowContext
from akter.workflow.declare import (
    ActivityStep,
    Actor,
    Backoff,
    RaceStep,
    Retry,
    SleepStep,
    Versions,
    WaitStep,
    Workflow,
    constant,
    exponential,
)
from akter.workflow.effects import all_ as all
from akter.workflow.key_policy import KeyReuse
from akter.workflow.run import Run, Status
from akter.workflow.schedule_admin import ScheduleInfo, Schedules
from akter.workflow.schedules import Schedule
from akter.workflow.schedules import enable as enable_schedules

if TYPE_CHECKING:
    from akter.app import App
    from akter.outbox.relay import Relay, RelaySettings
del TYPE_CHECKING  # not a public name

#: the public names imported on first use, and the module each comes from
_LAZY = {"App": "akter.app", "Relay": "akter.outbox.relay", "RelaySettings": "akter.outbox.relay"}


def __getattr__(name: str) -> object:
    import importlib

    if name not in _LAZY:
        raise AttributeError(f"module 'akter' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # imported once: the next use finds it as any other name
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "AccessDenied",
    "ActivityContext",
    "ActivityOutcomeUnknown",
    "ActivityStep",
    "Actor",
    "ActorBusy",
    "ActorHandle",
    "ActorRef",
    "AkterError",
    "Anonymous",
    "App",
    "Backoff",
    "Caller",
    "ChildHandle",
    "ChildStep",
    "Client",
    "Command",
    "CommandConflict",
    "CommandExpired",
    "CommandId",
    "CommandRejected",
    "CompensationFailed",
    "ConfigurationError",
    "CorruptRecord",
    "DatabaseUnavailable",
    "DeclarationError",
    "Defect",
    "EffectDefect",
    "EmbeddedServerError",
    "Event",
    "EventTooLarge",
    "ExecutionFilter",
    "ExecutionKeyConflict",
    "ExecutionNotResolvable",
    "ExecutionNotRetryable",
    "IncompatibleStoredData",
    "InternalCommand",
    "Interrupted",
    "InvalidActorId",
    "InvalidCommandId",
    "InvalidExecutionId",
    "InvalidExecutionKey",
    "InvalidInput",
    "InvalidResolution",
    "InvalidTimerKey",
    "KeyReuse",
    "PayloadTooLarge",
    "Principal",
    "Query",
    "RaceStep",
    "Relay",
    "RelaySettings",
    "ResultTimeout",
    "ResultTooLarge",
    "Retry",
    "Run",
    "Schedule",
    "ScheduleInfo",
    "Schedules",
    "SchemaError",
    "SchemaTooNew",
    "SleepStep",
    "StateTooLarge",
    "Status",
    "SyncClient",
    "System",
    "Turn",
    "TurnClosed",
    "UndeliverableIntent",
    "UnknownCommand",
    "UnknownSchedule",
    "Upgrade",
    "User",
    "Versions",
    "View",
    "WaitStep",
    "Workflow",
    "WorkflowContext",
    "activity_context",
    "all",
    "allow_all",
    "constant",
    "deny_anonymous",
    "enable_schedules",
    "exponential",
    "users_only",
]
