"""An execution's history as the driver reads it: step occurrences (``StepKey``) and the rows
recorded for them (``StepRow``).

Plain records, importing nothing of the workflow package, so that what builds or reads rows
(the pass's statement parameters, the determinism helpers, the history tools) need not import
the driver (``driver.py`` says what an occurrence is and how it is replayed).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import attrs

#: the scope of the fiber that runs compensations and finalizers once the body has ended
FINISH_SCOPE = "f/"


class StepKey(NamedTuple):
    """One occurrence of a declared step: ``step`` awaited for the ``occurrence``-th time in
    ``scope``."""

    step: str
    scope: str = ""
    occurrence: int = 1

    def __str__(self) -> str:
        if self.scope.startswith(FINISH_SCOPE):
            where = " in cleanup" + (
                f" branch {self.scope[2:].rstrip('/')}" if self.scope != FINISH_SCOPE else ""
            )
        else:
            where = f" in branch {self.scope.rstrip('/')}" if self.scope else ""
        return f"{self.step}#{self.occurrence}{where}"


@attrs.frozen
class StepRow:
    """One recorded step row (one attempt of one occurrence), as the pass loaded or wrote it."""

    key: StepKey
    attempt: int
    kind: str
    exit: dict[str, Any] | None
    due_ms: int | None = None
    started_ms: int = 0
    cursor: int | None = None
    scanned: int | None = None

    @property
    def step(self) -> str:
        return self.key.step
