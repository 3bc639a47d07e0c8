"""akter: durable workflows as members of actors, stored in PostgreSQL.

The public surface is exactly ``__all__`` (pinned by ``tests/unit/test_exports.py``, at most 60
names, each documented in ``README.md`` or ``docs/``); everything else is internal and may change
without notice. What is public, and why:

- **What users declare** (``Actor``, ``Workflow``, ``Command``, ``Query``, ``Upgrade``, ``Retry``,
  ``Versions``, ``KeyReuse``, ``Schedule``, ``enable_schedules``, ``users_only``), **what their
  handlers and bodies receive** (``Turn``, ``View``, ``Event``, ``WorkflowContext``,
  ``ActivityContext`` / ``activity_context``) and **who calls** (``Caller``, ``Principal``,
  ``User``, ``Anonymous``, ``System``, ``ActorRef``).
- **What akter hands out**, under the names of the classes it hands out: ``App``;
  ``app.client()`` gives an ``akter.Client``, ``app.sync_client()`` an ``akter.SyncClient``,
  ``client.actor(...)`` an ``akter.ActorHandle``; a start gives a ``Run`` (``run.poll()`` a
  ``Status``), a child start a ``ChildHandle``, ``client.schedules`` the ``Schedules`` (listing
  ``ScheduleInfo``). The kernel's and the workflow layer's halves of the clients carry other names
  (``akter.actor.client.KernelClient``, ``akter.workflow.client.run.WorkflowClient``), so that
  ``client: akter.Client`` has every method ``app.client()``'s client has. Users annotate with
  these; they never construct them. ``ActivityStep`` is what ``wf.activity(...)`` declares, for
  helpers that return one; the other step kinds are never annotated and stay internal.
- **What users pass**: ``ExecutionFilter`` (the operator's queries) and ``RelaySettings``, the
  one argument of ``app.relay(...)`` (and the flags of ``akter relay``): a plain value, the only
  way to set an in-process relay's heartbeat, leases and attempts. ``Relay`` itself is not
  public: its constructor takes the engine's internal ``Sender``, and users get one from
  ``app.relay()`` only.
- **Retry policies** are built by ``Retry`` alone: ``Retry(times=3)``,
  ``Retry.exponential(base, times=...)``, ``Retry.constant(delay, times=...)``; the backoff they
  carry is not a name of its own.
- **Exceptions: those a user catches, or sees in a stored outcome** (``Failure(...)`` of a send or
  a run), and the bases the rest are caught by. ``AkterError`` is the root; ``InvalidInput``,
  ``CommandRejected``, ``ConfigurationError`` and ``SchemaError`` group the finer classes
  (``UnknownCommand``, ``CommandConflict``, ``InternalCommand``, ``EmbeddedServerError``,
  ``SchemaTooNew``, ...), which still exist in ``akter.errors``, where akter raises them. akter's
  own defects (``TurnClosed``, ``InternalCommand``, ``EffectDefect``, ``ResultTooLarge`` — the
  last two reach users as the ``Defect`` of an outcome) and the relay's ``UndeliverableIntent``
  (a row's ``last_error``, never raised to a caller) are not exported.
- ``akter.all`` (run branches concurrently, ``await akter.all(a, b)``) is an attribute but not in
  ``__all__``: under ``from akter import *`` it would shadow the builtin ``all``.

``App`` and ``RelaySettings`` are imported when first used (``__getattr__``), so that a process
that needs neither — ``akter migrate``, a script that only declares — does not load the relay and
the composition root.
"""

from typing import TYPE_CHECKING

from akter.actor.declare import Command, users_only
from akter.actor.query import Event, Query, View
from akter.actor.turn import Turn
from akter.actor.upgrade import Upgrade
from akter.callers import Anonymous, Caller, Principal, System, User
from akter.errors import (
    AccessDenied,
    ActivityOutcomeUnknown,
    ActorBusy,
    AkterError,
    CommandExpired,
    CommandRejected,
    CompensationFailed,
    ConfigurationError,
    CorruptRecord,
    DatabaseUnavailable,
    DeclarationError,
    Defect,
    EventTooLarge,
    ExecutionKeyConflict,
    IncompatibleStoredData,
    Interrupted,
    InvalidExecutionId,
    InvalidInput,
    PayloadTooLarge,
    ResultTimeout,
    SchemaError,
    StateTooLarge,
)
from akter.ids import ActorRef
from akter.operate.client import ActorHandle, Client, SyncClient
from akter.operate.query import ExecutionFilter
from akter.workflow.api.activity import ActivityContext, activity_context
from akter.workflow.api.actor import Actor
from akter.workflow.api.declare import ActivityStep, ChildHandle, Workflow, WorkflowContext
from akter.workflow.api.effects import all_ as all  # noqa: F401 -- public as akter.all, out of __all__
from akter.workflow.api.policies import KeyReuse, Retry, Versions
from akter.workflow.api.schedules import Schedule
from akter.workflow.api.schedules import enable as enable_schedules
from akter.workflow.client.run import Run, Status
from akter.workflow.client.schedule_admin import ScheduleInfo, Schedules

if TYPE_CHECKING:
    from akter.app import App
    from akter.outbox.relay import RelaySettings
del TYPE_CHECKING  # not a public name

#: the public names imported on first use, and the module each comes from
_LAZY = {"App": "akter.app", "RelaySettings": "akter.outbox.relay"}


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
    "Caller",
    "ChildHandle",
    "Client",
    "Command",
    "CommandExpired",
    "CommandRejected",
    "CompensationFailed",
    "ConfigurationError",
    "CorruptRecord",
    "DatabaseUnavailable",
    "DeclarationError",
    "Defect",
    "Event",
    "EventTooLarge",
    "ExecutionFilter",
    "ExecutionKeyConflict",
    "IncompatibleStoredData",
    "Interrupted",
    "InvalidExecutionId",
    "InvalidInput",
    "KeyReuse",
    "PayloadTooLarge",
    "Principal",
    "Query",
    "RelaySettings",
    "ResultTimeout",
    "Retry",
    "Run",
    "Schedule",
    "ScheduleInfo",
    "Schedules",
    "SchemaError",
    "StateTooLarge",
    "Status",
    "SyncClient",
    "System",
    "Turn",
    "Upgrade",
    "User",
    "Versions",
    "View",
    "Workflow",
    "WorkflowContext",
    "activity_context",
    "enable_schedules",
    "users_only",
]
