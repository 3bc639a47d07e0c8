"""The public surface is curated: this test pins it, so a change to it is a deliberate one."""

from __future__ import annotations

import types

import akter

#: the public surface, written out: adding or removing a name must change this list
PUBLIC = [
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


def test_the_public_surface_is_exactly_the_pinned_list() -> None:
    assert sorted(akter.__all__) == PUBLIC
    assert len(set(akter.__all__)) == len(akter.__all__), "a name is exported twice"


def test_nothing_public_is_left_out_of_all() -> None:
    public = {name for name in dir(akter) if not name.startswith("_")}
    # A submodule becomes an attribute of the package once anything imports it: pytest's
    # `-p akter.pytest_plugin` before any test runs, other tests (akter.cli, akter.inspect) in
    # whatever order the run takes. So submodules are told apart by type, not listed.
    submodules = {name for name in public if isinstance(getattr(akter, name), types.ModuleType)}
    assert "pytest_plugin" in submodules
    assert public - submodules == set(PUBLIC)


def test_every_export_resolves() -> None:
    for name in akter.__all__:
        assert getattr(akter, name) is not None, name


def test_every_akter_error_derives_from_the_root() -> None:
    errors = [getattr(akter, n) for n in akter.__all__ if isinstance(getattr(akter, n), type)]
    for cls in errors:
        if issubclass(cls, Exception) and cls.__module__ == "akter.errors":
            assert issubclass(cls, akter.AkterError), cls
