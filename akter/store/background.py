"""Running a background statement until it succeeds: one classification, one backoff.

The relay's loops, the ownership heartbeat, the workflow runner's refresh and every retention
prune run statements nobody waits for. None of them may end the process (invariant 12), and none
may hide a bug. ``persist`` runs one such step: on an error it asks ``sqlstate.classify``, logs
(a transient condition as one warning line, a bug with its traceback at error level), waits with
``stamina``'s jittered, capped exponential backoff — so processes that lost the same database do
not come back in lockstep — and runs the step again. A step that succeeds returns its value; the
next call starts the backoff afresh. Cancellation passes straight through.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import stamina

from akter.store.sqlstate import Verdict, classify

T = TypeVar("T")

#: first wait after a failure, and the most any wait grows to
WAIT_INITIAL: timedelta = timedelta(milliseconds=50)
WAIT_MAX: timedelta = timedelta(seconds=5)


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def report(what: str, exc: Exception, *, log: logging.Logger, fields: dict[str, Any]) -> Verdict:
    """Log a failed background step as ``classify`` sees it; returns the verdict."""
    verdict = classify(exc)
    text = "".join(f" {key}=%s" for key in fields)
    extra = {**fields, "verdict": verdict.value}
    if verdict is Verdict.BUG:
        log.error(
            "%s failed (a bug; backing off)" + text + " error=%s",
            what,
            *fields.values(),
            one_line(exc),
            exc_info=exc,
            extra=extra,
        )
    else:
        log.warning(
            "%s failed (%s)" + text + " error=%s",
            what,
            verdict.value,
            *fields.values(),
            one_line(exc),
            extra=extra,
        )
    return verdict


async def persist(
    what: str,
    step: Callable[[], Awaitable[T]],
    *,
    log: logging.Logger,
    fields: dict[str, Any] | None = None,
    wait_initial: timedelta = WAIT_INITIAL,
    wait_max: timedelta = WAIT_MAX,
    until: asyncio.Event | None = None,
) -> T:
    """Run ``step`` until it returns, backing off after every failure; ``what`` names it in logs
    (``<what> failed ...``), ``fields`` are logged beside it as ``key=value`` and in ``extra``.
    Once ``until`` is set, a failure is raised instead of retried (a loop asked to stop)."""
    fields = fields or {}

    def hook(exc: Exception) -> bool | float:
        # stamina hands every exception to the hook, cancellation included: never retry that
        if not isinstance(exc, Exception):
            return False
        verdict = report(what, exc, log=log, fields=fields)
        if until is not None and until.is_set():
            return False
        # the server only ended an idle session: a new connection works now
        return 0.0 if verdict is Verdict.RETRY else True

    async for attempt in stamina.retry_context(
        on=hook,
        attempts=None,
        timeout=None,
        wait_initial=wait_initial,
        wait_max=wait_max,
        wait_jitter=wait_initial,
    ):
        with attempt:
            return await step()
    raise AssertionError("unreachable: retry_context without limits ends only by returning")
