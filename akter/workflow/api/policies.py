"""What a workflow member declares besides its steps: its activities' ``Retry`` (and the
``Backoff`` between attempts), its version markers (``Versions``) and what a keyed start does
once the key's execution finished (``KeyReuse``). Plain values, checked when built; they import
no other workflow module.
"""

from __future__ import annotations

import enum
import math
from datetime import timedelta

import attrs

from akter.errors import DeclarationError


@attrs.frozen
class Backoff:
    """Delay before attempt ``n + 1`` after attempt ``n`` failed: ``base * factor ** (n - 1)``,
    at most ``cap`` — the longest wait between two attempts, however many there are. Built by
    ``Retry.exponential`` and ``Retry.constant``; not a public name of its own."""

    base: timedelta = timedelta(0)
    factor: float = 2.0
    cap: timedelta = timedelta(minutes=10)

    def __attrs_post_init__(self) -> None:
        problems = []
        if not isinstance(self.base, timedelta) or self.base < timedelta(0):
            problems.append(f"base must be a non-negative timedelta, got {self.base!r}")
        if (
            not isinstance(self.factor, int | float)
            or isinstance(self.factor, bool)
            or not math.isfinite(self.factor)
            or self.factor < 1
        ):
            problems.append(f"factor must be a finite number of at least 1, got {self.factor!r}")
        if not isinstance(self.cap, timedelta) or self.cap < timedelta(0):
            problems.append(f"cap must be a non-negative timedelta, got {self.cap!r}")
        elif isinstance(self.base, timedelta) and self.cap < self.base:
            problems.append(f"cap must be at least base ({self.cap} < {self.base})")
        if problems:
            raise DeclarationError(
                f"Backoff(base={self.base!r}, factor={self.factor!r}, cap={self.cap!r})", problems
            )

    def delay(self, attempt: int) -> timedelta:
        # in log space: factor ** (attempt - 1) overflows a float long before an unlimited
        # retry's attempt count stops growing
        if self.base == timedelta(0) or self.factor == 1:
            return min(self.base, self.cap)
        if (attempt - 1) * math.log(self.factor) >= math.log(self.cap / self.base):
            return self.cap
        return min(self.base * (self.factor ** (attempt - 1)), self.cap)


#: what ``Retry(times=None)`` waits between attempts unless told: 1 s, doubling, at most 10 min
UNLIMITED_BACKOFF = Backoff(base=timedelta(seconds=1), factor=2.0, cap=timedelta(minutes=10))


def _default_backoff(times: object) -> Backoff:
    # no pause between a few attempts, as before; an unlimited retry always pauses, or it spins
    return UNLIMITED_BACKOFF if times is None else Backoff()


@attrs.frozen
class Retry:
    """``times`` attempts in all (1 = no retry; ``None`` = no limit: retried until it succeeds,
    fails with a declared error, or the execution is interrupted — by a person or by the
    workflow's ``timeout=``), each after ``backoff.delay(attempt)``, never more than
    ``backoff.cap`` apart (by default, no pause for a limited retry and ``UNLIMITED_BACKOFF`` for an
    unlimited one, which must pause). Declared errors are never retried: they are business outcomes.
    Defects (other exceptions, timeouts) are retried until attempts run out."""

    times: int | None = 1
    backoff: Backoff = attrs.field(
        default=attrs.Factory(lambda retry: _default_backoff(retry.times), takes_self=True)
    )

    def __attrs_post_init__(self) -> None:
        problems = []
        if self.times is not None and (
            not isinstance(self.times, int) or isinstance(self.times, bool) or self.times < 1
        ):
            problems.append(
                "times must be a positive int (at least one attempt), or None for no limit; "
                f"got {self.times!r}"
            )
        if not isinstance(self.backoff, Backoff):
            problems.append(
                "backoff must be a Backoff (akter.Retry.exponential(...) or akter.Retry.constant(...) "
                f"build one), got {self.backoff!r}"
            )
        elif self.times is None and self.backoff.base <= timedelta(0):
            problems.append(
                "unlimited retries need a backoff with a positive base, e.g. "
                "akter.Retry.exponential(timedelta(seconds=1), times=None): without one a failing "
                "activity is retried without pause, forever"
            )
        if problems:
            raise DeclarationError(f"Retry(times={self.times!r}, backoff={self.backoff!r})", problems)

    @classmethod
    def exponential(
        cls,
        base: timedelta,
        *,
        times: int | None,
        factor: float = 2.0,
        cap: timedelta = timedelta(minutes=10),
    ) -> Retry:
        """``times`` attempts, attempt ``n + 1`` ``base * factor ** (n - 1)`` after attempt ``n``
        failed, never more than ``cap`` apart: ``akter.Retry.exponential(timedelta(seconds=1),
        times=5)``."""
        return cls(times=times, backoff=Backoff(base=base, factor=factor, cap=cap))

    @classmethod
    def constant(cls, delay: timedelta, *, times: int | None) -> Retry:
        """``times`` attempts, each ``delay`` after the last failed."""
        return cls(times=times, backoff=Backoff(base=delay, factor=1.0, cap=delay))

    def exhausted(self, attempt: int) -> bool:
        """Whether attempt ``attempt`` was the last this policy allows."""
        return self.times is not None and attempt >= self.times


@attrs.frozen
class Versions:
    """A version marker's range: executions record ``current`` at start; an execution whose
    recorded marker is outside ``min..current`` cannot be replayed by this code."""

    current: int
    min: int = 0


class KeyReuse(enum.Enum):
    """What a keyed start with another input does once the key's execution has finished
    (``key_policy.py``)."""

    REFUSE = "refuse"
    ATTACH = "attach"
    NEW_RUN = "new_run"
