"""``akter workflows replay APP``: new code's bodies replayed against real recorded histories.

Executions of ``tests.apps.depot``'s ``before`` code are recorded for real: two parked in
``nap`` with ``reserve`` recorded (one with slot 10, one with slot 0), one finished. Then code
with the same declarations — the deploy check accepts it — and a changed body
(``tests.apps.depot_replay``) is checked against them, as a second App over the same database.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import psycopg
from click.testing import CliRunner, Result

from akter.cli import main
from tests.apps import depot
from tests.apps.depot import Order
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet, running, until

FINISHED = "SELECT count(*) FROM actor_workflow_executions WHERE status = 'finished'"


async def cli(*args: str) -> Result:
    # CliRunner runs the command in this process; asyncio.run inside it needs a thread of its own.
    return await asyncio.to_thread(CliRunner().invoke, main, list(args))


async def record(url: str, peek: Peek) -> dict[str, str]:
    """Run ``before``'s Ship for real: o1 (slot 10) and o0 (slot 0) park in nap; done finishes."""
    app = depot.make_app("before", url)
    actor = depot.VARIANTS["before"][0]
    ship = actor.workflows["Ship"]
    async with running(app) as (relay, client):
        runs = {
            "o1": await client.actor(actor, "d1", tenant="acme").start(ship, Order(id="o1", qty=1)),
            "o0": await client.actor(actor, "d0", tenant="acme").start(ship, Order(id="o0", qty=0)),
            "done": await client.actor(actor, "d1", tenant="acme").start(ship, Order(id="done", nap_s=0)),
        }
        await runs["done"].result(timeout=60)
        await quiet(app, relay)
    assert await peek.value(FINISHED) == 1
    return {name: run.execution_id for name, run in runs.items()}


async def test_unchanged_code_replays_every_open_and_finished_execution(
    database_url: str, peek: Peek
) -> None:
    await record(database_url, peek)
    for variant in ("tests.apps.depot:before", "tests.apps.depot:after", "tests.apps.depot_replay:same"):
        result = await cli("workflows", "replay", variant, "--database-url", database_url)
        assert (result.exit_code, result.output) == (
            0,
            "replays: 3 executions replayed by this code\n"
            "  Depot.Ship: 3 of 3 replayed (2 open, 1 finished)\n",
        ), variant
    without_finished = await cli(
        "workflows",
        "replay",
        "tests.apps.depot:before",
        "--sample",
        "0",
        "--json",
        "--database-url",
        database_url,
    )
    data = json.loads(without_finished.output)
    assert (without_finished.exit_code, data["replays"], data["checked"]) == (0, True, 2)
    assert data["workflows"][0]["finished_checked"] == 0


async def test_reordered_awaits_diverge_at_the_first_recorded_step(database_url: str, peek: Peek) -> None:
    ids = await record(database_url, peek)
    # the declarations did not change: the deploy check has nothing to refuse
    check = await cli(
        "workflows", "check", "tests.apps.depot_replay:reordered", "--database-url", database_url
    )
    assert check.exit_code == 0, check.output
    result = await cli(
        "workflows", "replay", "tests.apps.depot_replay:reordered", "--json", "--database-url", database_url
    )
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    (ship,) = data["workflows"]
    assert (data["replays"], ship["replayed"], ship["diverged"]) == (False, 0, 3)
    assert {d["execution_id"]: (d["at"], d["recorded"], d["asked"]) for d in ship["divergences"]} == {
        ids[name]: ("reserve#1", "activity reserve#1", "clock nap#1") for name in ids
    }
    text = await cli(
        "workflows", "replay", "tests.apps.depot_replay:reordered", "--database-url", database_url
    )
    assert text.exit_code == 1
    assert text.output.startswith(
        "diverged: 3 of 3 executions\n"
        "  Depot.Ship: 0 of 3 replayed (2 open, 1 finished)\n"
        "    - 3 executions at reserve#1: recorded activity reserve#1; this code asked for clock nap#1\n"
    )


