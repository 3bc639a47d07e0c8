"""OpenTelemetry: the span tree of a real run, read from the SDK's in-memory exporter.

The demo's shop takes an order inside a client span ("checkout"); the relay runs in this process.
Every span of the run is in the checkout's trace: the start turn is the checkout's child, the
passes and their activity attempts descend from turns, and each timer the relay delivers joins
the trace through the context stored with the intent — the same context a relay in another
process would read (checked through a second connection)."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path

import pytest
from opentelemetry import trace
from returns.result import Success

from akter import demo, telemetry, testing
from akter.operate import gauges
from tests.apps.relay_procs import RelayProcess
from tests.integration.conftest import Peek
from tests.integration.otel_support import EXPORTER, install, metric_points, parent_chain
from tests.integration.workflow_support import quiet, until


@pytest.fixture(scope="module", autouse=True)
def _sdk() -> None:
    install()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    EXPORTER.clear()


async def test_a_run_is_one_trace_rooted_in_the_client_span(database_url: str, peek: Peek) -> None:
    app = demo.make_app(database_url)
    checkout_tracer = trace.get_tracer("shop-frontend")
    async with app.relay() as relay, app.client() as client:
        orders = client.actor(demo.DemoShop, "shop-1", tenant="demo")
        with checkout_tracer.start_as_current_span("checkout") as checkout:
            order = demo.Order("order-1", "warehouse-1", demo.SKU, qty=2, amount_cents=5000)
            run = await orders.start(demo.Fulfil, order)
        trace_id = checkout.get_span_context().trace_id
        await quiet(app, relay)
        # stored with the execution: the start turn's context, ids only
        stored = await peek.value(
            "SELECT trace_context FROM actor_workflow_executions WHERE execution_id = %s", run.execution_id
        )
        assert set(json.loads(stored)) <= {"traceparent", "tracestate"}
        assert f"{trace_id:032x}" in json.loads(stored)["traceparent"]
        timer = await peek.value(
            "SELECT trace_context FROM actor_outbox WHERE timer_key = 'wf:' || %s", run.execution_id
        )
        assert timer == stored  # the timer carries it to whichever relay resumes the execution
        await testing.Clock(database_url).advance(demo.COOL_OFF * 2)
        await quiet(app, relay)
        await orders.send(demo.pay, demo.Pay(order="order-1", amount_cents=5000))  # outside the trace
        assert isinstance(await run.result(timeout=20), Success)
        await quiet(app, relay)

    spans = EXPORTER.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    ours = [s for s in spans if s.context.trace_id == trace_id]
    names = {s.name for s in ours}
    start_turn = next(s for s in ours if s.name.startswith("akter.turn DemoShop.") and "Fulfil" in s.name)
    assert start_turn.parent is not None
    assert by_id[start_turn.parent.span_id].name == "checkout"
    assert start_turn.attributes is not None
    assert start_turn.attributes["akter.turn.outcome"] == "ok"
    assert start_turn.attributes["akter.turn.replayed"] is False
    # the stock reservation: a turn on the warehouse inside the activity attempt, inside a pass
    for step in ("reserve", "ship"):
        attempt = next(s for s in ours if s.name == f"akter.activity {step}")
        assert attempt.attributes is not None
        assert attempt.attributes["akter.activity.outcome"] == "ok"
        assert attempt.attributes["akter.activity.attempt"] == 1
        chain = parent_chain(attempt, by_id)
        assert chain[0] == "akter.pass Fulfil"
        assert chain[-1] == "checkout"
    reserve = next(s for s in ours if s.name == "akter.activity reserve")
    assert any(
        s.name.startswith("akter.turn DemoWarehouse.")
        and s.parent
        and s.parent.span_id == reserve.context.span_id
        for s in ours
    )
    # the cool-off's timer was delivered by the relay inside the same trace, and resumed the pass
    deliveries = [s for s in ours if s.name.startswith("akter.deliver DemoShop.")]
    assert deliveries, names
    assert all(s.attributes and s.attributes["akter.intent.timer"] for s in deliveries)
    resumed = [
        s
        for s in ours
        if s.name == "akter.pass Fulfil" and "akter.deliver" in " ".join(parent_chain(s, by_id))
    ]
    assert resumed, "no pass ran under a relay delivery"
    suspend = [s for s in ours if s.name == "akter.suspend"]
    assert any(s.attributes and s.attributes["akter.suspend.on"] == "timer" for s in suspend)
    # the pay command was sent outside the checkout: its turn is a trace of its own
    pay = next(s for s in spans if s.name == "akter.turn DemoShop.pay")
    assert pay.context.trace_id != trace_id

    recorded = metric_points()
    assert recorded[("akter.turns", (("akter.actor.type", "DemoShop"), ("akter.turn.outcome", "ok")))] >= 3
    assert (
        recorded[("akter.activity.attempts", (("akter.activity.outcome", "ok"), ("akter.step", "ship")))] >= 1
    )
    assert recorded[("akter.deliveries", (("akter.delivery.result", "delivered"),))] >= 1
    assert recorded[("akter.workflow.suspensions", (("akter.suspend.on", "timer"),))] >= 1


def test_every_instrument_is_documented() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "observability.md").read_text()
    for name, (unit, _) in {**telemetry.COUNTERS, **telemetry.HISTOGRAMS, **gauges.GAUGES}.items():
        assert f"| `{name}` |" in text, name
        assert f"| `{unit}` |" in text, unit


def test_no_context_is_stored_when_nothing_is_traced() -> None:
    assert telemetry.carrier() is None
    assert telemetry.context_of(None) is None
    assert telemetry.context_of("not json") is None
    assert telemetry.context_of('["a list"]') is None
    with telemetry.joined("{bad"):
        assert telemetry.carrier() is None


@pytest.mark.slow
async def test_a_relay_in_another_process_joins_the_trace_the_client_started(
    database_url: str, tmp_path: Path
) -> None:
    spans_file = tmp_path / "relay-spans.jsonl"
    spans_file.touch()
    app = demo.make_app(database_url)
    relay = RelayProcess(database_url, app="tests.apps.otel_relay:app", AKTER_TEST_SPANS=str(spans_file))
    try:
        async with app.client() as client:  # no relay here: the child runs every pass
            orders = client.actor(demo.DemoShop, "shop-1", tenant="demo")
            with trace.get_tracer("shop-frontend").start_as_current_span("checkout") as checkout:
                order = demo.Order("order-1", "warehouse-1", demo.SKU, qty=1, amount_cents=900)
                run = await orders.start(demo.Fulfil, order)
            # a barrier on what the test asserts: the child's pass suspended before the payment
            # and the clock can wake it (sent at once, they could reach a pass that never waits)
            await until(run.poll, lambda s: s.status == "suspended")
            await orders.send(demo.pay, demo.Pay(order="order-1", amount_cents=900))
            await testing.Clock(database_url).advance(demo.COOL_OFF * 2)
            assert isinstance(await run.result(timeout=60), Success)
        assert relay.terminate() == 0, relay.output()
    finally:
        relay.close()

    trace_id = f"{checkout.get_span_context().trace_id:032x}"
    here = {f"{s.context.span_id:016x}": s for s in EXPORTER.get_finished_spans()}
    start_turn = next(s for s in here.values() if s.name == "akter.turn DemoShop.Fulfil")
    there = [json.loads(line) for line in spans_file.read_text().splitlines()]
    joined = [s for s in there if s["trace_id"] == trace_id]
    names = [s["name"] for s in joined]
    # the first delivery of the execution's timer is the child of the start turn in this process
    first = next(s for s in joined if s["name"] == "akter.deliver DemoShop.akter.wf.resume")
    assert first["parent_id"] == f"{start_turn.context.span_id:016x}"
    for name in ("akter.pass Fulfil", "akter.activity reserve", "akter.activity ship", "akter.suspend"):
        assert name in names, names
    assert "akter.turn DemoWarehouse.reserve_stock" in names


# ---- what a pass ended in --------------------------------------------------------------------


def _passes(execution_id: str) -> list[dict[str, object]]:
    """The attributes of each finished pass span of one execution, in the order they ended."""
    return [
        dict(s.attributes or {})
        for s in EXPORTER.get_finished_spans()
        if s.name.startswith("akter.pass ") and (s.attributes or {}).get("akter.execution.id") == execution_id
    ]


async def test_each_pass_span_says_what_the_pass_ended_in(database_url: str, peek: Peek) -> None:
    app = demo.make_app(database_url)
    clock = testing.Clock(database_url)
    async with app.relay() as relay, app.client() as client:
        orders = client.actor(demo.DemoShop, "shop-1", tenant="demo")
        paid = await orders.start(
            demo.Fulfil, demo.Order("order-1", "warehouse-1", demo.SKU, qty=1, amount_cents=900)
        )
        late = await orders.start(
            demo.Fulfil,
            demo.Order("order-2", "warehouse-1", demo.SKU, qty=1, amount_cents=100, payment_window_s=5),
        )
        await quiet(app, relay)
        await clock.advance(demo.COOL_OFF * 2)
        await quiet(app, relay)
        # both wait for their payment, each with its deadline's timer armed
        waiting = _passes(paid.execution_id)[-1]
        assert waiting["akter.pass.result"] == "suspended"
        assert waiting["akter.suspend.on"] == "timer"
        assert waiting["akter.suspend.steps"] == ("payment#1",)
        assert waiting["akter.suspend.kinds"] == ("wait",)
        assert waiting["akter.suspend.events"] == ("PaymentReceived",)
        due = await peek.value(
            "SELECT due_at FROM actor_outbox WHERE timer_key = 'wf:' || %s", paid.execution_id
        )
        assert waiting["akter.suspend.until"] == due.isoformat()
        await orders.send(demo.pay, demo.Pay(order="order-1", amount_cents=900))
        assert isinstance(await paid.result(timeout=20), Success)
        await clock.advance(timedelta(hours=1))  # order-2's window closes: it fails, an hour late
        assert (await late.result(timeout=20)).failure().order == "order-2"
        await quiet(app, relay)

    finished = _passes(paid.execution_id)[-1]
    assert finished["akter.pass.result"] == "finished"
    assert finished["akter.execution.outcome"] == "succeeded"
    assert _passes(late.execution_id)[-1]["akter.execution.outcome"] == "failed"
    # the timer of order-2's deadline was delivered an hour after it was due
    resumes = [
        s
        for s in EXPORTER.get_finished_spans()
        if s.name == "akter.deliver DemoShop.akter.wf.resume" and s.attributes is not None
    ]
    lags = [float(s.attributes["akter.delivery.lag"]) for s in resumes if s.attributes]
    assert max(lags) >= 3000, lags
    points = metric_points()
    lag = points[("akter.delivery.lag", (("akter.delivery.result", "delivered"),))]
    assert lag >= len(resumes)
    assert (
        points[("akter.workflow.passes", (("akter.pass.result", "finished"), ("akter.workflow", "Fulfil")))]
        >= 2
    )
    assert (
        points[("akter.workflow.passes", (("akter.pass.result", "suspended"), ("akter.workflow", "Fulfil")))]
        >= 2
    )


async def test_a_pass_that_cannot_run_the_execution_says_why_it_left_it_blocked(
    database_url: str, peek: Peek
) -> None:
    app = demo.make_app(database_url)
    async with app.relay() as relay, app.client() as client:
        orders = client.actor(demo.DemoShop, "shop-1", tenant="demo")
        run = await orders.start(
            demo.Fulfil, demo.Order("order-1", "warehouse-1", demo.SKU, qty=1, amount_cents=9)
        )
        await quiet(app, relay)
        await peek.conn.execute(
            "UPDATE actor_workflow_executions"
            " SET payload = '\\x00'::bytea || convert_to('{\"id\": 7}', 'UTF8') WHERE execution_id = %s",
            (run.execution_id,),
        )
        await testing.Clock(database_url).advance(timedelta(hours=1))
        await until(lambda: _blocked(peek, run.execution_id), bool)
        await quiet(app, relay)
    blocked = _passes(run.execution_id)[-1]
    assert blocked["akter.pass.result"] == "blocked"
    assert str(blocked["akter.pass.blocked_reason"]).startswith(
        "the execution's stored input does not decode"
    )


async def _blocked(peek: Peek, execution_id: str) -> bool:
    reason = await peek.value(
        "SELECT blocked_reason FROM actor_workflow_executions WHERE execution_id = %s", execution_id
    )
    return reason is not None


async def test_a_pass_whose_generation_was_taken_ends_fenced_not_failed(
    database_url: str, peek: Peek
) -> None:
    app = demo.make_app(database_url)
    async with app.relay() as relay, app.client() as client:
        orders = client.actor(demo.DemoShop, "shop-9", tenant="demo")
        suspending = testing.pause("workflow.before_suspend", match="shop-9")
        run = await orders.start(
            demo.Fulfil, demo.Order("order-9", "warehouse-1", demo.SKU, qty=1, amount_cents=9)
        )
        await suspending.reached()  # the first pass is about to suspend on the cool-off or the wait
        taken = await peek.value(
            "UPDATE actor_generations SET generation = generation + 1 WHERE actor_id = 'shop-9' RETURNING 1"
        )
        assert taken == 1
        suspending.release()
        await until(lambda: _ended(run.execution_id), bool)
        await quiet(app, relay)
    fenced = next(p for p in _passes(run.execution_id) if p["akter.pass.result"] == "fenced")
    span = next(
        s for s in EXPORTER.get_finished_spans() if (s.attributes or {}).get("akter.pass.result") == "fenced"
    )
    assert span.status.status_code != trace.StatusCode.ERROR  # a lost race is not a failure
    assert fenced["akter.execution.id"] == run.execution_id


async def _ended(execution_id: str) -> bool:
    return bool(_passes(execution_id))


async def test_a_pass_that_holds_for_a_pause_says_so(database_url: str, peek: Peek) -> None:
    from tests.apps import flows

    flows.CALLS.clear()
    flows.GATES.clear()
    app = flows.make_app(database_url)
    async with app.relay() as relay, app.client() as client:
        run = await client.actor(flows.Flows, "pz", tenant="acme").start(
            flows.Book, flows.Job("held", seconds=0)
        )
        await until(lambda: asyncio.sleep(0, flows.CALLS.get("held-hold", 0)), lambda n: n == 1)
        settling = testing.pause("workflow.before_settle", match="pz")
        flows.gate("held-hold").set()
        await settling.reached()  # the attempt in flight returned; its outcome is not recorded yet
        await client.pause_executions(run.execution_id, reason="drain")
        passes = app.workflow_runner._passes
        await until(
            lambda: asyncio.sleep(0, passes.get(run.execution_id)), lambda p: p is not None and p.pausing
        )
        settling.release()
        await until(
            lambda: peek.value(
                "SELECT status FROM actor_workflow_executions WHERE execution_id = %s", run.execution_id
            ),
            lambda s: s == "paused",
        )
        await quiet(app, relay)
        # the pass that held it says so (a later wake-up finds it resting and returns)
        assert "paused" in [p["akter.pass.result"] for p in _passes(run.execution_id)]
        await client.resume_executions(run.execution_id)
        await run.result(timeout=60)
    testing.disarm_all()
