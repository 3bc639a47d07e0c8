"""The public surface is curated: this test pins it, so a change to it is a deliberate one.

Why each name is public (and why others are not) is written at the top of ``akter/__init__.py``.
"""

from __future__ import annotations

import builtins
import inspect
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import akter

ROOT = Path(__file__).resolve().parents[2]

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

#: attributes of ``akter`` that are public but kept out of ``__all__``: ``akter.all`` would shadow
#: the builtin under ``from akter import *``
OUT_OF_ALL = {"all"}

#: classes akter hands out (from ``app.client()``, a start, a handler's or body's arguments) and
#: users only annotate with: their constructors may take akter's internal parts
HANDED_OUT = {
    "ActivityContext",
    "ActorHandle",
    "ChildHandle",
    "Client",
    "Run",
    "ScheduleInfo",
    "Schedules",
    "SyncClient",
}


def test_the_public_surface_is_exactly_the_pinned_list_of_at_most_60_names() -> None:
    assert sorted(akter.__all__) == PUBLIC
    assert len(set(akter.__all__)) == len(akter.__all__), "a name is exported twice"
    assert len(PUBLIC) <= 60


def test_nothing_public_is_left_out_of_all() -> None:
    public = {name for name in dir(akter) if not name.startswith("_")}
    # A submodule becomes an attribute of the package once anything imports it: pytest's
    # `-p akter.pytest_plugin` before any test runs, other tests (akter.cli, akter.inspect) in
    # whatever order the run takes. So submodules are told apart by type, not listed.
    submodules = {name for name in public if isinstance(getattr(akter, name), types.ModuleType)}
    assert "pytest_plugin" in submodules
    assert public - submodules == set(PUBLIC) | OUT_OF_ALL


def test_akter_all_is_an_attribute_that_a_star_import_leaves_out() -> None:
    namespace: dict[str, Any] = {}
    exec("from akter import *", namespace)  # what a user's star import binds
    assert "all" not in namespace
    assert callable(akter.all)
    assert akter.all is not builtins.all


def test_every_export_resolves() -> None:
    for name in akter.__all__:
        assert getattr(akter, name) is not None, name


def test_the_clients_app_hands_out_are_the_exported_classes() -> None:
    # A user who annotates `client: akter.Client` gets every method the client has, and the
    # names in reprs and tracebacks are the public ones
    for name in ("Client", "SyncClient", "ActorHandle"):
        cls = getattr(akter, name)
        assert cls.__name__ == name
        assert cls.__qualname__ == name
    hints = inspect.get_annotations(akter.App.client)["return"]
    assert hints == "AsyncIterator[Client]"
    assert inspect.get_annotations(akter.App.sync_client)["return"] == "Iterator[SyncClient]"
    assert inspect.get_annotations(akter.Client.actor)["return"] == "ActorHandle[S]"
    assert sys.modules[akter.App.__module__].Client is akter.Client
    assert sys.modules[akter.App.__module__].SyncClient is akter.SyncClient
    for method in ("start", "run", "send", "query", "events", "wait_for"):
        assert callable(getattr(akter.ActorHandle, method)), method
    for method in ("actor", "run", "with_connection", "executions", "timeline", "resolve"):
        assert callable(getattr(akter.Client, method)), method
        assert callable(getattr(akter.SyncClient, method)), method
    assert isinstance(akter.Client.schedules, property)
    # inside the application's transaction too: the joined clients are public clients
    assert inspect.get_annotations(akter.Client.with_connection)["return"] == "Self"
    joined = inspect.get_annotations(akter.SyncClient.with_connection)["return"]
    assert issubclass(getattr(sys.modules[akter.SyncClient.__module__], joined), akter.SyncClient)


def _documentation() -> str:
    """The code in README.md and docs/: inline code spans and fenced blocks, where an API is
    named (a word of prose, "User" or "System", does not document ``akter.User``)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    text = "\n".join(p.read_text() for p in pages)
    fenced = re.findall(r"^```.*?^```", text, flags=re.DOTALL | re.MULTILINE)
    prose = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    return "\n".join([*fenced, *re.findall(r"`[^`\n]+`", prose)])


def test_every_public_name_is_documented() -> None:
    code = _documentation()
    missing = [n for n in [*PUBLIC, *OUT_OF_ALL] if not re.search(rf"(?<![\w]){re.escape(n)}\b", code)]
    assert missing == [], f"public names no page of README.md or docs/ shows in code: {missing}"


def _words(annotation: object) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", annotation if isinstance(annotation, str) else repr(annotation)))


def _akter_class(name: str, home: types.ModuleType) -> type | None:
    """The akter class an annotation's word names, looked up in the module that wrote it, then
    (for names it imports only for type checking) in every loaded akter module."""
    found = getattr(home, name, None)
    if isinstance(found, type):
        return found if found.__module__.startswith("akter") and not _is_protocol(found) else None
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("akter"):
            found = getattr(module, name, None)
            if isinstance(found, type) and found.__module__.startswith("akter") and not _is_protocol(found):
                return found
    return None


def _is_protocol(cls: type) -> bool:
    """A protocol (``akter.actor._types``) is met by shape: it names no class a user must make."""
    return bool(getattr(cls, "_is_protocol", False))


def test_no_exported_class_needs_an_internal_type_to_be_constructed() -> None:
    # a parameter may name an internal base of an exported class (``App`` takes the kernel's
    # ``Actor``, which ``akter.Actor`` is), never a class a user has no public way to make
    exported = [c for c in (getattr(akter, n) for n in PUBLIC) if isinstance(c, type)]
    leaks = []
    for name in PUBLIC:
        cls = getattr(akter, name)
        if not isinstance(cls, type) or name in HANDED_OUT or issubclass(cls, BaseException):
            continue
        home = sys.modules[cls.__module__]
        for param in inspect.signature(cls).parameters.values():
            if param.default is not inspect.Parameter.empty or param.kind in (
                param.VAR_POSITIONAL,
                param.VAR_KEYWORD,
            ):
                continue
            for word in _words(param.annotation):
                internal = _akter_class(word, home)
                if internal is not None and not any(issubclass(c, internal) for c in exported):
                    leaks.append(f"{name}({param.name}: {param.annotation})")
    assert leaks == [], leaks


def _signatures() -> Iterator[object]:
    """Every annotation of the public functions, and of the public methods and properties of
    the exported classes."""
    for name in [*PUBLIC, *OUT_OF_ALL]:
        value = getattr(akter, name)
        members = [value] if not isinstance(value, type) else [v for _, v in inspect.getmembers(value)]
        for member in members:
            function = member.fget if isinstance(member, property) else member
            if callable(function) and not isinstance(function, type):
                yield from getattr(function, "__annotations__", {}).values()


def test_every_handed_out_class_is_what_a_public_call_hands_out() -> None:
    words = set().union(*(_words(a) for a in _signatures()))
    assert HANDED_OUT - words == set(), HANDED_OUT - words


def test_every_akter_error_derives_from_the_root() -> None:
    errors = [getattr(akter, n) for n in akter.__all__ if isinstance(getattr(akter, n), type)]
    for cls in errors:
        if issubclass(cls, Exception) and cls.__module__ == "akter.errors":
            assert issubclass(cls, akter.AkterError), cls
