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
    ActorBusy,
    AkterError,
    CommandConflict,
    CommandExpired,
    CommandRejected,
    ConfigurationError,
    CorruptRecord,
    DeclarationError,
    Defect,
    EmbeddedServerError,
    InternalCommand,
    InvalidActorId,
    InvalidCommandId,
    InvalidExecutionId,
    InvalidExecutionKey,
    InvalidInput,
    InvalidTimerKey,
    SchemaError,
    SchemaTooNew,
    StateTooLarge,
    TurnClosed,
    UndeliverableIntent,
    UnknownCommand,
)
from akter.ids import ActorRef, CommandId
from akter.outbox.relay import Relay, RelaySettings

__all__ = [
    "AccessDenied",
    "Actor",
    "ActorBusy",
    "ActorHandle",
    "ActorRef",
    "AkterError",
    "Anonymous",
    "App",
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
    "EmbeddedServerError",
    "InternalCommand",
    "InvalidActorId",
    "InvalidCommandId",
    "InvalidExecutionId",
    "InvalidExecutionKey",
    "InvalidInput",
    "InvalidTimerKey",
    "Principal",
    "Relay",
    "RelaySettings",
    "SchemaError",
    "SchemaTooNew",
    "StateTooLarge",
    "SyncClient",
    "System",
    "Turn",
    "TurnClosed",
    "UndeliverableIntent",
    "UnknownCommand",
    "User",
    "allow_all",
    "deny_anonymous",
    "users_only",
]
