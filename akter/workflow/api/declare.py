"""Workflow members: the ``Workflow`` ``Actor.workflow(...)`` builds, its step constructors, its
body and the ``WorkflowContext`` the body runs with.

A workflow is declared on an actor type at module level, with static step names, so its manifest
(``manifest.py``) can be derived before anything runs::

    Ship = Shop.workflow("Ship", input=ShipOrder, output=Shipped, errors=[OutOfStock])
    reserve = Ship.activity("reserve", success=Reservation, errors=[OutOfStock], retry=Retry(times=3))
    cool_off = Ship.sleep("cool-off")
    paid = Ship.wait("paid", Paid)
    deadline = Ship.race("paid-or-deadline")

    @Ship.body
    async def ship(wf: WorkflowContext, order: ShipOrder) -> Shipped: ...

A step called from the body returns an effect value (``effects.py``); the driver (``driver.py``)
interprets it. Declaring a step while a body runs is a defect ("unregistered step"): a step
created at run time would have no stable identity to replay against. Every type a workflow
stores (input, output, activity results, declared errors' fields) is checked by
``codec.unsupported`` when declared, so an unstorable one is refused here with its path.

This module is the bottom of the declarations, and names none of the modules that build on it
(issue 23: no import cycle in ``akter``):

* The context is here, not in a module of its own: a body's first parameter is a
  ``WorkflowContext`` and ``wf.start`` takes a ``Workflow`` and returns a ``ChildHandle``, so the
  two name each other in their signatures; either one typed structurally would lose a user's
  type check. They are one idea, what a body is declared with and awaits through.
* Declaring the workflow registers its start command (public, named after the member) and its
  operators' commands (public: ``akter.wf.interrupt:<name>``, ``retry``, ``pause``,
  ``unpause``, ``resolve``) on the actor, but from above: each ``Workflow`` calls its actor's
  ``_declare_workflow``, which ``WorkflowActor`` (here) uses to record it and ``akter.Actor``
  (``akter.workflow.api.actor``) overrides to add the commands (``commands.register``). The start a
  command stages (``StartMark``, ``stage_start``) is here, since ``Workflow.stage_start`` is
  ``Turn.start``'s; the commands' payloads are the leaf ``payloads.py``.
* ``Actor.workflow`` and ``Actor.schedule`` are ``akter.workflow.api.actor``'s; the modules under it
  look members up on ``WorkflowActor`` (``workflows_of``).
"""

from __future__ import annotations

import inspect
import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar, cast, overload

import attrs
from returns.maybe import Maybe

from akter import codec, tagged
from akter.actor import limits
from akter.actor.declare import Actor as ActorType
from akter.errors import DeclarationError, EffectDefect
from akter.ids import ExecutionId
from akter.workflow.api.effects import Effect
from akter.workflow.api.policies import KeyReuse, Retry, Versions
from akter.workflow.api.running import current_driver

if TYPE_CHECKING:
    from returns.result import Result

    from akter.actor.declare import Command
    from akter.actor.turn import Turn
    from akter.callers import Principal
    from akter.ids import ActorRef
    from akter.workflow.api.history import StepKey
    from akter.workflow.api.payloads import Interrupt, Pause, Resolve, RetryExecution, Unpause

S = TypeVar("S")
I = TypeVar("I")  # noqa: E741 -- a workflow's input type
O = TypeVar("O")  # noqa: E741 -- the conventional name of an output type
T = TypeVar("T")
E = TypeVar("E")

_STEP_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}")


def _name_problems(name: object) -> list[str]:
    """A step name is a str of up to 128 letters, digits, ``_ . : -`` (not starting with the
    punctuation): it keys the step's rows, its manifest entry and its derived command ids."""
    if isinstance(name, str) and _STEP_NAME.fullmatch(name):
        return []
    return [f"step name {name!r} is not valid (a str of letters, digits, _ . : -)"]


