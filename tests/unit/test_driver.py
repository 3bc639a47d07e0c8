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
from akter.errors import CompensationFailed, EffectDefect, Interrupted
from akter.ids import ActorRef
from akter.workflow.api.declare import WorkflowContext
from akter.workflow.api.policies import Backoff
from akter.workflow.core.driver import (
    FINISH_SCOPE,
    AwaitEvent,
    ClockDue,
    Driver,
    Need,
    RegisterClock,
    RetryAt,
    RunActivity,
    SettleRace,
    StepKey,
    StepRow,
    retry_at_ms,
)
from akter.workflow.core.exits import Ok, Raise


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
    if payload.name.startswith("loop"):
        return "".join([await one(fn, str(i)) for i in range(int(payload.name[4:]))])
    if payload.name == "branches":
        # two branches awaiting the same step in loops: completion order varies between runs
        async def branch(tag: str) -> str:
            return "".join([await one(fn, f"{tag}{i}") for i in range(3)])

        left, right = await akter.all(branch("L"), branch("R"))
        return f"{left}|{right}"
    if payload.name == "broken-undo":
        await wf.compensate(one(fn, "a"), undo=lambda _: None)  # an undo must return an effect
        await two(fn, "b")
        return "never"
    a = await wf.compensate(one(fn, "a"), undo=lambda _: undo(fn, "undo"))
    await nap(timedelta(seconds=10))
    b = await two(fn, "b")
    return a + b


def driver(name: str, rows: list[StepRow], *, interrupted: bool = False) -> Driver:
    ctx = WorkflowContext(
        execution_id="x1.t", key="k", ref=ActorRef("t", "DriverTest", "a"), principal=None, versions={}
    )
    history: dict[StepKey, list[StepRow]] = {}
    for r in rows:
        history.setdefault(r.key, []).append(r)
    return Driver(W, ctx, In(name), history, interrupted=interrupted)


def row(
    step: str, attempt: int, kind: str, exit_: Any, *, occurrence: int = 1, scope: str = "", **kw: Any
) -> StepRow:
    return StepRow(StepKey(step, scope, occurrence), attempt, kind, exit_, **kw)


def ok(step: str, value: Any, attempt: int = 1, kind: str = "activity", **kw: Any) -> StepRow:
    return row(step, attempt, kind, {"ok": value}, **kw)


def test_a_fresh_execution_asks_for_its_first_attempt() -> None:
    needs = driver("x", []).advance(0)
    assert [(type(n).__name__, getattr(n, "attempt", None)) for n in needs] == [("RunActivity", 1)]


def test_recorded_steps_replay_without_needs_until_the_first_unrecorded_one() -> None:
    d = driver("x", [ok("one", "a"), row("nap", 1, "clock", {"ok": None}, due_ms=5)])
    needs = d.advance(10)
    assert len(needs) == 1
    assert isinstance(needs[0], RunActivity)
    assert needs[0].call.step is two


def test_a_clock_is_registered_then_parked_until_due() -> None:
    d = driver("x", [ok("one", "a")])
    assert [type(n) for n in d.advance(0)] == [RegisterClock]
    d.record(row("nap", 1, "clock", None, due_ms=10_000))
    [need] = d.advance(0)
    assert isinstance(need, ClockDue)
    assert (need.key, need.due_ms) == (StepKey("nap"), 10_000)


def test_an_unsettled_attempt_is_rerun_under_its_own_number() -> None:
    needs = driver("x", [row("one", 1, "activity", None)]).advance(0)
    assert [(type(n), n.attempt) for n in needs] == [(RunActivity, 1)]  # type: ignore[union-attr]


def test_a_retryable_defect_waits_for_its_retry_time_then_asks_for_the_next_attempt() -> None:
    failed = row("one", 1, "activity", {"defect": {"type": "X", "message": "m"}, "retry_at_ms": 500})
    assert [type(n) for n in driver("x", [failed]).advance(100)] == [RetryAt]
    needs = driver("x", [failed]).advance(500)
    assert [(type(n), n.attempt) for n in needs] == [(RunActivity, 2)]  # type: ignore[union-attr]


