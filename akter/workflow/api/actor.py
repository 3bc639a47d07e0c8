"""``akter.Actor``: the actor type users declare, with its workflow and schedule members.

It is the top of the declarations, above the modules that add what a member brings to its actor:
``Shop.workflow(...)`` builds a ``Workflow`` (``declare.py``) whose commands ``commands.py``
registers, and ``Shop.schedule(...)`` a ``Schedule`` (``schedules.py``). Those modules, and the
rest of the workflow layer, look members up on ``WorkflowActor``, this class's base in
``declare.py``, so nothing below this module names it and the declarations never import their
commands or their schedules. Registration is this class's override of
``WorkflowActor._declare_workflow``, which every ``Workflow`` calls when it is built: the commands
are there however the member was built and whatever the user imported first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from akter.actor.declare import Actor as ActorType
from akter.errors import DeclarationError
from akter.workflow.api import commands
from akter.workflow.api.declare import Workflow, WorkflowActor
from akter.workflow.api.policies import KeyReuse, Versions
from akter.workflow.api.schedules import Schedule, enable

S = TypeVar("S")
I = TypeVar("I")  # noqa: E741 -- a workflow's input type


class Actor(WorkflowActor[S]):
    """An actor type with workflow members: ``akter.Actor``. The kernel's ``Actor``
    (``akter.actor.declare``) knows commands and events; this layer adds ``workflow(...)``,
    ``schedule(...)`` and the typed ``workflows`` and ``schedules`` they declared, so the kernel
    never imports workflows."""

    #: the schedules declared on this type (``akter.workflow.api.schedules``), by name
    schedules: dict[str, Schedule]

    def _declare_members(self) -> None:
        super()._declare_members()
        self.schedules = {}

    def _declare_workflow(self, workflow: Workflow[Any, Any]) -> None:
        super()._declare_workflow(workflow)
        commands.register(workflow)

    def schedule(self, name: str, **options: Any) -> Schedule:
        """Declare a schedule on one actor of this type (``akter.workflow.api.schedules.Schedule``:
        ``actor_id``, ``tenant``, ``member``, ``payload``, ``cron`` or ``every``, ``timezone``,
        ``catch_up``, ``max_catch_up``); relays reconcile declared schedules at start-up."""
        schedule = Schedule(name=name, actor=self, declared=True, **options)
        enable(self)
        if name in self.schedules:
            raise DeclarationError(
                f"schedule {name!r}", [f"{self.name} already declares a schedule {name!r}"]
            )
        self.schedules[name] = schedule
        return schedule

    def workflow(
        self,
        name: str,
        *,
        input: type[I],
        output: Any = None,
        errors: Sequence[type[Exception]] = (),
        key: Callable[[I], str] | None = None,
        versions: dict[str, Versions] | None = None,
        timeout: timedelta | None = None,
        key_reuse: KeyReuse | None = None,
    ) -> Workflow[I, Any]:
        """Declare a workflow member named ``name``; decorate its body with ``@Workflow.body``
        (see the README): ``input`` and ``output`` types, declared ``errors``, an optional
        ``key`` function (a repeated start with the same key and input attaches; ``key_reuse``
        decides for another input once the execution finished, ``key_policy.py``), version
        markers, and a ``timeout`` after which an execution is interrupted (``deadline.py``)."""
        return Workflow(
            self,
            name,
            input=input,
            output=output,
            errors=errors,
            key=key,
            versions=versions,
            timeout=timeout,
            key_reuse=key_reuse,
        )


def schedules_of(actor: ActorType[Any] | None) -> dict[str, Schedule]:
    """The schedules declared on ``actor`` (none for a type that is not an ``akter.Actor``)."""
    return actor.schedules if isinstance(actor, Actor) else {}
