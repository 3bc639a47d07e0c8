"""Every reason a deploy is refused, seen three ways: ``akter workflows check`` (text and
``--json``), ``akter relay``'s start-up check, and a runner of the new code meeting the
executions at replay time — which must leave them suspended, untouched, and say why — plus the
deploys that must pass.

Three executions of ``tests.apps.depot``'s ``before`` code (and, for the marker reasons, of
``before_marked``) are parked in ``nap`` with ``reserve`` recorded, once per module, in a
database of their own. Every test brings changed code to them and leaves them as it found them
(parked, nothing recorded, on the manifest they started under), which it also asserts: creating
a database per test costs seconds on a busy server, and these tests only need the same history.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result
from psycopg import sql

from akter import testing
from akter.cli import load_app, main
from akter.store.database import with_database
from akter.workflow.core import manifest
from akter.workflow.engine import manifest_store
from tests.apps import depot, shop
from tests.integration.conftest import Peek

OPEN = "SELECT count(*) FROM actor_workflow_executions WHERE status = 'suspended'"
STEPS = "SELECT execution_id, step, attempt, exit FROM actor_workflow_step ORDER BY 1, 2, 3"


@pytest.fixture(autouse=True)
def _calls() -> None:
    depot.CALLS.clear()


@asynccontextmanager
async def peeking(url: str) -> AsyncIterator[Peek]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        yield Peek(conn)


async def settle(app: Any, relay: Any) -> None:
    """Until nothing is due and no pass runs (a pass may make something due, and back)."""
    runner = getattr(app, "workflow_runner", None)  # an App without workflows has none
    async with asyncio.timeout(30):
        while True:
            await relay.idle()
            if runner is None:
                return
            await runner.idle()
            await relay.idle()
            if not runner._tasks:
                return


async def park(url: str, variant: str, ids: tuple[str, ...] = ("o0", "o1", "o2")) -> None:
    """Executions of ``variant`` parked in ``nap``, two of them on one actor."""
    app = depot.make_app(variant, url)
    actor = depot.VARIANTS[variant][0]
    ship = actor.workflows["Ship"]
    depot.CALLS.clear()
    async with peeking(url) as peek:
        already = await peek.value(OPEN)
        async with app.relay() as relay, app.client() as client:
            for i, order in enumerate(ids):
                await client.actor(actor, f"d{i % 2}", tenant="acme").start(ship, depot.Order(id=order))
            await settle(app, relay)
        assert await peek.value(OPEN) == already + len(ids)
    assert all(depot.CALLS[f"reserve:{order}"] == 1 for order in ids)


@pytest.fixture(scope="module")
def parked(admin_url: str, template_database: str) -> Iterator[dict[str, str]]:
    """Per code version (``before``, ``before_marked``), the URL of a database where three of
    its executions are parked."""
    names = {v: f"akter_t_{uuid.uuid4().hex[:16]}" for v in ("before", "before_marked")}
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for name in names.values():
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_database)))  # fmt: skip
    try:
        urls = {v: with_database(admin_url, name) for v, name in names.items()}
        for variant, url in urls.items():
            asyncio.run(park(url, variant))
        yield urls
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            for name in names.values():
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


async def cli(*args: str) -> Result:
    # CliRunner runs the command in this process; asyncio.run inside it needs a thread of its own.
    return await asyncio.to_thread(CliRunner().invoke, main, list(args))


def when(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ship_hash(variant: str) -> str:
    return manifest.of(depot.VARIANTS[variant][0].workflows["Ship"])[1]


BEFORE_HASH = manifest.of(depot.VARIANTS["before"][0].workflows["Ship"])[1]

#: reason → (code started by, code deployed, step, marker, message, what to do)
REASONS: dict[str, tuple[str, str, str | None, str | None, str, str]] = {
    "actor_type_missing": (
        "before", "no_actor_type", None, None,
        "actor type Depot is not declared",
        "keep the actor type and its workflows declared until these executions finish (drain them first), "
        "then remove it",
    ),
    "workflow_missing": (
        "before", "no_workflow", None, None,
        "workflow Depot.Ship is not declared",
        "keep the workflow declared until these executions finish (drain them first), then remove it",
    ),
    "start_manifest_missing": (
        "before", "after", None, None,
        f"start manifest {BEFORE_HASH[:12]} is not stored",
        "run the code that started these executions against this database once (`akter workflows check` "
        "with it stores its manifests), or drain them first",
    ),
    "step_missing": (
        "before", "step_removed", "ship", None,
        "step 'ship' (an activity) is no longer declared",
        "keep the step declared under its old name (a rename is a removal); stop calling it in new "
        "executions behind a version marker (wf.version), or drain these executions first",
    ),
    "step_renamed": (
        "before", "step_renamed", "reserve", None,
        "step 'reserve' (an activity) is no longer declared",
        "keep the step declared under its old name (a rename is a removal); stop calling it in new "
        "executions behind a version marker (wf.version), or drain these executions first",
    ),
    "step_kind_changed": (
        "before", "kind_changed", "nap", None,
        "step 'nap' was a clock and is now declared as an activity",
        "keep the old step as it was and declare the new one under a new name, chosen behind a version "
        "marker (wf.version), or drain these executions first",
    ),
    "result_schema_changed": (
        "before", "result_changed", "reserve", None,
        "the result schema of recorded step 'reserve' changed",
        "keep the step's old result type; declare a step with a new name for the new type, chosen behind a "
        "version marker (wf.version), or drain these executions first",
    ),
    "payload_schema_changed": (
        "before", "payload_changed", None, None,
        "the payload (input) schema changed",
        "keep the workflow's input type as it was; start a new workflow for the new input, or drain these "
        "executions first",
    ),
    "marker_not_declared": (
        "before_marked", "marker_dropped", None, "carrier",
        "version marker 'carrier' (recorded 1) is no longer declared",
        "keep the version marker declared, with a range that includes the recorded value, until these "
        "executions finish",
    ),
    "marker_outside_range": (
        "before_marked", "marker_outside", None, "carrier",
        "version marker 'carrier' recorded 1, outside 2..3",
        "widen the marker's Versions(current, min) to include the recorded value, until these executions "
        "finish",
    ),
    "marker_predates": (
        "before", "marker_predates", None, "carrier",
        "version marker 'carrier' has min 1 but was not recorded at start (it would replay as 0)",
        "lower the marker's min to 0 (so these executions replay as version 0), or drain them first",
    ),
}  # fmt: skip


@pytest.mark.parametrize("reason", list(REASONS))
async def test_a_refused_deploy_is_reported_by_the_check_and_the_relay_and_left_alone_at_replay(
    reason: str, parked: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    started_by, deployed, step, marker, message, what_to_do = REASONS[reason]
    url, app_path = parked[started_by], f"tests.apps.depot:{deployed}"
    async with peeking(url) as peek:
        oldest: datetime = await peek.value("SELECT min(started_at) FROM actor_workflow_executions")
        steps_before = await peek.rows(STEPS)
        stored = await peek.rows(
            "SELECT * FROM actor_workflow_manifests WHERE manifest_hash = %s", BEFORE_HASH
        )
        if reason == "start_manifest_missing":
            await peek.rows(
                "DELETE FROM actor_workflow_manifests WHERE manifest_hash = %s RETURNING 1", BEFORE_HASH
            )
        try:
            report = (
                "refused: 3 of 3 open executions cannot be replayed by this code\n"
                "\n"
                "actor type Depot\n"
                "  workflow Ship\n"
                f"    - {message}: 3 open executions, oldest started {when(oldest)}\n"
                f"      what to do: {what_to_do}\n"
            )
            checked = await cli("workflows", "check", app_path, "--database-url", url)
            assert (checked.exit_code, checked.stdout) == (1, report), checked.output
            as_json = await cli("workflows", "check", app_path, "--json", "--database-url", url)
            assert as_json.exit_code == 1
            assert json.loads(as_json.stdout) == {
                "compatible": False,
                "open_executions": 3,
                "checked_against_start_manifests": 3,
                "refused_executions": 3,
                "refusals": [
                    {
                        "actor_type": "Depot",
                        "workflow": "Ship",
                        "reason": "step_missing" if reason == "step_renamed" else reason,
                        "step": step,
                        "marker": marker,
                        "message": message,
                        "executions": 3,
                        "oldest_started_at": oldest.astimezone(UTC).isoformat().replace("+00:00", "Z"),
                        "what_to_do": what_to_do,
                    }
                ],
                "actor_refusals": [],
                "actor_changes": [],
            }
            relay = await cli("relay", app_path, "--database-url", url)
            assert (relay.exit_code, relay.stderr) == (1, report), relay.output
            assert await peek.value("SELECT count(*) FROM akter_relay_members") == 0  # it never started

            # A runner of the deployed code meets the executions when their naps end (or their
            # timers, re-armed by the test before, fall due).
            app = depot.make_app(deployed, url)
            manifest_store._loaded.clear()  # a runner of new code is a new process: nothing loaded yet
            caplog.set_level(logging.INFO)
            async with app.relay() as running:
                clock = testing.Clock(url)
                now = await clock.advance(timedelta(hours=1, seconds=1))
                await settle(app, running)
                after = await clock.now()
            rows = await peek.rows(
                "SELECT e.status, e.outcome, e.blocked_reason, o.due_at, o.last_error"
                "  FROM actor_workflow_executions e"
                "  JOIN actor_outbox o ON o.timer_key = 'wf:' || e.execution_id"
            )
            assert len(rows) == 3
            if reason == "actor_type_missing":
                # The resume cannot even be delivered: the relay backs its timer off and says why.
                for status, outcome, _, _, last_error in rows:
                    assert (status, outcome) == ("suspended", None)
                    assert "this App declares no actor type 'Depot'" in last_error
            else:
                for status, outcome, blocked, due_at, _ in rows:
                    assert (status, outcome, blocked) == ("suspended", None, message)
                    # offered again a fixed interval (the runner's recheck, 60 s) after the pass
                    # that refused it, which ran between ``now`` and ``after`` (1 s: clock estimates)
                    minute = timedelta(seconds=60)
                    assert (
                        now + minute - timedelta(seconds=1) <= due_at <= after + minute + timedelta(seconds=1)
                    )
                left = [r for r in caplog.records if "left suspended" in r.getMessage()]
                warnings = [r.getMessage() for r in left]
                # each execution is reported (a pass fenced out by a second resume of its actor
                # runs again under the newer generation, and reports it again)
                assert len({getattr(r, "execution", None) for r in left}) == 3, warnings
                assert all(
                    r.levelno == logging.WARNING for r in caplog.records if "left suspended" in r.getMessage()
                )
                assert all(w.endswith(f"left suspended for a compatible runner: {message}") for w in warnings)
            # nothing ran, nothing was recorded, the executions stay on the code that started them
            assert await peek.rows(STEPS) == steps_before
            assert depot.CALLS == {}
            assert await peek.rows("SELECT DISTINCT manifest_hash FROM actor_workflow_executions") == [
                (ship_hash(started_by),)
            ]
        finally:
            if reason == "start_manifest_missing" and stored:
                await peek.rows(
                    "INSERT INTO actor_workflow_manifests VALUES (%s, %s, %s, %s, %s) RETURNING 1",
                    *stored[0][:3], psycopg.types.json.Jsonb(stored[0][3]), stored[0][4],
                )  # fmt: skip


@pytest.mark.parametrize(
    ("app_path", "on_current"),
    [
        ("tests.apps.depot:after", 0),  # a new step after the last recorded one (and a marker, min 0)
        ("tests.apps.depot:unreached_changed", 0),  # a step no execution reached has a new result type
        ("tests.apps.depot_cosmetic:renamed", 3),  # every Python name differs
        ("tests.apps.depot_cosmetic:reordered", 3),  # steps and fields declared in another order
        ("tests.apps.depot:new_workflow", 3),  # one more workflow
        ("tests.apps.depot:before", 3),  # nothing changed
    ],
)
async def test_compatible_deploys_pass_and_their_manifests_are_stored(
    app_path: str, on_current: int, parked: dict[str, str]
) -> None:
    url = parked["before"]
    workflows = manifest.all_workflows(load_app(app_path).actors.values())
    async with peeking(url) as peek:
        for wf in workflows:
            if manifest.of(wf)[1] != BEFORE_HASH:
                await peek.rows(
                    "DELETE FROM actor_workflow_manifests WHERE manifest_hash = %s RETURNING 1",
                    manifest.of(wf)[1],
                )
        checked = await cli("workflows", "check", app_path, "--database-url", url)
        assert (checked.exit_code, checked.stdout) == (
            0,
            f"compatible: 3 open executions ({on_current} on this code's manifests, "
            f"{3 - on_current} checked against their start manifests)\n",
        ), checked.output
        for wf in workflows:
            stored = await peek.value(
                "SELECT manifest FROM actor_workflow_manifests WHERE actor_type = %s AND workflow = %s"
                " AND manifest_hash = %s",
                wf.actor.name, wf.name, manifest.of(wf)[1],
            )  # fmt: skip
            assert stored == manifest.derive(wf)


async def test_refusals_are_grouped_by_actor_type_workflow_and_reason_with_counts_and_oldest_start(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    # minutes apart (their naps last an hour)
    await park(database_url, "before")  # o0..o2: no carrier marker
    await clock.advance(timedelta(minutes=10))
    await park(database_url, "before_marked", ids=("m0", "m1"))  # carrier = 1
    await clock.advance(timedelta(minutes=10))
    shop_app = shop.make_app(database_url)
    async with shop_app.relay() as relay, shop_app.client() as client:
        await client.actor(shop.Shop, "s1", tenant="acme").start(shop.Ship, shop.Order(id="x", sleep_s=3600))
        await settle(shop_app, relay)

    async def oldest(where: str) -> str:
        return when(await peek.value(f"SELECT min(started_at) FROM actor_workflow_executions WHERE {where}"))

    everything, marked = await oldest("actor_type = 'Depot'"), await oldest("key LIKE 'm%%'")
    unmarked, shop_started = await oldest("key LIKE 'o%%'"), await oldest("actor_type = 'Shop'")
    result = await cli("workflows", "check", "tests.apps.depot:reworked", "--database-url", database_url)
    assert result.exit_code == 1
    assert result.stdout == (
        "refused: 6 of 6 open executions cannot be replayed by this code\n"
        "\n"
        "actor type Depot\n"
        "  workflow Ship\n"
        "    - the result schema of recorded step 'reserve' changed: 5 open executions, "
        f"oldest started {everything}\n"
        "      what to do: keep the step's old result type; declare a step with a new name for the new type, "
        "chosen behind a version marker (wf.version), or drain these executions first\n"
        "    - version marker 'carrier' recorded 1, outside 2..3: 2 open executions, "
        f"oldest started {marked}\n"
        "      what to do: widen the marker's Versions(current, min) to include the recorded value, "
        "until these executions finish\n"
        "    - version marker 'carrier' has min 2 but was not recorded at start (it would replay as 0): "
        f"3 open executions, oldest started {unmarked}\n"
        "      what to do: lower the marker's min to 0 (so these executions replay as version 0), "
        "or drain them first\n"
        "\n"
        "actor type Shop\n"
        "  workflow Ship\n"
        f"    - actor type Shop is not declared: 1 open execution, oldest started {shop_started}\n"
        "      what to do: keep the actor type and its workflows declared until these executions finish "
        "(drain them first), then remove it\n"
    )
    assert everything == unmarked != marked != shop_started


def test_usage_and_database_errors_exit_2(parked: dict[str, str]) -> None:
    runner, url = CliRunner(), parked["before"]
    missing = runner.invoke(main, ["workflows", "check", "tests.apps.nowhere:app", "--database-url", url])
    assert (missing.exit_code, "cannot import" in missing.stderr) == (2, True)
    not_an_app = runner.invoke(main, ["workflows", "check", "tests.apps.depot:Yard", "--database-url", url])
    assert (not_an_app.exit_code, "not an akter.App" in not_an_app.stderr) == (2, True)
    assert runner.invoke(main, ["workflows", "check"]).exit_code == 2
    nowhere = "postgresql://nobody@127.0.0.1:1/x"
    unreachable = runner.invoke(
        main, ["workflows", "check", "tests.apps.depot:after", "--database-url", nowhere]
    )
    assert unreachable.exit_code == 2, unreachable.output
    assert unreachable.stderr.startswith("akter: ")
