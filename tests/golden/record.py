"""Record the golden histories of today's engine: ``python -m tests.golden.record URL NAME``.

Runs executions of ``tests.apps.edges`` and ``tests.apps.flows`` for real against the empty
database at URL (it is migrated first) — loops over one step, races and ``akter.all`` with
abandoned branches, compensations (one failing, one after an interrupt), waits that matched or
timed out, some finished and some still open — and exports them with
``akter.testing.export_history`` to ``tests/golden/NAME.history.json``. Commit the file with the
name of the engine's commit: ``tests/unit/test_golden_replay.py`` replays it under every later
version of the engine.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path

import akter
from akter import testing
from akter.store.migrate import migrate
from tests.apps import edges, flows
from tests.apps.flows import Emit, Job
from tests.integration.workflow_support import quiet, running

HERE = Path(__file__).resolve().parent


async def record(url: str, name: str) -> Path:
    migrate(url)
    app = akter.App([edges.Edges, edges.Ledger, flows.Flows, flows.Ledger], database_url=url)
    clock = testing.Clock(url)
    flows.gate("g2-hold-hold").set()
    flows.gate("g2-cancel-hold").set()
    ids: list[str] = []
    async with running(app) as (relay, client):
        golden = client.actor(edges.Edges, "golden", tenant="acme")
        flow = client.actor(flows.Flows, "golden", tenant="acme")
        runs = [
            await golden.start(edges.Loop, edges.Job("loop-done", count=3, seconds=0)),
            await golden.start(edges.Loop, edges.Job("loop-open", count=3, seconds=3600)),
            await golden.start(edges.Abandon, edges.Job("race", seconds=0)),
            await golden.start(edges.Abandon, edges.Job("all-boom")),
            await golden.start(edges.Undo, edges.Job("undo")),
            await golden.start(edges.Deadline, edges.Job("deadline", timeout=0)),
            await golden.start(edges.Model, edges.Job("model", seconds=86400, timeout=600)),
            await flow.start(flows.Both, Job("g2-both", seconds=600, seconds2=86400)),
            await flow.start(flows.Book, Job("g2-hold", seconds=86400)),
            await flow.start(flows.Racing, Job("g2-open", seconds=86400)),
        ]
        await quiet(app, relay)
        await golden.send(edges.note, edges.Send("model", 5))
        racing = await flow.send(flows.kickoff, Emit("g2-race", 7))
        cancelled = await flow.start(flows.Book, Job("g2-cancel", seconds=86400))
        await quiet(app, relay)
        await cancelled.interrupt()
        await cancelled.result(timeout=60)
        await clock.advance(timedelta(seconds=3601))  # loop-open's first nap and nap-a are over
        await quiet(app, relay)
        ids = [r.execution_id for r in runs] + [racing.unwrap(), cancelled.execution_id]
    path = HERE / f"{name}.history.json"
    await testing.export_history(url, path, ids, note=f"recorded by tests/golden/record.py as {name}")
    return path


if __name__ == "__main__":
    print(asyncio.run(record(sys.argv[1], sys.argv[2])))