def _error_problems(errors: Sequence[type[Exception]]) -> list[str]:
    """Declared errors are attrs exceptions whose every field the codec can store."""
    problems: list[str] = []
    for err in errors:
        if not (isinstance(err, type) and issubclass(err, Exception) and attrs.has(err)):
            problems.append(f"declared error {err!r} must be an attrs Exception class")
        else:
            problems.extend(codec.unsupported(err))
    # an exit records a declared error by its class name; two of one name would replay as
    # whichever is declared first
    names: dict[str, list[str]] = {}
    for err in errors:
        if isinstance(err, type):
            names.setdefault(err.__name__, []).append(f"{err.__module__}.{err.__qualname__}")
    problems.extend(
        f"two declared errors share the class name {name!r} ({', '.join(paths)}); "
        "a recorded error names its class, so it could not replay as the right one"
        for name, paths in names.items()
        if len(paths) > 1
    )
    return problems


@attrs.frozen(eq=False)
class Step:
    workflow: Workflow[Any, Any]
    name: str

    kind = "step"

    @property
    def qualified_name(self) -> str:
        """``Actor.workflow.step``, as logs and errors name it."""
        return f"{self.workflow.actor.name}.{self.workflow.name}.{self.name}"

    def _check_running(self) -> None:
        driver = current_driver()
        if driver is not None and driver.workflow is not self.workflow:
            raise EffectDefect(
                f"step {self.workflow.name}.{self.name} belongs to another workflow than the one running"
            )


@attrs.frozen(eq=False)
class ActivityStep(Step, Generic[T]):
    success: Any = None
    errors: tuple[type[Exception], ...] = ()
    retry: Retry = Retry()
    timeout: timedelta | None = None
    #: an attempt whose outcome cannot be known: "attention" (the execution needs attention,
    #: and a person resolves it) or "fail" (the body raises ``ActivityOutcomeUnknown``)
    on_unknown: str = "attention"

    kind = "activity"

    def __call__(self, fn: Callable[..., T | Awaitable[T]], /, *args: Any, **kwargs: Any) -> Awaitable[T]:
        """``await reserve(fn, *args)``: run ``fn`` once (per attempt), record its result, replay
        it afterwards. ``fn`` may be sync (run in a worker thread) or async."""
        self._check_running()
        return cast("Awaitable[T]", ActivityCall(step=self, fn=fn, args=args, kwargs=kwargs))

    def error_named(self, name: str) -> type[Exception] | None:
        return tagged.error_class(name, self.errors)


@attrs.frozen(eq=False)
class SleepStep(Step):
    kind = "clock"

    def __call__(self, duration: timedelta) -> Awaitable[None]:
        self._check_running()
        if not isinstance(duration, timedelta) or duration < timedelta(0):
            raise EffectDefect(f"sleep {self.name!r} takes a non-negative timedelta, got {duration!r}")
        return cast("Awaitable[None]", Sleep(step=self, duration=duration))


@attrs.frozen(eq=False)
class WaitStep(Step, Generic[E]):
    event: type[E] = object  # type: ignore[assignment]

    kind = "wait"

    def __call__(
        self, where: Callable[[E], bool] | None = None, timeout: timedelta | None = None
    ) -> Awaitable[Maybe[E]]:
        """``await paid(where=..., timeout=...)`` → ``Maybe[Event]``: the lowest-sequence
        matching event of the owner after the execution's cursor, or ``Nothing`` on timeout."""
        self._check_running()
        return cast("Awaitable[Maybe[E]]", Wait(step=self, where=where, timeout=timeout))


@attrs.frozen(eq=False)
class RaceStep(Step):
    kind = "race"

    def run(self, *branches: Any) -> Any:
        """``await deadline.run(a, b, ...)``: the first branch to finish wins; its exit is
        recorded as this step and the others are interrupted."""
        self._check_running()
        if len(branches) < 2:
            raise EffectDefect(f"race {self.name!r} needs at least two branches")
        return Race(step=self, branches=branches)


# ---- the effects a step's call returns (``effects.py`` says what awaiting one does) -----------


@attrs.frozen(eq=False)
class ActivityCall(Effect):
    step: ActivityStep[Any]
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@attrs.frozen(eq=False)
class Sleep(Effect):
    step: SleepStep
    duration: timedelta


