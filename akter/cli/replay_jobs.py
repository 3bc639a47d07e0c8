"""The replay check in several processes: one snapshot, the routing-key space split between them.

Replaying is Python CPU, one execution after another; a check of many executions on a machine
with several cores splits them. The coordinator begins the check's ``REPEATABLE READ, READ
ONLY`` transaction and exports its snapshot (``pg_export_snapshot``); each worker process
imports APP (by its ``module:attribute`` path, as the command did), begins a read-only
transaction on that same snapshot (``SET TRANSACTION SNAPSHOT``) and replays the open
executions of one slice of the routing-key space — routing keys are hashes, so equal slices hold
about equal numbers of executions. The first worker also replays the finished sample. The
coordinator keeps its transaction open until every worker is done (an exported snapshot lives as
long as the transaction that exported it) and adds their tallies up. Every worker reads what
the coordinator would have read: the report is the same as with one process.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import psycopg

from akter.workflow.core import manifest
from akter.workflow.tools import replay_read
from akter.workflow.tools.replay_report import ReplayReport, Tally

#: open executions from which the command replays in several processes when not told
PARALLEL_FROM = 20_000

COUNT_OPEN = "SELECT count(*) FROM actor_workflow_executions WHERE status <> 'finished'"

_APP: Any = None


def slices(jobs: int) -> list[tuple[int, int | None]]:
    """The routing-key space ``[-2**63, 2**63)`` as ``jobs`` ranges (the last one open-ended)."""
    width = 2**64 // jobs
    starts = [-(2**63) + i * width for i in range(jobs)]
    return [(start, starts[i + 1] if i + 1 < jobs else None) for i, start in enumerate(starts)]


def _load(app_path: str) -> None:
    from akter.cli.support import load_app

    global _APP  # noqa: PLW0603 -- the worker process's one App, loaded once by the pool's initializer
    _APP = load_app(app_path)


def _worker(
    url: str, snapshot: str, keys: tuple[int, int | None], names: Sequence[str], sample: int
) -> Tally:
    return asyncio.run(_replay_slice(url, snapshot, keys, names, sample))


async def _replay_slice(
    url: str, snapshot: str, keys: tuple[int, int | None], names: Sequence[str], sample: int
) -> Tally:
    from akter.store.pool import connection_kwargs

    declared = manifest.all_workflows(_APP.actors.values())
    only = replay_read.choose(declared, names) if names else None
    tally = Tally((w.actor.name, w.name) for w in only or ())
    kwargs = connection_kwargs(url, name="akter-workflows-replay")
    async with await psycopg.AsyncConnection.connect(url, **kwargs) as conn, conn.transaction():
        await replay_read.read_only(conn)
        await conn.execute(
            psycopg.sql.SQL("SET TRANSACTION SNAPSHOT {}").format(psycopg.sql.Literal(snapshot))
        )
        await replay_read.replay_snapshot(conn, declared, tally, sample=sample, only=only, keys=keys)
    return tally


def check(
    conn: psycopg.Connection[Any], app_path: str, url: str, *, jobs: int, sample: int, names: Sequence[str]
) -> ReplayReport:
    """The check of APP (``app_path``) in ``jobs`` worker processes, on ``conn``'s snapshot."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        row = conn.execute("SELECT pg_export_snapshot()").fetchone()
        snapshot = str(row[0]) if row else ""
        context = multiprocessing.get_context("spawn")  # no fork of a process with threads and a loop
        with ProcessPoolExecutor(jobs, mp_context=context, initializer=_load, initargs=(app_path,)) as pool:
            futures = [
                pool.submit(_worker, url, snapshot, keys, list(names), sample if i == 0 else 0)
                for i, keys in enumerate(slices(jobs))
            ]
            tallies = [f.result() for f in futures]
    total = tallies[0]
    for tally in tallies[1:]:
        total.merge(tally)
    return total.report()
