"""The deterministic driver, without a database: feed it recorded rows, read back its needs."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st
from returns.maybe import Some

import akter
from akter.errors import EffectDefect, Interrupted
from akter.ids import ActorRef
from akter.workflow.context import WorkflowContext
from akter.workflow.driver import ClockDue, Driver, RegisterClock, RetryAt, RunActivity, SettleRace, StepRow
from akter.workflow.exits import Ok, Raise


@attrs.frozen
class S:
    n: int = 0


@attrs.frozen
class Ping:
    v: int


@attrs.frozen
class In:
    name: str


A = akter.Actor("DriverTest", state=S, events=[Ping])
W = A.workflow("W", input=In, output=str)
one = W.activity("one", success=str, retry=akter.Retry(times=3))
two = W.activity("two", success=str)
undo = W.activity("undo", success=str)
nap = W.sleep("nap")
ping = W.wait("ping", Ping)
first = W.race("first")


def fn(x: str) -> str:
    return x


@W.body
async def body(wf: akter.WorkflowContext, payload: In) -> str:
    if payload.name == "asyncio":
        await asyncio.sleep(0)
    if payload.name == "race":
        got = await first.run(ping(), nap(timedelta(seconds=5)))
        return "ping" if isinstance(got, Some) else "nap"
    a = await wf.compensate(one(fn, "a"), undo=lambda _: undo(fn, "undo"))
    await nap(timedelta(seconds=10))
    b = await two(fn, "b")
    return a + b


def driver(name: str, rows: list[StepRow], *, interrupted: bool = False) -> Driver:
    ctx = WorkflowContext(
        execution_id="x1.t", key="k", ref=ActorRef("t", "DriverTest", "a"), principal=None, versions={}
    )
    history: dict[str, list[StepRow]] = {}
    for r in rows:
        history.setdefault(r.step, []).append(r)
    return Driver(W, ctx, In(name), history, interrupted=interrupted)


def ok(step: str, value: Any, attempt: int = 1, kind: str = "activity") -> StepRow:
    return StepRow(step, attempt, kind, {"ok": value})


def test_a_fresh_execution_asks_for_its_first_attempt() -> None:
    needs = driver("x", []).advance(0)
    assert [(type(n).__name__, getattr(n, "attempt", None)) for n in needs] == [("RunActivity", 1)]


def test_recorded_steps_replay_without_needs_until_the_first_unrecorded_one() -> None:
    d = driver("x", [ok("one", "a"), StepRow("nap", 1, "clock", {"ok": None}, due_ms=5)])
    needs = d.advance(10)
    assert len(needs) == 1
    assert isinstance(needs[0], RunActivity)
    assert needs[0].call.step is two


def test_a_clock_is_registered_then_parked_until_due() -> None:
    d = driver("x", [ok("one", "a")])
    assert [type(n) for n in d.advance(0)] == [RegisterClock]
    d.record(StepRow("nap", 1, "clock", None, due_ms=10_000))
    assert d.advance(0) == [ClockDue(d.advance(0)[0].effect, 10_000)]  # type: ignore[attr-defined]


def test_an_unsettled_attempt_is_rerun_under_its_own_number() -> None:
    needs = driver("x", [StepRow("one", 1, "activity", None)]).advance(0)
    assert [(type(n), n.attempt) for n in needs] == [(RunActivity, 1)]  # type: ignore[union-attr]


def test_a_retryable_defect_waits_for_its_retry_time_then_asks_for_the_next_attempt() -> None:
    failed = StepRow("one", 1, "activity", {"defect": {"type": "X", "message": "m"}, "retry_at_ms": 500})
    assert [type(n) for n in driver("x", [failed]).advance(100)] == [RetryAt]
    needs = driver("x", [failed]).advance(500)
    assert [(type(n), n.attempt) for n in needs] == [(RunActivity, 2)]  # type: ignore[union-attr]


def test_awaiting_a_non_effect_ends_the_body_with_an_effect_defect() -> None:
    d = driver("asyncio", [])
    assert d.advance(0) == []
    assert isinstance(d.final, Raise)
    assert isinstance(d.final.error, EffectDefect)


def test_a_decided_race_asks_to_record_its_winner_then_resumes() -> None:
    d = driver(
        "race",
        [
            StepRow("ping", 1, "wait", {"ok": {"seq": 3, "event": {"v": 1}}}),
            StepRow("nap", 1, "clock", None, due_ms=9),
        ],
    )
    needs = d.advance(0)
    assert [(type(n), getattr(n, "winner", None)) for n in needs] == [(SettleRace, 0)]
    d.record(StepRow("first", 1, "race", {"winner": 0}))
    assert d.advance(0) == []
    assert d.final == Ok("ping")


def test_a_recorded_race_replays_only_its_winner() -> None:
    # the losing branch's clock is not even registered: the winner (branch 1) is replayed alone
    d = driver(
        "race",
        [StepRow("first", 1, "race", {"winner": 1}), StepRow("nap", 1, "clock", {"ok": None}, due_ms=1)],
    )
    assert d.advance(0) == []
    assert d.final == Ok("nap")


def test_an_interrupt_stops_at_the_first_unsettled_step_and_compensates() -> None:
    d = driver("x", [ok("one", "a")], interrupted=True)
    needs = d.advance(0)
    assert [(type(n), n.call.step.name) for n in needs] == [(RunActivity, "undo")]  # type: ignore[union-attr]
    d.record(ok("undo", "undo"))
    assert d.advance(0) == []
    assert isinstance(d.final, Raise)
    assert isinstance(d.final.error, Interrupted)


def test_success_runs_no_compensation() -> None:
    d = driver("x", [ok("one", "a"), StepRow("nap", 1, "clock", {"ok": None}, due_ms=1), ok("two", "b")])
    assert d.advance(10) == []
    assert d.final == Ok("ab")


@given(
    st.lists(st.sampled_from(["one", "nap", "two"]), unique=True), st.integers(min_value=0, max_value=10**6)
)
def test_replay_is_deterministic(prefix: list[str], now: int) -> None:
    """The same history and clock always produce the same needs and outcome."""
    rows = {
        "one": ok("one", "a"),
        "nap": StepRow("nap", 1, "clock", {"ok": None}, due_ms=1),
        "two": ok("two", "b"),
    }
    history = [rows[s] for s in prefix]

    def run() -> tuple[list[tuple[str, str]], Any]:
        d = driver("x", history)
        needs = d.advance(now)
        return [
            (type(n).__name__, n.call.step.name if hasattr(n, "call") else n.effect.step.name) for n in needs
        ], d.final  # type: ignore[union-attr]

    assert run() == run()