@attrs.frozen(eq=False)
class Wait(Effect):
    step: WaitStep[Any]
    where: Callable[[Any], bool] | None
    timeout: timedelta | None


@attrs.frozen(eq=False)
class Race(Effect):
    step: RaceStep
    branches: tuple[Any, ...]


# ---- child steps: a body starts a workflow member and awaits it (``children.py``) -------------

#: what a child does when its parent is interrupted
POLICIES = ("interrupt", "run_on")


@attrs.frozen(eq=False)
class ChildStep(Step, Generic[O]):
    """A declared kind of child: ``Parent.child("name", ChildWorkflow)``. Each ``start`` (or
    ``run``) is an occurrence of it, as each await of an activity is."""

    child: Workflow[Any, O] = attrs.field(default=None)
    on_parent_interrupt: str = "interrupt"

    kind = "child"

    @property
    def success(self) -> Any:
        return self.child.output

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        return self.child.errors

    def start(self, actor_id: str, input: Any) -> Awaitable[ChildHandle[O]]:
        """``await fulfil.start("w-1", line)``: start the child (once; a replay finds it) and
        return its handle."""
        self._check_running()
        if not isinstance(actor_id, str):
            raise EffectDefect(f"child {self.name!r} takes an actor id (str), got {type(actor_id).__name__}")
        if not isinstance(input, self.child.input):
            raise EffectDefect(
                f"child {self.name!r} starts {self.child!r}, which takes a {self.child.input.__name__}, "
                f"got {type(input).__name__}"
            )
        return cast("Awaitable[ChildHandle[O]]", StartChild(step=self, actor_id=actor_id, input=input))

    async def run(self, actor_id: str, input: Any) -> Result[O, Exception]:
        """``await fulfil.run("w-1", line)``: start the child and await its result."""
        handle = await self.start(actor_id, input)
        return await handle.result()


def declare_child(
    workflow: Workflow[Any, Any], name: str, child: Workflow[Any, O], on_parent_interrupt: str
) -> ChildStep[O]:
    problems = []
    if not isinstance(child, Workflow):
        problems.append(f"{child!r} is not a workflow member")
    if on_parent_interrupt not in POLICIES:
        problems.append(f"on_parent_interrupt is one of {POLICIES}, got {on_parent_interrupt!r}")
    if isinstance(child, Workflow) and child.key is not None:
        # a keyed start attaches to the execution its key names, which another parent or a
        # client may have started: one child would then serve two parents, and the second
        # would wait for a finish that never resumes it. The key a child runs under is derived.
        problems.append(
            f"{child!r} declares key=, which a child cannot apply (a child's key is derived from "
            "its parent's start); declare a workflow without key= for children, or send the keyed "
            "start from an activity"
        )
    if problems:
        raise DeclarationError(f"child {workflow.name}.{name}", problems)
    step: ChildStep[O] = ChildStep(
        workflow=workflow, name=name, child=child, on_parent_interrupt=on_parent_interrupt
    )
    workflow._add(step)
    return step


def find_step(parent: Workflow[Any, Any], actor: ActorType[Any], child: Workflow[Any, Any]) -> ChildStep[Any]:
    """The child step ``parent`` declared for ``child`` (what ``wf.start`` uses)."""
    if child.actor is not actor:
        raise EffectDefect(f"{child!r} is not a workflow of {actor.name}")
    found = [s for s in parent.steps.values() if isinstance(s, ChildStep) and s.child is child]
    if len(found) != 1:
        what = "declares no child step" if not found else "declares several child steps"
        raise EffectDefect(
            f"{parent!r} {what} for {child!r}: declare one at module level "
            f"({parent.name}.child('name', {child.name})), or await the step itself"
        )
    return found[0]


@attrs.frozen(eq=False)
class StartChild(Effect):
    step: ChildStep[Any]
    actor_id: str
    input: Any


@attrs.frozen(eq=False)
class ChildHandle(Generic[O]):
    """A started child: ``execution_id``, and ``await handle.result()`` (an effect: the parent
    suspends until the child finishes) → ``Result`` of its output and errors."""

    key: StepKey
    execution_id: str
    step: ChildStep[O]

    def result(self) -> Awaitable[Result[O, Exception]]:
        return cast("Awaitable[Result[O, Exception]]", ChildResult(handle=self))


