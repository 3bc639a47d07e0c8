"""A rolling deploy: two ``akter relay`` processes over one database, one running the old code
(``tests.apps.depot:before``) and one the new (``tests.apps.depot:after``, which adds a step
``notify`` behind a version marker), while clients of both versions start executions.

What must hold: the deploy check accepts the new code; executions the old code cannot replay
(started by the new code) stay suspended in the old relay with the reason recorded and nothing
run; the new relay replays the old code's executions on their old path; once the old relay is
drained, the new one finishes everything; nothing fails, no step runs twice. And a relay process
whose code cannot replay an open execution does not start at all: it exits 1 with the report.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import pytest

from akter import testing
from akter.ids import ActorRef
from akter.workflow.core import manifest
from tests.apps import depot
from tests.apps.depot import Order
from tests.apps.relay_procs import ROOT, TEST_SETTINGS
from tests.integration.conftest import Peek
from tests.integration.workflow_support import until

pytestmark = pytest.mark.slow

NEW = manifest.of(depot.VARIANTS["after"][0].workflows["Ship"])[1]
BLOCKED = (
    "step 'notify' (an activity) is no longer declared; "
    "version marker 'notify' (recorded 1) is no longer declared"
)


class Relay:
    """One ``akter relay tests.apps.depot:<variant>`` process, its log in a file."""

    def __init__(self, url: str, variant: str) -> None:
        self.log = tempfile.NamedTemporaryFile(prefix="akter-deploy-", suffix=".log", delete=False)  # noqa: SIM115 -- kept open for the child's lifetime
        env = {**os.environ, **TEST_SETTINGS, "AKTER_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "akter.cli", "relay", f"tests.apps.depot:{variant}"],
            env=env, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def output(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def terminate(self) -> int:
        self.proc.terminate()
        return self.proc.wait(timeout=30)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)


@pytest.fixture
def relays() -> Iterator[list[Relay]]:
    started: list[Relay] = []
    yield started
    for relay in started:
        relay.close()


def ship_of(variant: str) -> Any:
    return depot.VARIANTS[variant][0].workflows["Ship"]


async def start(url: str, variant: str, *placed: tuple[str, str]) -> None:
    """Start executions with ``variant``'s code, as a client (a web process) would: (actor, order)."""
    actor = depot.VARIANTS[variant][0]
    async with depot.make_app(variant, url).client() as client:
        for actor_id, order in placed:
            await client.actor(actor, actor_id, tenant="acme").start(ship_of(variant), Order(id=order))


