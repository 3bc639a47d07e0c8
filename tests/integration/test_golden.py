"""Histories recorded by earlier versions of akter keep replaying (STYLE: recorded histories).

``tests/golden/flows-def1e70.json`` holds the rows of four executions of ``tests.apps.flows``
recorded by the engine of commit def1e70 — before steps had occurrences, before the lock-first
pass functions, before actor manifests: one finished (a race won by an event), three suspended
mid-way (an ``akter.all`` of sleeps, a compensated activity then a sleep, a sleep before an
activity). The test loads them into a freshly migrated database as an upgrade would find them,
makes their timers due, and lets today's code replay and finish them: each must end exactly as
the old engine would have, re-running no recorded step and recording no second occurrence.

``flows-def1e70.history.json`` is the same four executions as ``akter.testing.export_history``
writes them: exporting the loaded rows gives that file again, and it replays under today's code
with no database (``tests/unit/test_golden_replay.py`` replays every history file).
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from returns.result import Success

from akter import testing
from tests.apps import flows
from tests.apps.flows import Done
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet, running

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "flows-def1e70.json"
HISTORY = GOLDEN.with_name("flows-def1e70.history.json")
#: load order: an actor row before its state and executions, executions before their steps
TABLES = (
    "actor_generations",
    "actor_state",
    "actor_events",
    "actor_workflow_manifests",
    "actor_workflow_executions",
    "actor_workflow_step",
)


async def _load(database_url: str, rows: dict[str, list[dict[str, Any]]]) -> None:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        for table in TABLES:
            for stored in rows[table]:
                row = dict(stored)
                if table == "actor_workflow_executions":
                    # what sql/005 gives an execution that was open when it ran
                    row.setdefault("history_format", 1)
                columns = sql.SQL(", ").join(sql.Identifier(c) for c in row)
                await conn.execute(
                    sql.SQL(
                        "INSERT INTO {t} ({c}) SELECT {c} FROM jsonb_populate_record(NULL::{t}, %s)"
                    ).format(t=sql.Identifier(table), c=columns),
                    (json.dumps(row),),
                )
        # the relays that held their timers are gone: every open execution's timer is due now
        await conn.execute(
            "SELECT akter_wf_arm(routing_key, execution_id, (routing_key >> 56)::smallint, NULL)"
            "  FROM actor_workflow_executions WHERE status <> 'finished'"
        )


async def test_histories_recorded_by_def1e70_replay_and_finish_as_they_would_have(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    golden = json.loads(GOLDEN.read_text())
    await _load(database_url, golden["rows"])
    # however long ago they were recorded, every recorded sleep and deadline is due now
    latest = await peek.value("SELECT max(due_at) FROM actor_workflow_step")
    if latest is not None and latest > await clock.now():
        await clock.set(latest + timedelta(seconds=1))
    recorded = {r["execution_id"]: r for r in golden["rows"]["actor_workflow_step"]}
    steps_before = await peek.value("SELECT count(*) FROM actor_workflow_step")
    flows.gate("g-hold").set()
    app = flows.make_app(database_url)
    runs = golden["executions"]
    async with running(app) as (relay, client):
        await quiet(app, relay)
        workflows = {"racing": flows.Racing, "both": flows.Both, "book": flows.Book, "settle": flows.Settle}
        results = {
            name: await client.run(workflows[name], runs[name]["execution_id"], tenant="acme").result(
                timeout=60
            )
            for name in runs
        }
    assert results == {
        "racing": Success(Done("signal 7; g-race-after")),
        "both": Success(Done("g-both-left+g-both-right")),
        "book": Success(Done("ledger 2; principal Anonymous(); tenant acme")),
        "settle": Success(Done("ledger 2; principal Anonymous(); tenant acme")),
    }
    assert recorded, "the golden file holds recorded steps"
    # nothing recorded was run again: every (step, occurrence) has one attempt, and the old rows
    # are all still there as occurrence 1 of the body
    rows = await peek.rows(
        "SELECT execution_id, step, scope, occurrence, count(*) FROM actor_workflow_step"
        " GROUP BY execution_id, step, scope, occurrence HAVING count(*) > 1"
    )
    assert rows == []
    assert (
        await peek.value("SELECT count(*) FROM actor_workflow_step WHERE scope <> '' OR occurrence <> 1") == 0
    )
    assert await peek.value("SELECT count(*) FROM actor_workflow_step") >= steps_before
    # the ledger holds each effect once: Book's from the old engine, Settle's from the new one
    book = bytes(await peek.value("SELECT state FROM actor_state WHERE actor_id = 'ledger-g'"))
    assert b'"effects":["g-a","g-b"]' in book
    settle = bytes(await peek.value("SELECT state FROM actor_state WHERE actor_id = 'ledger-g-settle'"))
    assert b'"effects":["g-settle-a","g-settle-b"]' in settle


async def test_the_rows_recorded_by_def1e70_export_as_their_history_file(database_url: str) -> None:
    golden = json.loads(GOLDEN.read_text())
    await _load(database_url, golden["rows"])
    ids = [run["execution_id"] for run in golden["executions"].values()]
    exported = await testing.read_history(database_url, ids)
    assert exported.executions == testing.load_history(HISTORY).executions
    report = testing.replay_history(flows.make_app(database_url), exported)
    report.assert_replays()
    assert report.checked == 4
