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


async def until(probe: Callable[[], Awaitable[Any]], done: Callable[[Any], bool], within: float = 60) -> Any:
    """Wait for a condition a test can only observe (a row settled, a status). It polls; it
    never orders steps by elapsed time."""
    async with asyncio.timeout(within):
        while True:
            value = await probe()
            if done(value):
                return value
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