async def test_a_rolling_deploy_strands_nothing_and_replays_nothing_wrongly(
    database_url: str, peek: Peek, clock: testing.Clock, relays: list[Relay]
) -> None:
    url = database_url
    parked = "SELECT count(*) FROM actor_workflow_step WHERE step = 'nap' AND exit IS NULL"

    async def owned_by(relay: Relay) -> set[int]:
        rows = await peek.rows(
            "SELECT bucket FROM akter_relay_buckets WHERE owner LIKE %s AND expires_at > clock_timestamp()",
            f"%:{relay.proc.pid}:%",
        )
        return {bucket for (bucket,) in rows}

    old = Relay(url, "before")
    relays.append(old)
    await until(lambda: owned_by(old), lambda b: len(b) == 256, "the old relay owns every bucket")
    await start(url, "before", ("p0", "pre-0"), ("p1", "pre-1"))
    await until(lambda: peek.value(parked), lambda n: n == 2, "the old code's executions park")

    check = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "akter.cli", "workflows", "check", "tests.apps.depot:after",
         "--database-url", url],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert (check.returncode, check.stdout) == (
        0,
        "compatible: 2 open executions "
        "(0 on this code's manifests, 2 checked against their start manifests)\n",
    ), check.stderr

    new = Relay(url, "after")
    relays.append(new)
    await until(lambda: owned_by(new), lambda b: 0 < len(b) < 256, "the new relay takes a share")
    await until(
        lambda: peek.value("SELECT count(*) FROM akter_relay_buckets WHERE owner IS NOT NULL"),
        lambda n: n == 256, "every bucket owned",
    )  # fmt: skip
    assert "workflow check: compatible: 2 open executions" in new.output()
    old_buckets, new_buckets = await owned_by(old), await owned_by(new)
    bucket = {
        f"d{i}": ActorRef(tenant="acme", actor_type="Depot", actor_id=f"d{i}").bucket for i in range(200)
    }
    in_old = next(actor_id for actor_id, b in bucket.items() if b in old_buckets)
    in_new = next(actor_id for actor_id, b in bucket.items() if b in new_buckets)

    # During the deploy, clients of both versions start executions in both relays' buckets.
    await start(url, "before", (in_old, "old-a"), (in_new, "old-b"))
    await start(url, "after", (in_old, "new-a"), (in_new, "new-b"))
    await until(lambda: peek.value(parked), lambda n: n == 5, "all but new-a park")
    await until(
        lambda: peek.value("SELECT blocked_reason FROM actor_workflow_executions WHERE key = 'new-a'"),
        lambda r: r is not None, "the old relay refuses new-a",
    )  # fmt: skip
    assert await peek.rows(
        "SELECT status, blocked_reason, (SELECT count(*) FROM actor_workflow_step s"
        "  WHERE s.execution_id = e.execution_id) FROM actor_workflow_executions e WHERE key = 'new-a'"
    ) == [("suspended", BLOCKED, 0)]
    refusals = [
        line for line in old.output().splitlines() if "left suspended for a compatible runner" in line
    ]
    assert len(refusals) == 1, refusals
    assert " WARNING " in refusals[0]
    # the reason, then the execution as a field, by its readable parts (tenant/type/id/workflow/key)
    assert f"compatible runner: {BLOCKED} execution=acme/" in refusals[0]
    assert "/Ship/new-a " in refusals[0]

    # The old relay is drained; the new one takes its buckets and finishes everything.
    assert old.terminate() == 0, old.output()
    await until(lambda: owned_by(new), lambda b: len(b) == 256, "the new relay owns every bucket")
    await clock.advance(timedelta(hours=1, seconds=1))  # naps end; new-a's recheck falls due
    await until(
        lambda: peek.value("SELECT count(*) FROM actor_workflow_executions WHERE status = 'finished'"),
        lambda n: n == 5, "the parked executions finish",
    )  # fmt: skip
    await until(lambda: peek.value(parked), lambda n: n == 1, "new-a parks under the new relay")
    await clock.advance(timedelta(hours=1, seconds=1))
    await until(
        lambda: peek.value("SELECT count(*) FROM actor_workflow_executions WHERE status = 'finished'"),
        lambda n: n == 6, "new-a finishes",
    )  # fmt: skip

    outcomes = await peek.rows(
        "SELECT key, outcome, blocked_reason, manifest_hash, versions"
        "  FROM actor_workflow_executions ORDER BY key"
    )
    old_path, new_path = ("succeeded", None, NEW, {}), ("succeeded", None, NEW, {"notify": 1})
    assert outcomes == [
        ("new-a", *new_path), ("new-b", *new_path),
        ("old-a", *old_path), ("old-b", *old_path), ("pre-0", *old_path), ("pre-1", *old_path),
    ]  # fmt: skip
    # every step ran once (one attempt each); only the new executions notified
    steps = await peek.rows(
        "SELECT e.key, string_agg(s.step || ':' || s.attempt, ' ' ORDER BY s.step, s.attempt)"
        "  FROM actor_workflow_executions e JOIN actor_workflow_step s USING (routing_key, execution_id)"
        " GROUP BY e.key ORDER BY e.key"
    )
    assert steps == [
        ("new-a", "nap:1 notify:1 reserve:1 ship:1"), ("new-b", "nap:1 notify:1 reserve:1 ship:1"),
        ("old-a", "nap:1 reserve:1 ship:1"), ("old-b", "nap:1 reserve:1 ship:1"),
        ("pre-0", "nap:1 reserve:1 ship:1"), ("pre-1", "nap:1 reserve:1 ship:1"),
    ]  # fmt: skip
    assert await peek.count("actor_outbox") == 0
    assert new.terminate() == 0, new.output()


async def test_a_relay_process_whose_code_cannot_replay_an_open_execution_refuses_to_start(
    database_url: str, peek: Peek
) -> None:
    await start(database_url, "before", ("d1", "o1"))
    oldest = await peek.value("SELECT started_at FROM actor_workflow_executions")
    refusing = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "akter.cli", "relay", "tests.apps.depot:step_removed"],
        env={**os.environ, **TEST_SETTINGS, "AKTER_DATABASE_URL": database_url, "PYTHONPATH": str(ROOT)},
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert refusing.returncode == 1, refusing.stderr
    assert (
        "refused: 1 of 1 open execution cannot be replayed by this code\n"
        "\n"
        "actor type Depot\n"
        "  workflow Ship\n"
        "    - step 'ship' (an activity) is no longer declared: 1 open execution, "
        f"oldest started {oldest.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC\n"
        "      what to do: keep the step declared under its old name (a rename is a removal); "
        "stop calling it in new executions behind a version marker (wf.version), or drain these "
        "executions first\n"
    ) in refusing.stderr
    assert "the relay refuses to start" in refusing.stderr
    assert await peek.count("akter_relay_members") == 0
