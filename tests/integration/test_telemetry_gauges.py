"""The gauges of what the database holds: executions by status, the outbox's backlog per bucket
range, parked intents — read from the SDK's in-memory metric reader over real executions, at most
once per interval however often the metrics are collected, and (on 100,000 executions and 60,000
intents) without a sequential scan of either big table."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from akter import demo, testing
from akter.ids import ActorRef
from akter.operate import gauges as db_gauges
from tests.integration.conftest import Peek
from tests.integration.otel_support import install, metric_points
from tests.integration.workflow_support import quiet


@pytest.fixture(scope="module", autouse=True)
def _sdk() -> None:
    install()


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ticks() -> Ticks:
    return Ticks()


@pytest.fixture
def gauges(database_url: str, ticks: Ticks) -> Iterator[db_gauges.DatabaseGauges]:
    source = db_gauges.observe_database(database_url, every=15, clock=ticks)
    yield source
    source.close()


def _gauge(name: str) -> dict[tuple[tuple[str, object], ...], Any]:
    return {labels: value for (metric, labels), value in metric_points().items() if metric == name}


async def test_the_gauges_report_what_the_database_holds(
    database_url: str, peek: Peek, gauges: db_gauges.DatabaseGauges, ticks: Ticks
) -> None:
    app = demo.make_app(database_url)
    async with app.relay() as relay, app.client() as client:
        orders = client.actor(demo.DemoShop, "shop-1", tenant="demo")
        for n in range(1, 4):
            order = demo.Order(f"order-{n}", "warehouse-1", demo.SKU, qty=1, amount_cents=100)
            await orders.start(demo.Fulfil, order)
        await quiet(app, relay)
        await testing.Clock(database_url).advance(demo.COOL_OFF * 2)
        await quiet(app, relay)  # three executions wait for their payment
    # with no relay running: one execution blocked, one intent parked, two intents due an hour ago
    await peek.conn.execute(
        "UPDATE actor_workflow_executions SET blocked_reason = 'this App declares no workflow X'"
        " WHERE key = 'order-1'"
    )
    shop = ActorRef("demo", demo.DemoShop.name, "shop-1")
    parked = await peek.value(
        "UPDATE actor_outbox SET due_at = akter_parked_due(), parked_at = akter_now(), parked_reason = 'test'"
        " WHERE timer_key = (SELECT 'wf:' || execution_id FROM actor_workflow_executions"
        " WHERE key = 'order-2')"
        " RETURNING bucket"
    )
    await peek.conn.execute(
        "UPDATE actor_outbox SET due_at = akter_now() - interval '1 hour' WHERE timer_key IN"
        " (SELECT 'wf:' || execution_id FROM actor_workflow_executions WHERE key IN ('order-1', 'order-3'))"
    )
    assert parked == shop.bucket

    assert _gauge("akter.workflow.execution.count") == {(("akter.execution.status", "suspended"),): 3}
    assert _gauge("akter.workflow.execution.blocked") == {(): 1}
    assert _gauge("akter.workflow.execution.needs_attention") == {(): 0}
    assert _gauge("akter.outbox.parked") == {(): 1}
    depth = _gauge("akter.outbox.depth")
    assert len(depth) == 16  # every range is reported, the empty ones as 0
    (low,) = [b for b in range(-128, 128, 16) if b <= shop.bucket < b + 16]
    here = (("akter.outbox.buckets", f"{low}..{low + 15}"),)
    assert depth[here] == 2
    assert sum(depth.values()) == 2
    age = _gauge("akter.outbox.oldest_due.age")
    assert list(age) == [here]  # only a range with something due has an oldest
    assert age[here] >= 3600
    assert gauges.reads == 1  # one read served every gauge of that collection

    # a status a later migration adds (an operator's pause, needs attention) shows up by itself
    await peek.conn.execute(
        "ALTER TABLE actor_workflow_executions DROP CONSTRAINT actor_workflow_executions_status_check"
    )
    await peek.conn.execute(
        "UPDATE actor_workflow_executions SET status = 'needs_attention' WHERE key = 'order-2'"
    )
    await peek.conn.execute("UPDATE actor_workflow_executions SET status = 'paused' WHERE key = 'order-3'")
    assert _gauge("akter.workflow.execution.count") == {(("akter.execution.status", "suspended"),): 3}
    assert gauges.reads == 1  # a collection within the interval reads nothing: the cached reading
    ticks.now += 14.9
    assert _gauge("akter.workflow.execution.count") == {(("akter.execution.status", "suspended"),): 3}
    ticks.now += 0.1  # the interval is over: the next collection reads the database again
    assert _gauge("akter.workflow.execution.count") == {
        (("akter.execution.status", status),): 1 for status in ("needs_attention", "paused", "suspended")
    }
    assert _gauge("akter.workflow.execution.needs_attention") == {(): 1}
    assert gauges.reads == 2


def test_a_database_that_cannot_be_read_reports_nothing_and_raises_nothing() -> None:
    source = db_gauges.observe_database("postgresql://nobody@127.0.0.1:1/none", every=3600, timeout=1)
    try:
        assert _gauge("akter.outbox.parked") == {}
        assert source.reads == 1
        assert _gauge("akter.outbox.parked") == {}
        assert source.reads == 1  # not tried again before the interval is over
    finally:
        source.close()
    assert _gauge("akter.outbox.parked") == {}


def test_bucket_ranges_must_divide_the_buckets() -> None:
    with pytest.raises(ValueError, match="power of two"):
        db_gauges.DatabaseGauges("postgresql://", ranges=10)
    assert db_gauges.DatabaseGauges("postgresql://", ranges=4).range_name(3) == "64..127"


# ---- the plans on big tables -----------------------------------------------------------------

_EXECUTIONS = """
INSERT INTO actor_workflow_executions
    (routing_key, execution_id, tenant, actor_type, actor_id, workflow, key, manifest_hash, payload,
     principal, event_cursor, status, outcome, blocked_reason, started_at, updated_at, finished_at)
