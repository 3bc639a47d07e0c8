"""Helpers for workflow tests: run an App with its relay in process, and wait until it is quiet."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import akter
from akter.outbox.relay import Relay
from tests.apps.relay_procs import RelayProcess


@asynccontextmanager
async def running(app: akter.App) -> AsyncIterator[tuple[Relay, Any]]:
    async with app.relay() as relay, app.client() as client:
        yield relay, client


async def quiet(app: akter.App, relay: Relay, within: float = 60) -> None:
    """Until nothing is due and no pass runs (``relay.idle`` waits for the workflow runner too)."""
    async with asyncio.timeout(within):
        await relay.idle()
    assert app.workflow_runner.quiet()


async def until(
    probe: Callable[[], Awaitable[Any]], done: Callable[[Any], bool], why: str = "", within: float = 60
) -> Any:
    """Wait for a condition a test can only observe (a row settled, a lock wait, a log line, a
    relay in another process taking buckets): a barrier on state the test cannot hook. It polls
    ``probe`` until ``done`` holds of its value and returns that value; it never orders steps by
    elapsed time. ``within`` bounds the wait only so that a broken engine fails the test, naming
    ``why`` and the last value seen, instead of hanging it."""
    loop = asyncio.get_running_loop()
    end = loop.time() + within
    while True:
        value = await probe()
        if done(value):
            return value
        if loop.time() > end:
            raise AssertionError(f"{why or 'condition'} not reached in {within}s (last value {value!r})")
        await asyncio.sleep(0.01)


@contextmanager
def relay_processes(database_url: str, app: str) -> Iterator[Callable[..., RelayProcess]]:
    """A starter of ``akter relay APP`` processes (settings as keyword arguments, ``faults=``);
    every process it started is killed on exit."""
    started: list[RelayProcess] = []

    def start(**settings: str) -> RelayProcess:
        started.append(RelayProcess(database_url, app=app, **settings))
        return started[-1]

    try:
        yield start
    finally:
        for proc in started:
            proc.close()
