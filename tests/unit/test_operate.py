"""The pure parts of operating executions: retry keys, filters, cursors and the "why" line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs
import pytest

import akter
from akter.ids import ActorRef, ExecutionId
from akter.operate.query import ExecutionFilter, decode_cursor, encode_cursor, page_query, readable
from akter.operate.why import Pending, why
from akter.workflow.api.commands import retry_key

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_retry_keys_count_up_from_the_original() -> None:
    assert retry_key("order-1") == "order-1~retry"
    assert retry_key("order-1~retry") == "order-1~retry2"
    assert retry_key("order-1~retry2") == "order-1~retry3"
    assert retry_key("order-1~retry9") == "order-1~retry10"
    assert retry_key("a~retryx") == "a~retryx~retry"


def test_a_filter_checks_its_criteria_and_names_declarations() -> None:
    with pytest.raises(akter.InvalidInput, match="unknown outcome 'lost'"):
        ExecutionFilter(outcome=["failed", "lost"])
    with pytest.raises(akter.InvalidInput, match="with its tenant and actor type"):
        ExecutionFilter(tenant="acme", actor_id="x")
    assert ExecutionFilter(status=["blocked", "running", "blocked"]).status == ("running", "blocked")
    naive = ExecutionFilter(started_after=datetime(2026, 1, 1))
    assert naive.started_after == datetime(2026, 1, 1, tzinfo=UTC)
    assert ExecutionFilter.of(tenant="acme") == ExecutionFilter(tenant="acme")
    with pytest.raises(akter.InvalidInput, match="not both"):
        ExecutionFilter.of(ExecutionFilter(), tenant="acme")
    with pytest.raises(akter.InvalidInput, match=r"1\.\.1000 rows"):
        page_query(ExecutionFilter(), limit=0)


def test_cursors_round_trip_and_nonsense_is_refused() -> None:
    row = {"started_at": NOW, "routing_key": -42, "execution_id": "x1.abc"}
    assert decode_cursor(encode_cursor(row)) == (NOW, -42, "x1.abc")
    with pytest.raises(akter.InvalidInput, match="is not a cursor"):
        decode_cursor("bm90IGpzb24")


def test_readable_ids() -> None:
    eid = ExecutionId(ActorRef("acme", "Shop", "s-1"), "Ship", "order-7")
    assert readable(str(eid)) == "acme/Shop/s-1 Ship 'order-7'"
    assert readable("not-an-id") == "not-an-id"


def _why(**given: object) -> str:
    base: dict[str, object] = {
        "status": "suspended",
        "outcome": None,
        "blocked_reason": None,
        "interrupt": False,
        "interrupted_by": None,
        "interrupt_reason": None,
        "pending": [],
        "timer_due_at": None,
        "timer_parked": None,
        "now": NOW,
    }
    return why(**(base | given))  # type: ignore[arg-type]


def test_why_an_execution_is_where_it_is() -> None:
    later = NOW + timedelta(hours=2)
    clock = Pending("nap#1", "clock", 1, None, None, later, NOW)
    wait = Pending("paid#1", "wait", 1, "Paid", 12, later, NOW)
    assert _why(pending=[clock]) == "sleeping until 2026-12-01T14:00:00.000Z (in 2h00m) (nap#1)"
    assert _why(pending=[wait]) == (
        "waiting for Paid after event #12 until 2026-12-01T14:00:00.000Z (in 2h00m) (paid#1)"
    )
    assert _why(pending=[clock, wait]).count(" or ") == 1
    assert _why(blocked_reason="step gone", pending=[clock]) == "blocked: step gone"
    assert _why(timer_parked="expired id") == "blocked: its resume timer is parked: expired id"
    assert _why(interrupt=True, interrupted_by="user:ann", interrupt_reason="drain").startswith(
        "interrupted by user:ann: drain; stopping"
    )
    assert _why(status="finished", outcome="interrupted", interrupted_by="user:ann") == (
        "finished: interrupted by user:ann"
    )
    assert _why(status="finished", outcome="failed") == "finished: failed"
    assert _why(status="running") == "running a pass"
    assert _why(timer_due_at=later) == "resumes at 2026-12-01T14:00:00.000Z (in 2h00m)"
    assert _why() == "suspended with nothing due (no timer)"


def test_why_an_execution_rests_until_a_person_acts() -> None:
    from akter.operate.why import Rest

    base: dict[str, object] = {
        "outcome": None,
        "blocked_reason": None,
        "interrupt": False,
        "interrupted_by": None,
        "interrupt_reason": None,
        "timer_due_at": None,
        "timer_parked": None,
        "now": NOW,
    }
    nap = Pending("nap#1", "clock", 1, None, None, NOW + timedelta(hours=1), NOW)
    paused = Rest(paused_at=NOW - timedelta(minutes=2), paused_by="user:ops", pause_reason="deploy  42")
    assert why(status="paused", pending=[nap], rest=paused, **base) == (  # type: ignore[arg-type]
        "paused by user:ops: deploy 42 since 2026-12-01T11:58:00.000Z (2m00s ago);"
        " then sleeping until 2026-12-01T13:00:00.000Z (in 1h00m) (nap#1)"
    )
    assert why(status="running", pending=[], rest=paused, **base) == (  # type: ignore[arg-type]
        "pausing (paused by user:ops: deploy 42): its in-flight attempts settle, then it holds"
    )
    attention = Rest(attention_reason="activity ledger#1 attempt 1: expired\nids")
    assert why(status="needs_attention", pending=[], rest=attention, **base) == (  # type: ignore[arg-type]
        "needs attention: activity ledger#1 attempt 1: expired ids"
    )
    both = attrs.evolve(attention, paused_at=NOW, paused_by="user:ops")
    assert why(status="needs_attention", pending=[], rest=both, **base).endswith("(paused by user:ops too)")  # type: ignore[arg-type]
    interrupted = {**base, "interrupt": True, "interrupted_by": "user:ann"}
    assert why(status="running", pending=[], rest=paused, **interrupted).startswith(  # type: ignore[arg-type]
        "interrupted by user:ann; stopping"
    )


def test_a_held_execution_keeps_the_earliest_due_time_its_steps_recorded() -> None:
    from akter.workflow.core.driver import StepKey, StepRow
    from akter.workflow.engine.holds import held_due

    history = {
        StepKey("nap"): [StepRow(StepKey("nap"), 1, "clock", None, due_ms=5_000)],
        StepKey("paid"): [StepRow(StepKey("paid"), 1, "wait", None, due_ms=3_000)],
        StepKey("done"): [StepRow(StepKey("done"), 1, "clock", {"ok": None}, due_ms=1_000)],
        StepKey("charge"): [StepRow(StepKey("charge"), 1, "activity", {"defect": {}, "retry_at_ms": 4_000})],
        StepKey("unknown"): [StepRow(StepKey("unknown"), 1, "activity", None)],
    }
    assert held_due(history) == 3_000
    assert held_due({StepKey("unknown"): history[StepKey("unknown")]}) is None
