"""Actor type declarations: ``Actor``, its commands, its events and its access policy.

Declarations live at module level and are validated when made: one ``DeclarationError`` lists
every problem at once (a missing annotation, a duplicate name, a state type that cannot be built
empty, every field of a state, event, payload, result or error type the codec cannot store, by its
path: ``Cart.total: complex ...``). Nothing here touches the database; ``drive.py`` runs a
declared command as a turn (the sequence of ``plan.py``) and ``client.py`` addresses declared
actors. Workflow members are added from above: ``akter.Actor`` is the workflow layer's subclass
of this ``Actor`` (``akter.workflow.api.actor.Actor``), which this module never imports.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar, overload

import attrs

from akter import codec, tagged
from akter.actor.limits import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_MAX_RESULT_BYTES
from akter.actor.query import Query, View, recent_problems
from akter.actor.turn import Turn
from akter.actor.upgrade import Upgrade, chain_of, declaration_problems
from akter.callers import Anonymous, Caller, System, User
from akter.errors import DeclarationError, Defect
from akter.ids import MAX_ACTOR_TYPE_BYTES

S = TypeVar("S")
I = TypeVar("I")  # noqa: E741 -- the conventional name of a command's input type
O = TypeVar("O")  # noqa: E741 -- the conventional name of an output type

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}")
RESERVED_PREFIX = "akter."
DEFAULT_MAX_STATE_BYTES = 64 * 1024

AccessPolicy = Callable[[Caller, "Command[Any, Any, Any]"], bool]


def allow_all(caller: Caller, command: Command[Any, Any, Any]) -> bool:
    """The default policy: any caller may send any public command. Internal commands stay
    System-only whatever the policy says."""
    return True


def users_only(caller: Caller, command: Command[Any, Any, Any]) -> bool:
    """Authenticated users and akter itself; anonymous callers are refused."""
    return isinstance(caller, User | System)


def deny_anonymous(caller: Caller, command: Command[Any, Any, Any]) -> bool:
    return not isinstance(caller, Anonymous)


@attrs.frozen(eq=False)
class Command(Generic[S, I, O]):
    """A declared command: its handler runs as a turn on one actor of ``actor``'s type."""

    actor: Actor[S]
    name: str
    input: type[I]
    output: Any
    errors: tuple[type[Exception], ...]
    internal: bool
    handler: Callable[[Turn[S], I], O]
    #: safe to deliver again under a fresh command id: the handler is idempotent by its actor's
    #: own state, so a staged intent of it whose id expired is renewed by the relay, never
    #: parked for its age (``akter.outbox.delivery``). Only akter's own commands set it.
    renewable: bool = False

    def error_named(self, name: str) -> type[Exception] | None:
        return tagged.error_class(name, self.errors)

    def __call__(self, turn: Turn[S], payload: I) -> O:
        return self.handler(turn, payload)

    def __repr__(self) -> str:
        return f"<command {self.actor.name}.{self.name}>"


def _handler_types(handler: Callable[..., Any], problems: list[str]) -> tuple[Any, Any]:
    """The payload and output types from a handler's annotations; problems are appended."""
    if not callable(handler):
        problems.append("the handler is not callable")
        return None, None
    if inspect.iscoroutinefunction(handler):
        problems.append("command handlers run in memory inside the turn: use def, not async def")
    params = list(inspect.signature(handler).parameters.values())
    if len(params) != 2:
        problems.append(f"the handler takes (turn, payload); it takes {len(params)} parameters")
    try:
        hints = typing.get_type_hints(handler)
    except (NameError, TypeError) as exc:
        problems.append(f"its annotations cannot be resolved: {exc}")
        hints = {}
    payload_type: Any = None
    if len(params) >= 2:
        payload_type = hints.get(params[1].name)
        if payload_type is None:
            problems.append(f"annotate the payload parameter {params[1].name!r} with its type")
        else:
            problems.extend(codec.unsupported(payload_type, "payload"))
    if "return" not in hints:
        problems.append("annotate the handler's return type (-> None when it returns nothing)")
    else:
        problems.extend(codec.unsupported(hints["return"], "result"))
    return payload_type, hints.get("return")


def _error_problems(errors: Sequence[type[Exception]]) -> list[str]:
    problems = []
    for err in errors:
        if not (isinstance(err, type) and issubclass(err, Exception)):
            problems.append(f"declared error {err!r} is not an Exception subclass")
        elif not attrs.has(err):
            problems.append(
                f"declared error {err.__name__} must be an attrs class "
                f"(@attrs.frozen(auto_exc=True)) so its fields survive storage"
            )
        else:
            problems.extend(codec.unsupported(err))
    if len({getattr(e, "__name__", repr(e)) for e in errors}) != len(errors):
        problems.append("two declared errors share a class name")
    return problems


def _is_attrs_class(tp: object) -> bool:
    return isinstance(tp, type) and attrs.has(tp)


