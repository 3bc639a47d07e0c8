"""An execution's end, as it is stored: the outcome column and the result exit of a body's final.

One definition for both places an execution finishes: a pass (``passes.Pass._finish``) and a
start turn whose body ended before it asked for any effect (``prefix.py``), so that an
execution finished in its start's transaction reads exactly as one a pass finished.
``outcome_of`` is pure (no logging): the start turn may run it more than once (an optimistic
turn refused and rerun) and says what it found only once the turn committed (``report``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from akter import logs
from akter.errors import CompensationFailed, Defect, Interrupted, InvalidInput
from akter.workflow.core import exits
from akter.workflow.core.exits import Ok, Raise

if TYPE_CHECKING:
    from akter.ids import ExecutionId
    from akter.workflow.api.declare import Workflow

log = logging.getLogger("akter.workflow")


def outcome_of(workflow: Workflow[Any, Any], final: Ok | Raise) -> tuple[str, dict[str, Any], Ok | Raise]:
    """The execution's outcome column and result exit, and the final they stand for (a result
    its output type cannot hold becomes a defect)."""
    if isinstance(final, Ok):
        try:
            return "succeeded", exits.encode_ok(final.value, workflow.output), final
        except InvalidInput as exc:  # the body returned what its output type cannot hold
            final = Raise(Defect(f"{workflow!r} returned an output that cannot be stored: {exc}"))
    if isinstance(final.error, Interrupted):
        return "interrupted", {"interrupt": {}}, final
    exit_ = exits.encode_error(final.error, workflow.errors)
    if isinstance(final.error, CompensationFailed):
        return "compensation_failed", exit_, final
    if "error" in exit_:
        return "failed", exit_, final
    return "defect", exit_, final


def report(eid: ExecutionId | str, outcome: str, final: Ok | Raise) -> None:
    """Log what an outcome warrants (a cleanup's failures, a defect), as every finish does."""
    if not isinstance(final, Raise):
        return
    if outcome == "compensation_failed" and isinstance(final.error, CompensationFailed):
        for failure in final.error.failures:
            log.error("cleanup failed: %s", failure, extra=logs.fields(execution=eid))
    elif outcome == "defect":
        log.warning("execution ended with a defect: %r", final.error, extra=logs.fields(execution=eid))
