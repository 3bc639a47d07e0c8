"""The payloads of the operator commands a workflow member adds to its actor (``commands.py``):
interrupt, retry, pause, unpause and resolve, as clients, operators and the hook spell them.

They are plain records with no behaviour, apart from the commands that carry them, so the
declarations (``declare.py``, whose ``Workflow`` types its commands by them), the commands, the
hook and the operator actions all name them without naming each other.
"""

from __future__ import annotations

import attrs

#: the longest reason an interrupt may carry (it is stored with the execution)
MAX_REASON = 1000


@attrs.frozen
class Interrupt:
    execution_id: str
    reason: str | None = None


@attrs.frozen
class RetryExecution:
    execution_id: str


@attrs.frozen
class Pause:
    execution_id: str
    reason: str | None = None


@attrs.frozen
class Unpause:
    execution_id: str


@attrs.frozen
class Resolve:
    """A resolution of an execution that needs attention. ``value``: for ``result``, the JSON
    of the value as primitives of the step's success type; for ``error``, the JSON of
    ``{"type": <declared class name>, "value": <its fields>}``. ``step``, ``scope``,
    ``occurrence`` and ``attempt`` name the attempt the operator saw waiting (``step`` None: the
    passes failed); ``expect`` false skips that check."""

    execution_id: str
    decision: str
    value: str | None = None
    step: str | None = None
    scope: str | None = None
    occurrence: int | None = None
    attempt: int | None = None
    expect: bool = True
    reason: str | None = None
