"""The running-driver marker: which driver is stepping a body in this context, if any.

The declarations (a step called outside its workflow, a step declared inside a body), the
context and the deterministic helpers (``determinism.py``) ask it; the driver (``driver.py``)
sets it around each step of a body. It imports no other workflow module, so each of them can.
"""

from __future__ import annotations

import contextvars
from typing import Any, Protocol


class Branch(Protocol):
    """The fiber a scheduler is stepping: the body or one branch of a race or ``akter.all``."""

    @property
    def scope(self) -> str:
        """Where the fiber is: ``""`` for the body, a branch's path otherwise (``StepKey.scope``)."""

    @property
    def counts(self) -> dict[str, int]:
        """How many times the fiber has awaited each step so far (and the seeded helpers' count)."""

    @property
    def live(self) -> bool:
        """Whether the fiber runs past what this pass replayed (a log line is emitted only then)."""


class Scheduler(Protocol):
    """What a body's helpers (the context, ``determinism.py``, a step's check that it belongs to
    the workflow running) need of the driver that steps the body. ``driver.Driver`` implements
    it; neither this module nor ``determinism.py`` imports the driver."""

    # the workflow (``declare.Workflow``) and the context (``declare.WorkflowContext``) the body
    # runs for, as ``object``: they import this module, and their callers compare them by identity
    @property
    def workflow(self) -> object: ...

    @property
    def ctx(self) -> object: ...

    @property
    def current(self) -> Branch | None:
        """The fiber being stepped, ``None`` between steps (the pass closing the body)."""

    @property
    def held_logs(self) -> list[Any] | None:
        """Where a start's prefix holds its body's log records until its turn commits (``prefix.py``);
        ``None`` in a pass, which emits them at once."""


_driver: contextvars.ContextVar[Scheduler | None] = contextvars.ContextVar("akter_driver", default=None)


def current_driver() -> Scheduler | None:
    """The driver stepping a body right now in this context, if any."""
    return _driver.get()


def set_driver(driver: Scheduler | None) -> contextvars.Token[Scheduler | None]:
    return _driver.set(driver)


def reset_driver(token: contextvars.Token[Scheduler | None]) -> None:
    _driver.reset(token)