async def test_several_processes_on_one_snapshot_report_the_same(database_url: str, peek: Peek) -> None:
    await record(database_url, peek)
    reports = {}
    for jobs in ("1", "3"):
        result = await cli(
            "workflows", "replay", "tests.apps.depot_replay:branched", "--jobs", jobs, "--json",
            "--database-url", database_url,
        )  # fmt: skip
        assert result.exit_code == 1, result.output
        reports[jobs] = json.loads(result.output)
        for workflow in reports[jobs]["workflows"]:  # the order of divergences follows the reads
            workflow["divergences"].sort(key=lambda d: d["execution_id"])
            for pattern in workflow["patterns"]:
                pattern["examples"].sort()
    assert reports["3"] == reports["1"]
    assert reports["1"]["checked"] == 3


async def test_a_new_branch_diverges_only_where_the_recorded_values_take_it(
    database_url: str, peek: Peek
) -> None:
    ids = await record(database_url, peek)
    result = await cli(
        "workflows", "replay", "tests.apps.depot_replay:branched", "--json", "--database-url", database_url
    )
    assert result.exit_code == 1, result.output
    (ship,) = json.loads(result.output)["workflows"]
    assert (ship["replayed"], ship["diverged"]) == (1, 2)  # o0 reserved slot 0: no new branch
    divergences = {d["execution_id"]: (d["at"], d["recorded"], d["asked"]) for d in ship["divergences"]}
    assert divergences == {
        ids["o1"]: ("nap#1", "clock nap#1, pending", "activity ship#1"),
        ids["done"]: ("nap#1", "clock nap#1", "activity ship#1"),
    }
    # one workflow asked for by name: the same; a name APP does not declare is a usage error
    named = await cli(
        "workflows", "replay", "tests.apps.depot_replay:branched", "--workflow", "Depot.Ship",
        "--sample", "0", "--database-url", database_url,
    )  # fmt: skip
    assert (named.exit_code, named.output.splitlines()[0]) == (1, "diverged: 1 of 2 executions")
    unknown = await cli(
        "workflows", "replay", "tests.apps.depot_replay:branched", "--workflow", "Return",
        "--database-url", database_url,
    )  # fmt: skip
    assert unknown.exit_code == 2
    assert "--workflow 'Return' names no workflow of APP (it declares: Depot.Ship)" in unknown.output


async def _quiet_database(peek: Peek) -> int:
    """Rows inserted, updated and deleted in this database so far, once every other session of
    it has ended: a session reports its counts before it leaves pg_stat_activity."""
    others = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    await until(lambda: peek.value(others), lambda n: n == 0)
    await peek.value("SELECT pg_stat_clear_snapshot()")
    return int(
        await peek.value(
            "SELECT tup_inserted + tup_updated + tup_deleted FROM pg_stat_database"
            " WHERE datname = current_database()"
        )
    )


async def test_the_replay_check_writes_nothing(database_url: str, peek: Peek) -> None:
    await record(database_url, peek)
    before = await _quiet_database(peek)
    # the counters do see a write made by another session (so the assertion below can fail)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("UPDATE akter_clock SET clock_offset = clock_offset")
    written = await _quiet_database(peek)
    assert written == before + 1
    for variant, jobs in (("tests.apps.depot:before", "1"), ("tests.apps.depot_replay:branched", "2")):
        result = await cli("workflows", "replay", variant, "--jobs", jobs, "--database-url", database_url)
        assert result.exit_code in (0, 1), result.output
    assert await _quiet_database(peek) == written
    manifests: Any = await peek.value("SELECT count(*) FROM actor_workflow_manifests")
    assert manifests == 1  # unlike `workflows check`, nothing is accepted


async def test_no_database_is_a_usage_error(database_url: str) -> None:
    unreachable = await cli(
        "workflows",
        "replay",
        "tests.apps.depot:before",
        "--database-url",
        "postgresql://nobody@127.0.0.1:1/x",
    )
    assert unreachable.exit_code == 2
    assert "cannot connect to the database" in unreachable.output
    missing = await cli("workflows", "replay", "tests.apps.nowhere:app", "--database-url", database_url)
    assert missing.exit_code == 2