def test_awaiting_a_non_effect_ends_the_body_with_an_effect_defect() -> None:
    d = driver("asyncio", [])
    assert d.advance(0) == []
    assert isinstance(d.final, Raise)
    assert isinstance(d.final.error, EffectDefect)


def test_a_decided_race_asks_to_record_its_winner_then_resumes_and_abandons_the_loser() -> None:
    d = driver(
        "race",
        [
            row("ping", 1, "wait", {"ok": {"seq": 3, "event": {"v": 1}}}, scope="1.0/"),
            row("nap", 1, "clock", None, due_ms=9, scope="1.1/"),
        ],
    )
    needs = d.advance(0)
    assert [(type(n), getattr(n, "winner", None)) for n in needs] == [(SettleRace, 0)]
    assert d.abandoned == {"1.1/"}  # the losing branch's pending clock must wake nothing
    d.record(row("first", 1, "race", {"winner": 0}))
    assert d.advance(0) == []
    assert d.final == Ok("ping")


def test_a_recorded_race_replays_only_its_winner_and_abandons_the_rest() -> None:
    # the losing branch's wait is not even registered: the winner (branch 1) is replayed alone
    d = driver(
        "race",
        [
            row("first", 1, "race", {"winner": 1}),
            row("nap", 1, "clock", {"ok": None}, due_ms=1, scope="1.1/"),
        ],
    )
    assert d.advance(0) == []
    assert d.final == Ok("nap")
    assert d.abandoned == {"1.0/"}


def test_an_abandoned_step_never_resumes_its_fiber() -> None:
    d = driver("race", [row("ping", 1, "wait", {"abandoned": {}}, scope="1.0/")])
    needs = d.advance(0)
    assert [type(n) for n in needs] == [RegisterClock]  # only the clock branch can still win


def test_each_await_of_a_step_in_a_loop_is_its_own_occurrence() -> None:
    d = driver("loop3", [ok("one", "x", occurrence=1), ok("one", "y", occurrence=2)])
    [need] = d.advance(0)
    assert isinstance(need, RunActivity)
    assert need.key == StepKey("one", "", 3)
    assert need.call.args == ("2",)  # the third call's own arguments, not the first's
    d.record(ok("one", "z", occurrence=3))
    assert d.advance(0) == []
    assert d.final == Ok("xyz")


def test_an_interrupt_stops_at_the_first_unsettled_step_and_compensates() -> None:
    d = driver("x", [ok("one", "a")], interrupted=True)
    needs = d.advance(0)
    assert [(type(n), n.call.step.name, n.key.scope) for n in needs] == [  # type: ignore[union-attr]
        (RunActivity, "undo", FINISH_SCOPE)
    ]
    d.record(ok("undo", "undo", scope=FINISH_SCOPE))
    assert d.advance(0) == []
    assert isinstance(d.final, Raise)
    assert isinstance(d.final.error, Interrupted)


def test_a_step_settled_after_the_interrupt_is_undone_but_never_delivered() -> None:
    # "one" succeeded after the interrupt arrived: the body must not go on to "nap", yet its
    # compensation must run
    late = row("one", 1, "activity", {"ok": "a", "after_interrupt": True})
    d = driver("x", [late], interrupted=True)
    needs = d.advance(0)
    assert [(type(n), n.call.step.name) for n in needs] == [(RunActivity, "undo")]  # type: ignore[union-attr]


def test_a_failing_compensation_is_reported_with_the_original_outcome() -> None:
    failed_two = row("two", 1, "activity", {"defect": {"type": "Boom", "message": "no"}})
    d = driver("broken-undo", [ok("one", "a"), failed_two])
    assert d.advance(0) == []
    assert isinstance(d.final, Raise)
    error = d.final.error
    assert isinstance(error, CompensationFailed)
    assert "no" in str(error.original)
    assert len(error.failures) == 1
    assert "compensation" in error.failures[0]