def _can_build_empty(tp: type) -> bool:
    return all(f.default is not attrs.NOTHING or not f.init for f in attrs.fields(tp))


class CommandDecorator(Protocol[S]):
    """What ``@Actor.command(...)`` with options returns: a decorator generic in the handler."""

    def __call__(self, fn: Callable[[Turn[S], I], O], /) -> Command[S, I, O]: ...


class QueryDecorator(Protocol[S]):
    """What ``@Actor.query(...)`` with options returns."""

    def __call__(self, fn: Callable[[View[S], I], O], /) -> Query[S, I, O]: ...


class Actor(Generic[S]):
    """An actor type: a name, a state type, the event types it emits, its commands.

    ``initial`` builds the state of an actor that has never committed a turn; by default the
    state type is called with no arguments, so every field needs a default.
    ``max_state_bytes`` caps the state's encoded UTF-8 JSON size (default 64 KiB);
    ``max_payload_bytes`` each command payload, workflow inputs included, ``max_event_bytes``
    each event and ``max_result_bytes`` each activity result of its workflows (256 KiB each by
    default; ``akter.actor.limits`` says where each is checked).
    ``upgrade``: how states stored in older shapes of the state type are read — one
    ``akter.Upgrade(OldType, function)`` or a chain of them, oldest first (``akter.actor.upgrade``)."""

    def __init__(
        self,
        name: str,
        *,
        state: type[S],
        events: Sequence[type] = (),
        initial: Callable[[], S] | None = None,
        access: AccessPolicy = allow_all,
        max_state_bytes: int = DEFAULT_MAX_STATE_BYTES,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        upgrade: Upgrade[Any] | Sequence[Upgrade[Any]] = (),
    ) -> None:
        problems: list[str] = []
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            problems.append(
                f"name {name!r} must start with a letter or _ and use letters, digits, _ . : - "
                f"(at most {MAX_ACTOR_TYPE_BYTES} characters)"
            )
        elif name.startswith(RESERVED_PREFIX):
            problems.append(f"name {name!r} uses the reserved prefix {RESERVED_PREFIX!r}")
        if not _is_attrs_class(state):
            problems.append(f"state type {state!r} must be an attrs class")
        else:
            problems.extend(codec.unsupported(state))
            if initial is None and not _can_build_empty(state):
                problems.append(
                    f"state type {state.__name__} has fields without defaults; give every field a "
                    f"default or pass initial="
                )
        seen: dict[str, type] = {}
        for ev in events:
            if not _is_attrs_class(ev):
                problems.append(f"event type {ev!r} must be an attrs class")
                continue
            problems.extend(codec.unsupported(ev))
            if ev.__name__ in seen:
                problems.append(f"two event types are named {ev.__name__}")
            seen[ev.__name__] = ev
        upgrades = chain_of(upgrade)
        problems.extend(declaration_problems(state, upgrades))
        if not callable(access):
            problems.append("access must be a callable (caller, command) -> bool")
        caps = {
            "max_state_bytes": max_state_bytes,
            "max_payload_bytes": max_payload_bytes,
            "max_event_bytes": max_event_bytes,
            "max_result_bytes": max_result_bytes,
        }
        problems.extend(
            f"{cap} must be a positive int, got {value!r}"
            for cap, value in caps.items()
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0
        )
        if problems:
            raise DeclarationError(f"Actor {name!r}", problems)
        self.name = name
        self.state_type: type[S] = state
        self.event_types: dict[str, type] = seen
        self._initial = initial
        self.access = access
        self.max_state_bytes = max_state_bytes
        self.max_payload_bytes = max_payload_bytes
        self.max_event_bytes = max_event_bytes
        self.max_result_bytes = max_result_bytes
        #: how stored states of older shapes are read, oldest first
        self.upgrades: tuple[Upgrade[Any], ...] = upgrades
        self.commands: dict[str, Command[S, Any, Any]] = {}
        #: read-only queries (``akter.actor.query``), by name
        self.queries: dict[str, Query[S, Any, Any]] = {}
        self._declare_members()

    def _declare_members(self) -> None:
        """Where a subclass of a layer above (the workflow layer's ``Actor``) sets up the members
        it adds, before any of them is declared."""

    def initial_state(self) -> S:
        return self._initial() if self._initial is not None else self.state_type()

    def event_tag(self, event: object) -> str:
        tag = type(event).__name__
        if self.event_types.get(tag) is not type(event):
            raise Defect(
                f"{self.name} does not declare event type {type(event).__qualname__}; "
                f"declared: {sorted(self.event_types)}",
                error_type="UndeclaredEvent",
            )
        return tag

    @overload
    def command(self, fn: Callable[[Turn[S], I], O]) -> Command[S, I, O]: ...

    @overload
    def command(
        self,
        *,
        name: str | None = None,
        errors: Sequence[type[Exception]] = (),
        internal: bool = False,
    ) -> CommandDecorator[S]: ...

    def command(
        self,
        fn: Callable[[Turn[S], Any], Any] | None = None,
        *,
        name: str | None = None,
        errors: Sequence[type[Exception]] = (),
        internal: bool = False,
    ) -> Any:
        """Declare a command. The handler is ``def handler(turn, payload) -> output``; the payload
        type comes from the second parameter's annotation, the output from the return annotation.
        A handler raising one of ``errors`` is a declared failure; any other exception a defect."""

        def register(handler: Callable[[Turn[S], Any], Any]) -> Command[S, Any, Any]:
            cmd = self._build_command(handler, name, errors, internal)
            self.commands[cmd.name] = cmd
            return cmd

        return register(fn) if fn is not None else register

    def _build_command(
        self,
        handler: Callable[[Turn[S], I], O],
        name: str | None,
        errors: Sequence[type[Exception]],
        internal: bool,
        *,
        allow_reserved: bool = False,
        renewable: bool = False,
    ) -> Command[S, I, O]:
        cmd_name = str(name or getattr(handler, "__name__", ""))
        subject = f"command {self.name}.{cmd_name or handler!r}"
        problems: list[str] = []
        if not _NAME.fullmatch(cmd_name):
            problems.append(f"name {cmd_name!r} is not a valid command name")
        elif cmd_name.startswith(RESERVED_PREFIX) and not allow_reserved:
            problems.append(f"name {cmd_name!r} uses the reserved prefix {RESERVED_PREFIX!r}")
        if cmd_name in self.commands:
            problems.append(f"{self.name} already declares a command named {cmd_name!r}")
        payload_type, output = _handler_types(handler, problems)
        problems.extend(_error_problems(errors))
        if problems:
            raise DeclarationError(subject, problems)
        return Command(
            actor=self,
            name=cmd_name,
            input=payload_type,
            output=None if output is type(None) else output,
            errors=tuple(errors),
            internal=internal,
            handler=handler,
            renewable=renewable,
        )

    def internal_command(
        self,
        name: str,
        handler: Callable[[Turn[S], I], O],
        errors: Sequence[type[Exception]] = (),
        *,
        renewable: bool = False,
    ) -> Command[S, I, O]:
        """Register an internal (System-only) command under a reserved ``akter.`` name. Used by
        the layers above the kernel (workflow resumes, staged starts). ``renewable``: see
        ``Command.renewable``; set it only for a handler idempotent by its actor's state."""
        cmd = self._build_command(handler, name, errors, True, allow_reserved=True, renewable=renewable)
        self.commands[cmd.name] = cmd
        return cmd

    def member_command(
        self, name: str, handler: Callable[[Turn[S], I], O], *, renewable: bool = False
    ) -> Command[S, I, O]:
        """Register a public command under a reserved ``akter.`` name: one a member adds for its
        users (a workflow's interrupt). Any caller may send it, under the access policy."""
        cmd = self._build_command(handler, name, (), False, allow_reserved=True, renewable=renewable)
        self.commands[cmd.name] = cmd
        return cmd

    @overload
    def query(self, fn: Callable[[View[S], I], O]) -> Query[S, I, O]: ...

    @overload
    def query(
        self, *, name: str | None = None, errors: Sequence[type[Exception]] = (), recent: int = 0
    ) -> QueryDecorator[S]: ...

    def query(
        self,
        fn: Callable[[View[S], Any], Any] | None = None,
        *,
        name: str | None = None,
        errors: Sequence[type[Exception]] = (),
        recent: int = 0,
    ) -> Any:
        """Declare a read-only query (``akter.actor.query``): ``def handler(view, payload) ->
        output`` runs on the actor's last committed state and its ``recent`` last events, with
        no transaction that writes, no receipt and no row lock."""

        def register(handler: Callable[[View[S], Any], Any]) -> Query[S, Any, Any]:
            query_name = str(name or getattr(handler, "__name__", ""))
            problems: list[str] = []
            if not _NAME.fullmatch(query_name) or query_name.startswith(RESERVED_PREFIX):
                problems.append(f"name {query_name!r} is not a valid query name")
            if query_name in self.queries or query_name in self.commands:
                problems.append(f"{self.name} already declares a command or query named {query_name!r}")
            payload_type, output = _handler_types(handler, problems)
            problems.extend(_error_problems(errors))
            problems.extend(recent_problems(recent))
            if problems:
                raise DeclarationError(f"query {self.name}.{query_name or handler!r}", problems)
            query: Query[S, Any, Any] = Query(
                actor=self,
                name=query_name,
                input=payload_type,
                output=None if output is type(None) else output,
                errors=tuple(errors),
                recent=recent,
                handler=handler,
            )
            self.queries[query_name] = query
            return query

        return register(fn) if fn is not None else register

    def __repr__(self) -> str:
        return f"<Actor {self.name}>"
