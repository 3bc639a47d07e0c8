"""``persist``: a background step is retried after any error, with the error logged once as
``classify`` sees it; cancellation is never retried."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

import psycopg.errors
import pytest

from akter.store.background import persist

log = logging.getLogger("akter.test.background")
QUICK = {"wait_initial": timedelta(milliseconds=1), "wait_max": timedelta(milliseconds=5)}


async def test_a_bug_and_a_lock_timeout_are_logged_and_the_step_runs_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    errors: list[Exception] = [KeyError("bucket"), psycopg.errors.LockNotAvailable("lock timeout")]

    async def step() -> str:
        if errors:
            raise errors.pop(0)
        return "done"

    with caplog.at_level(logging.WARNING, logger=log.name):
        assert await persist("prune", step, log=log, fields={"member": "m1"}, **QUICK) == "done"
    bug, contention = (r for r in caplog.records if r.name == log.name)
    assert bug.levelno == logging.ERROR
    assert bug.exc_info is not None  # the traceback of a bug is kept
    assert bug.getMessage().startswith("prune failed (a bug; backing off) member=m1")
    assert contention.levelno == logging.WARNING
    assert contention.exc_info is None
    assert contention.getMessage() == "prune failed (backoff) member=m1 error=lock timeout"


async def test_cancellation_is_not_retried() -> None:
    runs = 0

    async def step() -> None:
        nonlocal runs
        runs += 1
        await asyncio.sleep(3600)

    task = asyncio.ensure_future(persist("wait", step, log=log, **QUICK))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert runs == 1


async def test_a_failure_after_a_stop_request_is_raised() -> None:
    stop = asyncio.Event()

    async def step() -> None:
        stop.set()
        raise psycopg.errors.AdminShutdown("terminating connection due to administrator command")

    with pytest.raises(psycopg.errors.AdminShutdown):
        await persist("claim", step, log=log, until=stop, **QUICK)
