"""Child steps and ``akter.all(limit=)`` in the deterministic driver, without a database."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from returns.result import Failure, Success

import akter
from akter import tagged
from akter.errors import CorruptRecord, EffectDefect
from akter.ids import ActorRef
from akter.workflow.api.declare import WorkflowContext
from akter.workflow.core.children import AwaitChildNeed, StartChildNeed
from akter.workflow.core.driver import Driver, RunActivity, StepKey, StepRow
from akter.workflow.core.exits import Ok, Raise


@attrs.frozen
class S:
    n: int = 0


@attrs.frozen
class In:
    name: str
    n: int = 0


@attrs.frozen
class Short(Exception):
    sku: str


Parent = akter.Actor("ChildDriverParent", state=S)
Depot = akter.Actor("ChildDriverDepot", state=S)
Pick = Depot.workflow("Pick", input=In, output=str, errors=[Short])
Unused = Depot.workflow("Unused", input=In, output=str)
P = Parent.workflow("P", input=In, output=str)
work = P.activity("work", success=str)
pick = P.child("pick", Pick)


@Pick.body
async def _pick(wf: akter.WorkflowContext, payload: In) -> str:
    return payload.name


@Unused.body
async def _unused(wf: akter.WorkflowContext, payload: In) -> str:
    return payload.name


def fn(x: str) -> str:
    return x


@P.body
async def body(wf: akter.WorkflowContext, payload: In) -> Any:
    if payload.name == "limit":
        return "".join(await akter.all(*(work(fn, str(i)) for i in range(payload.n)), limit=2))
    if payload.name == "undeclared":
        return await wf.run(Depot, "d", Unused, In("x"))
    if payload.name == "wrong-input":
        return await pick.run("d", S())  # type: ignore[arg-type]
    child = await wf.start(Depot, "d-1", Pick, In("x"))
    first = await child.result()
    assert repr(await child.result()) == repr(first)  # the same record, read twice
    return repr(first)


def driver(name: str, rows: list[StepRow], n: int = 0) -> Driver:
    ctx = WorkflowContext(
        execution_id="x1.p", key="k", ref=ActorRef("t", "ChildDriverParent", "a"), principal=None, versions={}
    )
    history: dict[StepKey, list[StepRow]] = {}
    for r in rows:
        history.setdefault(r.key, []).append(r)
    return Driver(P, ctx, In(name, n), history)


def test_all_with_a_limit_runs_at_most_that_many_branches_and_keeps_their_order() -> None:
    rows: list[StepRow] = []
    d = driver("limit", rows, n=5)
    needs = d.advance(0)
    assert [n.key.scope for n in needs if isinstance(n, RunActivity)] == ["1.0/", "1.1/"]
    # branch 1 finishes first: branch 2 starts, never three at once
    d.record(StepRow(needs[1].key, 1, "activity", {"ok": "1"}))
    needs = d.advance(0)
    assert [n.key.scope for n in needs] == ["1.0/", "1.2/"]
    for scope, value in (("1.0/", "0"), ("1.2/", "2")):
        rows.append(StepRow(StepKey("work", scope, 1), 1, "activity", {"ok": value}))
        d.record(rows[-1])
    rows.append(StepRow(StepKey("work", "1.1/", 1), 1, "activity", {"ok": "1"}))
    needs = d.advance(0)
    assert sorted(n.key.scope for n in needs) == ["1.3/", "1.4/"]
    for scope, value in (("1.3/", "3"), ("1.4/", "4")):
        rows.append(StepRow(StepKey("work", scope, 1), 1, "activity", {"ok": value}))
        d.record(rows[-1])
    assert d.advance(0) == []
    assert d.final == Ok("01234")
    # a fresh driver replays the recorded branches without a need, whatever order they ran in
    again = driver("limit", rows, n=5)
    assert again.advance(0) == []
    assert again.final == Ok("01234")


def test_a_child_is_started_once_then_awaited_then_replayed_from_its_record() -> None:
    d = driver("child", [])
    (start,) = d.advance(0)
    assert isinstance(start, StartChildNeed)
    assert start.eid.owner == ActorRef("t", "ChildDriverDepot", "d-1")
    assert start.eid.workflow == "Pick"
    started = StepRow(start.key, 1, "child", None)
    d.record(started)
    (wait,) = d.advance(0)
    assert isinstance(wait, AwaitChildNeed)
    assert wait.handle.execution_id == str(start.eid)
    settled = StepRow(start.key, 1, "child", {"ok": "x"})
    d.record(settled)
    assert d.advance(0) == []
    assert d.final == Ok(repr(Success("x")))
    # replay: the recorded start is a handle, not a need; the same key derives the same child
    replay = driver("child", [settled])
    assert replay.advance(0) == []
    assert replay.final == Ok(repr(Success("x")))
    pending = driver("child", [started])
    (again,) = pending.advance(0)
    assert isinstance(again, AwaitChildNeed)
    assert again.handle.execution_id == str(start.eid)


def test_a_childs_declared_error_is_a_failure_value_never_raised() -> None:
    recorded = StepRow(StepKey("pick"), 1, "child", tagged.error(Short("x")))
    d = driver("child", [recorded])
    assert d.advance(0) == []
    assert d.final == Ok(repr(Failure(Short("x"))))


def test_starting_a_child_the_parent_did_not_declare_is_a_defect() -> None:
    d = driver("undeclared", [])
    assert d.advance(0) == []
    assert isinstance(d.final, Raise)
    assert isinstance(d.final.error, EffectDefect)
    assert "declares no child step" in str(d.final.error)


def test_starting_a_child_with_an_input_of_another_type_is_a_defect_and_starts_nothing() -> None:
    d = driver("wrong-input", [])
    assert d.advance(0) == []
    assert isinstance(d.final, Raise)
    assert "takes a In, got S" in str(d.final.error)


def test_a_recorded_child_result_that_does_not_decode_is_a_corrupt_record() -> None:
    # the pass turns CorruptRecord into a blocked execution with the reason (invariant 13)
    d = driver("child", [StepRow(StepKey("pick"), 1, "child", {"ok": {"not": "a str"}})])
    with pytest.raises(CorruptRecord):
        d.advance(0)


def test_an_app_without_the_childs_actor_type_is_refused_naming_the_step() -> None:
    with pytest.raises(akter.DeclarationError) as refused:
        akter.App([Parent], database_url="postgresql://nowhere/x")
    assert "ChildDriverParent.P.pick starts <workflow ChildDriverDepot.Pick>" in str(refused.value)
    akter.App([Parent, Depot], database_url="postgresql://nowhere/x")  # both declared: accepted