def test_success_runs_no_compensation() -> None:
    d = driver("x", [ok("one", "a"), row("nap", 1, "clock", {"ok": None}, due_ms=1), ok("two", "b")])
    assert d.advance(10) == []
    assert d.final == Ok("ab")


def _settle(need: Need) -> StepRow:
    """What the pass would record for a need, deterministically from the need itself."""
    if isinstance(need, RunActivity):
        return StepRow(need.key, need.attempt, "activity", {"ok": need.call.args[0]})
    if isinstance(need, SettleRace):
        return StepRow(need.key, 1, "race", {"winner": need.winner})
    if isinstance(need, RegisterClock | ClockDue):
        return StepRow(need.key, 1, "clock", {"ok": None}, due_ms=0)
    assert isinstance(need, AwaitEvent)
    return StepRow(need.key, 1, "wait", {"ok": None})


@given(name=st.sampled_from(["branches", "loop4", "race", "x"]), data=st.data())
def test_a_first_run_in_any_completion_order_replays_exactly_in_a_fresh_driver(name: str, data: Any) -> None:
    """Run an execution as a pass would, settling its outstanding needs one at a time in an
    order hypothesis picks (as parallel branches finish in any order); then replay the recorded
    rows into a new driver: it must need nothing and end with the same outcome."""
    first = driver(name, [])
    recorded: list[StepRow] = []
    for _ in range(100):
        needs = first.advance(10)
        if first.final is not None:
            break
        need = needs[data.draw(st.integers(min_value=0, max_value=len(needs) - 1))]
        settled = _settle(need)
        recorded.append(settled)
        first.record(settled)
    assert first.final is not None
    replay = driver(name, recorded)
    assert replay.advance(10) == []
    assert replay.final == first.final


def _retrying(times: int, backoff: Backoff) -> akter.ActivityStep[Any]:
    actor = akter.Actor("RetryPolicy", state=S)
    wf = actor.workflow("W", input=In)
    return wf.activity("a", retry=akter.Retry(times=times, backoff=backoff))


def test_the_retry_policy_is_decided_from_the_recorded_exit_alone() -> None:
    step = _retrying(3, Backoff(base=timedelta(seconds=1), factor=2.0, cap=timedelta(seconds=3)))
    defect = {"defect": {"type": "ValueError", "message": "boom"}}
    now = 1_000_000
    # attempts 1 and 2 failed: the next is due after the backoff, capped
    assert retry_at_ms(step, 1, defect, now_ms=now, interrupting=False) == now + 1000
    assert retry_at_ms(step, 2, defect, now_ms=now, interrupting=False) == now + 2000
    # the last attempt failed: no other
    assert retry_at_ms(step, 3, defect, now_ms=now, interrupting=False) is None
    # a declared error, an interrupt or an unknown outcome is never retried
    declared = {"error": {"type": "OutOfStock", "value": {}}}
    assert retry_at_ms(step, 1, declared, now_ms=now, interrupting=False) is None
    assert retry_at_ms(step, 1, {"interrupt": {}}, now_ms=now, interrupting=False) is None
    unknown = {"defect": {"type": "ActivityOutcomeUnknown", "message": "expired"}}
    assert retry_at_ms(step, 1, unknown, now_ms=now, interrupting=False) is None
    # nor anything once the execution is being interrupted
    assert retry_at_ms(step, 1, defect, now_ms=now, interrupting=True) is None


@given(st.integers(min_value=1, max_value=20), st.integers(min_value=1, max_value=20))
def test_a_retry_is_due_within_the_backoff_cap_and_only_while_attempts_remain(
    times: int, attempt: int
) -> None:
    step = _retrying(times, Backoff(base=timedelta(milliseconds=10), cap=timedelta(seconds=1)))
    due = retry_at_ms(step, attempt, {"defect": {"type": "E", "message": ""}}, now_ms=0, interrupting=False)
    if attempt >= times:
        assert due is None
    else:
        assert due is not None
        assert 10 <= due <= 1000
