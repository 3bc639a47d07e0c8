"""``wf.now()``, ``wf.random()``, ``wf.uuid4()``, ``wf.log`` and continue-as-new in the driver,
without a database: feed it recorded rows and read back what the body saw."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import pytest

import akter
from akter.errors import EffectDefect, ExecutionKeyConflict
from akter.ids import ActorRef
from akter.workflow.api.declare import ContinueAsNew, WorkflowContext
from akter.workflow.api.determinism import RecordNow
from akter.workflow.api.policies import KeyReuse
from akter.workflow.core.driver import Driver, StepKey, StepRow
from akter.workflow.core.exits import Ok, Raise
from akter.workflow.engine.key_policy import Decision, decide


@attrs.frozen
class S:
    n: int = 0


@attrs.frozen
class In:
    name: str


A = akter.Actor("DeterminismTest", state=S)
W = A.workflow("W", input=In, output=str)
one = W.activity("one", success=str)
undo = W.activity("undo", success=str)
SEEN: list[Any] = []


def fn(x: str) -> str:
    return x


@W.body
async def body(wf: akter.WorkflowContext, payload: In) -> str:
    if payload.name == "continue":
        await wf.compensate(one(fn, "a"), lambda _: undo(fn, "u"))
        wf.continue_as_new(In("next"))
    if payload.name == "branches":

        async def branch() -> str:
            return str(wf.uuid4())

        left, right = await akter.all(branch(), branch())
        SEEN.append((left, right, str(wf.uuid4())))
        return "ok"
    wf.log.info("before")
    now = await wf.now()
    wf.log.info("after now")
    values = (wf.random(), wf.uuid4(), wf.random())
    await one(fn, "x")
    wf.log.info("after one")
    SEEN.append((now, values))
    return "done"


def driver(name: str, rows: list[StepRow], *, eid: str = "x1.t", run: int = 1) -> Driver:
    ctx = WorkflowContext(
        execution_id=eid,
        key="k",
        ref=ActorRef("t", "DeterminismTest", "a"),
        principal=None,
        versions={},
        run_number=run,
    )
    history: dict[StepKey, list[StepRow]] = {}
    for r in rows:
        history.setdefault(r.key, []).append(r)
    return Driver(W, ctx, In(name), history)


NOW = StepRow(StepKey("@now"), 1, "clock", {"ok": None}, due_ms=1_700_000_000_123)
ONE = StepRow(StepKey("one"), 1, "activity", {"ok": "x"})


def test_now_is_asked_for_once_then_replays_its_recorded_time() -> None:
    [need] = driver("x", []).advance(0)
    assert isinstance(need, RecordNow)
    assert need.key == StepKey("@now", "", 1)
    SEEN.clear()
    for _ in range(2):  # two replays of the same history see the same values
        d = driver("x", [NOW, ONE])
        assert d.advance(0) == []
        assert d.final == Ok("done")
    first, second = SEEN
    assert first == second
    assert first[0] == datetime.fromtimestamp(1_700_000_000.123, tz=UTC)
    r1, u, r2 = first[1]
    assert 0 <= r1 < 1
    assert r1 != r2
    assert isinstance(u, uuid.UUID)
    assert u.version == 4


def test_seeded_values_differ_by_execution_run_and_branch() -> None:
    SEEN.clear()
    driver("x", [NOW, ONE]).advance(0)
    driver("x", [NOW, ONE], eid="x1.other").advance(0)
    driver("x", [NOW, ONE], run=2).advance(0)
    assert len({values for _, values in SEEN}) == 3
    SEEN.clear()
    driver("branches", []).advance(0)
    driver("branches", []).advance(0)
    assert SEEN[0] == SEEN[1]  # branch positions, not completion order, decide
    assert len(set(SEEN[0])) == 3


def test_random_outside_a_running_body_is_a_defect() -> None:
    ctx = WorkflowContext(execution_id="x", key="k", ref=ActorRef("t", "T", "a"), principal=None, versions={})
    with pytest.raises(EffectDefect):
        ctx.random()


def test_the_log_emits_only_past_steps_this_pass_settled(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="akter.workflow.body")

    def logged() -> list[str]:
        out = [r.getMessage() for r in caplog.records]
        caplog.clear()
        return out

    d = driver("x", [])  # the first pass: it starts the execution
    d.advance(0)
    assert logged() == ["before"]
    d.record(NOW)  # recorded by this pass
    d.advance(0)
    assert logged() == ["after now"]
    d = driver("x", [NOW])  # the next pass replays now, then settles one
    d.advance(0)
    assert logged() == []
    d.record(ONE)
    d.advance(0)
    assert logged() == ["after one"]
    driver("x", [NOW, ONE]).advance(0)  # a replay of all of it logs nothing
    assert logged() == []


def test_continue_as_new_ends_the_body_without_compensating() -> None:
    d = driver("continue", [StepRow(StepKey("one"), 1, "activity", {"ok": "a"})])
    assert d.advance(0) == []
    assert isinstance(d.final, Raise)
    assert isinstance(d.final.error, ContinueAsNew)
    assert d.final.error.payload == In("next")


def test_the_key_policy_table() -> None:
    assert decide(None, False, KeyReuse.REFUSE, "e") is Decision.START
    assert decide("suspended", True, KeyReuse.REFUSE, "e") is Decision.ATTACH
    assert decide("finished", True, KeyReuse.NEW_RUN, "e") is Decision.ATTACH
    assert decide("finished", False, KeyReuse.ATTACH, "e") is Decision.ATTACH
    assert decide("finished", False, KeyReuse.NEW_RUN, "e") is Decision.NEW_RUN
    with pytest.raises(ExecutionKeyConflict) as open_conflict:
        decide("running", False, KeyReuse.NEW_RUN, "e")
    assert not open_conflict.value.finished
    with pytest.raises(ExecutionKeyConflict) as done_conflict:
        decide("finished", False, KeyReuse.REFUSE, "e")
    assert done_conflict.value.finished


def test_a_declared_timeout_must_be_positive() -> None:
    with pytest.raises(akter.DeclarationError):
        A.workflow("Bad", input=In, timeout=timedelta(0))
    assert W.timeout_ms is None
    assert W.key_reuse is KeyReuse.REFUSE