@attrs.frozen(eq=False)
class ChildResult(Effect):
    """Awaited under the occurrence of the start that made ``handle`` (it has no step of its own:
    awaiting the result twice reads the same record)."""

    handle: ChildHandle[Any]


# ---- the context a body runs with: ``wf`` (the running-driver marker it consults is
# ``running.py``); rebuilt by every pass from the execution's durable record (tenant, principal,
# key, version markers), never from whoever triggered the pass (invariant 9) ----------------


class ContinueAsNew(BaseException):
    """Raised by ``wf.continue_as_new(payload)``; ends the run and starts the next one (the pass
    sends the write, ``continue_as_new.py``)."""

    def __init__(self, payload: Any) -> None:
        self.payload = payload
        super().__init__("continue as new")


class Compensation:
    """A compensated forward step: registered before the body awaits it, so that an undo is
    known even for a step that succeeds after an interrupt abandoned the body."""

    __slots__ = ("effect", "result", "settled", "undo")

    def __init__(self, effect: Any, undo: Callable[[Any], Any]) -> None:
        self.effect = effect
        self.undo = undo
        self.settled = False
        self.result: Any = None


class WorkflowContext:
    """The execution a body runs for. Pure data plus two registries (compensations and
    finalizers) that the driver runs when the execution ends."""

    def __init__(
        self,
        *,
        execution_id: str,
        key: str,
        ref: ActorRef,
        principal: Principal | None,
        versions: dict[str, int],
        run_number: int = 1,
    ) -> None:
        from akter.workflow.api.determinism import ReplaySafeLogger

        self.execution_id = execution_id
        #: which run of the execution this is: 1, then one more per continue-as-new or new run
        self.run_number = run_number
        #: a logger that emits only past a step this pass settled, never on replay
        self.log = ReplaySafeLogger(self)
        self.key = key
        self.ref = ref
        self.principal = principal
        self._versions = versions
        self.compensations: list[Compensation] = []
        self.finalizers: list[Callable[[], Any]] = []

    def now(self) -> Awaitable[datetime]:
        """``await wf.now()``: the database clock, recorded the first time and the same on every
        replay (``determinism.py``)."""
        from akter.workflow.api.determinism import Now

        return cast("Awaitable[datetime]", Now())

    def random(self) -> float:
        """A float in [0, 1) derived from the execution and this call's position: the same on
        every replay, and nothing is written (``determinism.py``)."""
        from akter.workflow.api import determinism

        return determinism.random(self)

    def uuid4(self) -> uuid.UUID:
        """A version-4 UUID derived like ``random()``: the same on every replay."""
        from akter.workflow.api import determinism

        return determinism.uuid4(self)

    def continue_as_new(self, payload: Any) -> NoReturn:
        """End this run and start the next run of the same execution with ``payload``, in one
        fenced transaction that keeps the execution id and its event cursor
        (``continue_as_new.py``). Never returns; compensations do not run, finalizers do."""
        raise ContinueAsNew(payload)

    def version(self, name: str) -> int:
        """The version marker recorded when the execution started (0 if it predates it)."""
        return self._versions.get(name, 0)

    async def compensate(self, effect: Any, undo: Callable[[Any], Any]) -> Any:
        """Await ``effect``; if it succeeds, ``undo(result)`` (which returns an effect, usually an
        activity call) runs should the execution fail or be interrupted — also when the step
        succeeded only after an interrupt arrived. Nothing is undone before its forward step
        settled; a step that never succeeded is not undone. Compensations run in reverse order
        of registration, once, by the pass that records the result; a failing undo is reported
        on the result as ``CompensationFailed``."""
        entry = Compensation(effect, undo)
        self.compensations.append(entry)
        result = await effect
        entry.settled, entry.result = True, result
        return result

    async def start(
        self, actor: ActorType[Any], actor_id: str, workflow: Workflow[I, O], input: I
    ) -> ChildHandle[O]:
        """``await wf.start(Warehouse, "w-1", Fulfil, line)``: start a child execution of
        ``workflow`` (a member of ``actor``) through the child step this workflow declared for
        it (``Parent.child(...)``); returns its ``ChildHandle`` (``await handle.result()``)."""
        return await self._child_step(actor, workflow).start(actor_id, input)

    async def run(
        self, actor: ActorType[Any], actor_id: str, workflow: Workflow[I, O], input: I
    ) -> Result[O, Exception]:
        """``await wf.run(...)``: ``start`` and await the child's result, a ``Result``."""
        return await self._child_step(actor, workflow).run(actor_id, input)

    @staticmethod
    def _child_step(actor: ActorType[Any], workflow: Workflow[Any, O]) -> ChildStep[O]:
        driver = current_driver()
        if driver is None:
            raise RuntimeError("wf.start and wf.run are awaited in a workflow body")
        # the scheduler names the running workflow as ``object`` (``running.py``); it is always
        # the ``Workflow`` whose body is stepped
        return find_step(cast("Workflow[Any, Any]", driver.workflow), actor, workflow)

    def finalizer(self, thunk: Callable[[], Any]) -> None:
        """Register ``thunk()`` (returning an effect) to run once when the execution ends,
        whatever its outcome. Unlike a ``finally:`` block in the body — which runs at every
        suspension, because each pass closes the body's coroutine — a finalizer runs exactly
        once, by the pass that records the result."""
        self.finalizers.append(thunk)