SELECT (i * 7919) %% 9223372036854775807 - 4611686018427387904 * (i %% 2), 'x-' || i, 't', 'Shop',
       'a-' || (i %% 5000), 'Ship', 'k-' || i, 'm', '\\x00', '\\x00', 0,
       CASE WHEN i %% 100 = 0 THEN 'running' WHEN i %% 100 < 4 THEN 'suspended' ELSE 'finished' END,
       CASE WHEN i %% 100 >= 4 THEN 'succeeded' END,
       CASE WHEN i %% 1000 = 1 THEN 'blocked' END,
       akter_now() - i * interval '1 second', akter_now(),
       CASE WHEN i %% 100 >= 4 THEN akter_now() END
  FROM generate_series(1, %(n)s) AS i"""

_OUTBOX = """
INSERT INTO actor_outbox
    (routing_key, tenant, actor_type, actor_id, intent_id, bucket, due_at, target_type, target_id,
     command, payload, caller, created_at, parked_at, parked_reason)
SELECT i, 't', 'Shop', 'a-' || i, 'i-' || i, (i %% 256) - 128,
       CASE WHEN i %% 50 = 0 THEN akter_now() - interval '1 minute'
            WHEN i %% 97 = 0 THEN akter_parked_due()
            ELSE akter_now() + interval '1 day' + i * interval '1 second' END,
       'Shop', 'a', 'c', '\\x00', '\\x00', akter_now(),
       CASE WHEN i %% 97 = 0 AND i %% 50 <> 0 THEN akter_now() END,
       CASE WHEN i %% 97 = 0 AND i %% 50 <> 0 THEN 'test' END
  FROM generate_series(1, %(n)s) AS i"""


def _scans(plan: dict[str, Any]) -> list[tuple[str, str]]:
    found = [(plan["Node Type"], plan.get("Relation Name", ""))]
    for child in plan.get("Plans", []):
        found += _scans(child)
    return found


@pytest.mark.slow
async def test_no_gauge_read_scans_a_big_table(database_url: str, peek: Peek) -> None:
    await peek.conn.execute(_EXECUTIONS, {"n": 100_000})
    await peek.conn.execute(_OUTBOX, {"n": 60_000})
    await peek.conn.execute("ANALYZE actor_workflow_executions")
    await peek.conn.execute("ANALYZE actor_outbox")
    source = db_gauges.DatabaseGauges(database_url)
    statements = {
        "executions by status": (db_gauges.EXECUTIONS_BY_STATUS, {}),
        "blocked": (db_gauges.BLOCKED, {}),
        "parked": (db_gauges.PARKED, {}),
        "backlog": (db_gauges.BACKLOG, {"width": source.width, "cap": source.cap}),
    }
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for name, (sql, params) in statements.items():
            cur = await conn.execute("EXPLAIN (FORMAT JSON) " + sql, params)
            row = await cur.fetchone()
            assert row is not None
            plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
            scans = _scans(plan[0]["Plan"])
            big = {"actor_workflow_executions", "actor_outbox"}
            assert not [r for node, r in scans if node == "Seq Scan" and r in big], (name, scans)
            assert any(r in big for _, r in scans), (name, scans)
    snapshot = source.read()
    assert snapshot.executions == {"running": 1000, "suspended": 3000}
    assert snapshot.blocked == 100  # i % 1000 = 1: suspended ones
    assert sum(n for n, _ in snapshot.backlog.values()) == 1200
    assert snapshot.parked == len([i for i in range(1, 60_001) if i % 97 == 0 and i % 50 != 0])
    assert all(age is not None and age >= 60 for _, age in snapshot.backlog.values())
    # a pile-up is counted up to the cap per bucket: the read stays bounded
    capped = db_gauges.DatabaseGauges(database_url, cap=2)
    buckets_due = {(i % 256) - 128 for i in range(50, 60_001, 50)}
    assert sum(n for n, _ in capped.read().backlog.values()) == 2 * len(buckets_due)


async def test_a_relay_reports_the_gauges_without_being_asked(database_url: str) -> None:
    app = demo.make_app(database_url)
    async with app.relay() as relay, app.client() as client:
        orders = client.actor(demo.DemoShop, "shop-1", tenant="demo")
        order = demo.Order("order-1", "warehouse-1", demo.SKU, qty=1, amount_cents=100)
        await orders.start(demo.Fulfil, order)
        await quiet(app, relay)
        counts = _gauge("akter.workflow.execution.count")
        assert sum(counts.values()) >= 1
    # once the relay stopped, this process reports them no more
    assert _gauge("akter.workflow.execution.count") == {}
