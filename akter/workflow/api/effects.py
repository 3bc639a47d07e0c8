"""Effect values: what a workflow body awaits.

An effect is an immutable description; constructing one does nothing. Awaiting it yields the
effect itself up the body's coroutine chain to akter's driver (``driver.py``), which answers by
``send``-ing the result back or ``throw``-ing the error in. The body never runs on an event loop,
so nothing but effects can be awaited in it.

``all_`` (exported as ``akter.all``) runs branches concurrently and returns every result; a
race (``RaceStep.run``) returns the first. A branch is an effect or a coroutine of effects.
The effects a declared step's call returns (``ActivityCall``, ``Sleep``, ``Wait``, ``Race``) are
declared beside their steps (``declare.py``), the child ones beside child steps (``children.py``).
"""

from __future__ import annotations

from collections.abc import Coroutine, Generator
from typing import Any

import attrs


class Effect:
    """Base of every effect value. ``await effect`` hands it to the driver."""

    __slots__ = ()

    def __await__(self) -> Generator[Effect, Any, Any]:
        result = yield self
        return result


@attrs.frozen(eq=False)
class All(Effect):
    branches: tuple[Any, ...]
    #: at most this many branches run at once (the next starts when one finishes, in order)
    limit: int | None = None


def all_(*branches: Any, limit: int | None = None) -> Any:
    """``await akter.all(a, b, ...)``: run the branches concurrently; a tuple of their results.
    The first branch to raise cancels the others and its error propagates. ``limit=n``: at most
    ``n`` branches run at once; the others start, in order, as running ones finish."""
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise TypeError(f"akter.all(limit=...) takes a positive int, got {limit!r}")
    return All(branches=branches, limit=limit)


async def _await_one(effect: Effect) -> Any:
    return await effect


def as_coroutine(branch: Any) -> Coroutine[Any, Any, Any]:
    """A branch as a coroutine the driver can step: effects are wrapped, coroutines kept."""
    if isinstance(branch, Effect):
        return _await_one(branch)
    if isinstance(branch, Coroutine):
        return branch
    raise TypeError(
        f"a branch must be an akter effect or a coroutine of effects, got {type(branch).__name__}"
    )