class WorkflowActor(ActorType[S]):
    """An actor type that carries workflow members: the base of ``akter.Actor``
    (``akter.workflow.api.actor``), which adds ``workflow(...)`` and ``schedule(...)``. The kernel's
    ``Actor`` (``akter.actor.declare``) knows commands and events; this type adds the typed
    ``workflows`` declared on it, so the kernel never imports workflows, and the modules below
    ``akter.Actor`` (the member's commands, schedules) look workflows up here."""

    #: the workflow members declared on this type, by name
    workflows: dict[str, Workflow[Any, Any]]

    def _declare_members(self) -> None:
        self.workflows = {}

    def _declare_workflow(self, workflow: Workflow[Any, Any]) -> None:
        """Called by every ``Workflow`` built on this type, once its declaration is checked:
        record it. ``akter.Actor`` also registers the member's commands here, so a workflow is
        registered however it was built."""
        self.workflows[workflow.name] = workflow


def workflows_of(actor: ActorType[Any] | None) -> dict[str, Workflow[Any, Any]]:
    """The workflow members of ``actor`` (none for a kernel-only actor type, or ``None``)."""
    return actor.workflows if isinstance(actor, WorkflowActor) else {}


#: the turn layer a workflow member's commands stage their marks under (read by ``hook.py``)
LAYER = "workflow"


@attrs.frozen
class StartMark:
    execution_id: ExecutionId
    workflow: Workflow[Any, Any]
    payload: Any
    #: named by a key (the workflow's key function, or one given): the key policy applies
    keyed: bool = False
    #: the execution's deadline, from the start (``deadline.py``)
    timeout_ms: int | None = None


def stage_start(
    turn: Turn[Any],
    workflow: Workflow[Any, Any],
    payload: Any,
    key: str | None = None,
    *,
    timeout_ms: int | None = None,
) -> str:
    """Stage a start of ``workflow`` on the turn's actor; return the execution id. Without
    ``timeout_ms`` the workflow's declared timeout (if any) is the deadline."""
    limits.check_payload(workflow.start_command, payload)
    keyed = key is not None or workflow.key is not None
    if timeout_ms is None:
        timeout_ms = workflow.timeout_ms
    if key is None:
        key = workflow.key(payload) if workflow.key is not None else turn.command_id
        n = sum(1 for s in turn.staged.get(LAYER, []) if isinstance(s, StartMark))
        if workflow.key is None and n:
            key = f"{key}/{n}"  # a second default-keyed start in one turn gets its own execution
    eid = ExecutionId(turn.ref, workflow.name, key)
    turn.stage(LAYER, StartMark(eid, workflow, payload, keyed=keyed, timeout_ms=timeout_ms))
    return str(eid)


