"""akter: durable workflows as members of actors, stored in PostgreSQL.

The public surface is exactly ``__all__`` (pinned by ``tests/unit/test_exports.py``); everything
else is internal and may change without notice.
"""

from akter.actor.client import ActorHandle, Client, SyncClient
from akter.actor.declare import Actor, Command, allow_all, deny_anonymous, users_only
from akter.actor.turn import Turn
from akter.app import App
from akter.callers import Anonymous, Caller, Principal, System, User
from akter.errors import (
    AccessDenied,
    ActivityOutcomeUnknown,
    ActorBusy,
    AkterError,
    CommandConflict,
    CommandExpired,
    CommandRejected,
    ConfigurationError,
    CorruptRecord,
    DeclarationError,
    Defect,
    EffectDefect,
    EmbeddedServerError,
    InternalCommand,
    Interrupted,
    InvalidActorId,
    InvalidCommandId,
    InvalidExecutionId,
    InvalidExecutionKey,
    InvalidInput,
    InvalidTimerKey,
    ResultTimeout,
    SchemaError,
    SchemaTooNew,
    StateTooLarge,
    TurnClosed,
    UndeliverableIntent,
    UnknownCommand,
)
from akter.ids import ActorRef, CommandId
from akter.outbox.relay import Relay, RelaySettings
from akter.workflow.activity import ActivityContext, activity_context
from akter.workflow.context import WorkflowContext
from akter.workflow.declare import Backoff, Retry, Versions, Workflow, constant, exponential
from akter.workflow.effects import all_ as all
from akter.workflow.run import Run, Status

__all__ = [
    "AccessDenied",
    "ActivityContext",
    "ActivityOutcomeUnknown",
    "Actor",
    "ActorBusy",
    "ActorHandle",
    "ActorRef",
    "AkterError",
    "Anonymous",
    "App",
    "Backoff",
    "Caller",
    "Client",
    "Command",
    "CommandConflict",
    "CommandExpired",
    "CommandId",
    "CommandRejected",
    "ConfigurationError",
    "CorruptRecord",
    "DeclarationError",
    "Defect",
    "EffectDefect",
    "EmbeddedServerError",
    "InternalCommand",
    "Interrupted",
    "InvalidActorId",
    "InvalidCommandId",
    "InvalidExecutionId",
    "InvalidExecutionKey",
    "InvalidInput",
    "InvalidTimerKey",
    "Principal",
    "Relay",
    "RelaySettings",
    "ResultTimeout",
    "Retry",
    "Run",
    "SchemaError",
    "SchemaTooNew",
    "StateTooLarge",
    "Status",
    "SyncClient",
    "System",
    "Turn",
    "TurnClosed",
    "UndeliverableIntent",
    "UnknownCommand",
    "User",
    "Versions",
    "Workflow",
    "WorkflowContext",
    "activity_context",
    "all",
    "allow_all",
    "constant",
    "deny_anonymous",
    "exponential",
    "users_only",
]