class Workflow(Generic[I, O]):
    """A workflow member of an actor type. Built by ``Actor.workflow``; its actor registers its
    commands (``commands.register``), which name themselves here."""

    start_command: Command[Any, I, str]
    interrupt_command: Command[Any, Interrupt, None]
    retry_command: Command[Any, RetryExecution, None]
    deadline_command: Command[Any, Interrupt, None]
    start_with_command: Command[Any, Any, str]
    pause_command: Command[Any, Pause, None]
    unpause_command: Command[Any, Unpause, None]
    resolve_command: Command[Any, Resolve, None]

    def __init__(
        self,
        actor: WorkflowActor[Any],
        name: str,
        *,
        input: type[I],
        output: Any = None,
        errors: Sequence[type[Exception]] = (),
        key: Callable[[I], str] | None = None,
        versions: dict[str, Versions] | None = None,
        timeout: timedelta | None = None,
        key_reuse: KeyReuse | None = None,
    ) -> None:
        problems: list[str] = []
        if not isinstance(name, str) or not _STEP_NAME.fullmatch(name) or name.startswith("akter"):
            problems.append(f"workflow name {name!r} is not valid (letters, digits, _ . : -; not akter*)")
            raise DeclarationError(f"workflow {getattr(actor, 'name', actor)}.{name!r}", problems)
        if name in actor.commands:
            problems.append(
                f"{actor.name} already has a command named {name!r}; "
                "the start command takes the member's name"
            )
        if name in actor.workflows:
            problems.append(f"{actor.name} already declares a workflow named {name!r}")
        if not (isinstance(input, type) and attrs.has(input)):
            problems.append(f"input type {input!r} must be an attrs class")
        else:
            problems.extend(codec.unsupported(input))
        problems.extend(codec.unsupported(output, "output"))
        problems.extend(_error_problems(errors))
        if key is not None and not callable(key):
            problems.append("key must be a callable input -> str")
        for marker, rng in (versions or {}).items():
            if not isinstance(rng, Versions) or rng.min > rng.current or rng.min < 0:
                problems.append(
                    f"version marker {marker!r} needs Versions(current, min) with 0 <= min <= current"
                )
        if timeout is not None and not (isinstance(timeout, timedelta) and timeout > timedelta(0)):
            problems.append(f"timeout must be a positive timedelta, got {timeout!r}")
        if key_reuse is not None and not isinstance(key_reuse, KeyReuse):
            problems.append(f"key_reuse must be a KeyReuse, got {key_reuse!r}")
        if problems:
            raise DeclarationError(f"workflow {actor.name}.{name}", problems)
        self.actor = actor
        #: the declared deadline of every execution (ms), unless a start gives its own
        self.timeout_ms = None if timeout is None else timeout // timedelta(milliseconds=1)
        #: what a keyed start with another input does once the key's execution finished
        self.key_reuse = KeyReuse.REFUSE if key_reuse is None else key_reuse
        self.name = name
        self.input: type[I] = input
        self.output = None if output is type(None) else output
        self.errors = tuple(errors)
        self.key = key
        self.versions = dict(versions or {})
        self.steps: dict[str, Step] = {}
        self.fn: Callable[[WorkflowContext, I], Awaitable[O]] | None = None
        actor._declare_workflow(self)

    def __repr__(self) -> str:
        return f"<workflow {self.actor.name}.{self.name}>"

    def stage_start(self, turn: Turn[Any], payload: I, key: str | None) -> str:
        """``turn.start(workflow, payload)``: stage a start on the turn (``Turn.start`` checked
        the owner and the payload's type); returns the execution id."""
        return stage_start(turn, self, payload, key)

    def error_named(self, name: str) -> type[Exception] | None:
        return tagged.error_class(name, self.errors)

    def _add(self, step: Step) -> None:
        if current_driver() is not None:
            raise EffectDefect(
                f"unregistered step {step.name!r}: steps are declared at module level, not inside a body"
            )
        # a name that is not a str may not even hash: only a valid one is looked up
        problems = _name_problems(step.name) or (
            [f"{self!r} already has a step named {step.name!r}"] if step.name in self.steps else []
        )
        if problems:
            raise DeclarationError(self._subject("step", step.name), problems)
        self.steps[step.name] = step

    def _subject(self, kind: str, name: object) -> str:
        """How a declaration error names a step: its kind, then ``Actor.Workflow.name``."""
        return f"{kind} {self.actor.name}.{self.name}.{name}"

    @overload
    def activity(
        self,
        name: str,
        *,
        success: type[T],
        errors: Sequence[type[Exception]] = (),
        retry: Retry = ...,
        timeout: timedelta | None = None,
        on_unknown: str = ...,
    ) -> ActivityStep[T]: ...

    @overload
    def activity(
        self,
        name: str,
        *,
        success: None = None,
        errors: Sequence[type[Exception]] = (),
        retry: Retry = ...,
        timeout: timedelta | None = None,
        on_unknown: str = ...,
    ) -> ActivityStep[None]: ...

    def activity(
        self,
        name: str,
        *,
        success: Any = None,
        errors: Sequence[type[Exception]] = (),
        retry: Retry = Retry(),
        timeout: timedelta | None = None,
        on_unknown: str = "attention",
    ) -> ActivityStep[Any]:
        """Declare an activity step; ``success`` is its result type (None for no result).
        ``on_unknown``: what an attempt whose outcome cannot be known does (only an activity that
        sends commands with derived ids has one): ``"attention"`` (the default) leaves it for a
        person to resolve, ``"fail"`` raises ``ActivityOutcomeUnknown`` in the body."""
        problems = [*_name_problems(name), *codec.unsupported(success, "success"), *_error_problems(errors)]
        if not isinstance(retry, Retry):
            problems.append(f"retry must be an akter.Retry, got {retry!r}")
        if on_unknown not in ("attention", "fail"):
            problems.append(f"on_unknown must be 'attention' or 'fail', not {on_unknown!r}")
        if problems:
            raise DeclarationError(self._subject("activity", name), problems)
        step: ActivityStep[Any] = ActivityStep(
            workflow=self,
            name=name,
            success=None if success is type(None) else success,
            errors=tuple(errors),
            retry=retry,
            timeout=timeout,
            on_unknown=on_unknown,
        )
        self._add(step)
        return step

    def sleep(self, name: str) -> SleepStep:
        step = SleepStep(workflow=self, name=name)
        self._add(step)
        return step

    def wait(self, name: str, event: type[E]) -> WaitStep[E]:
        problems = _name_problems(name)
        if self.actor.event_types.get(getattr(event, "__name__", "")) is not event:
            problems.append(f"{self.actor.name} declares no event type {event!r}")
        if problems:
            raise DeclarationError(self._subject("wait", name), problems)
        step: WaitStep[E] = WaitStep(workflow=self, name=name, event=event)
        self._add(step)
        return step

    def race(self, name: str) -> RaceStep:
        step = RaceStep(workflow=self, name=name)
        self._add(step)
        return step

    def child(
        self, name: str, workflow: Workflow[Any, T], *, on_parent_interrupt: str = "interrupt"
    ) -> ChildStep[T]:
        """Declare a child step: this workflow starts executions of ``workflow`` (a member of
        another actor type, or of this one) and awaits them (``akter.workflow.core.children``).
        ``on_parent_interrupt``: ``"interrupt"`` (the default) or ``"run_on"``."""
        return declare_child(self, name, workflow, on_parent_interrupt)

    def body(
        self, fn: Callable[[WorkflowContext, I], Awaitable[O]]
    ) -> Callable[[WorkflowContext, I], Awaitable[O]]:
        if not inspect.iscoroutinefunction(fn):
            raise DeclarationError(f"body of {self!r}", ["the body must be an async def"])
        if self.fn is not None:
            raise DeclarationError(f"body of {self!r}", ["the workflow already has a body"])
        self.fn = fn
        return fn

    def validate(self) -> list[str]:
        """Problems that can only be seen once the module is loaded (checked by App)."""
        return [] if self.fn is not None else [f"{self!r} has no body (decorate one with @{self.name}.body)"]
