"""Golden histories replay under today's code with no database (``akter.testing.replay_history``),
and code whose body changed — declarations unchanged — is caught at the first occurrence that
differs, with what it asked for instead.

``tests/golden/*.history.json`` hold executions recorded by earlier versions of the engine
(``tests/golden/record.py``, named by the engine's commit): ``edges-flows-07cefb5`` with loops,
races and ``akter.all`` with abandoned branches, failing and interrupted compensations, waits
that matched or timed out, open and finished. Each later version adds its own and keeps these.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from returns.maybe import Some

import akter
from akter import testing
from tests.apps import edges, flows

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
TODAY = [edges.Edges, edges.Ledger, flows.Flows, flows.Ledger]
RECENT = GOLDEN / "edges-flows-07cefb5.history.json"


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.history.json")), ids=lambda p: p.name)
def test_every_golden_history_replays_under_todays_code(path: Path) -> None:
    report = testing.replay_history(TODAY, path)
    report.assert_replays()
    assert report.checked == len(testing.load_history(path).executions) > 0


def _divergences(report: testing.ReplayReport, workflow: str) -> dict[str, tuple[str, str, str]]:
    """job name -> (at, recorded, asked), from the report's data as a user reads it."""
    (found,) = [w for w in report.data()["workflows"] if w["workflow"] == workflow]
    names = {e.execution_id: e.payload["name"] for e in testing.load_history(RECENT).executions}
    return {names[d["execution_id"]]: (d["at"], d["recorded"], d["asked"]) for d in found["divergences"]}


def _edges(loop: str = "same", model: str = "same") -> akter.Actor[Any]:
    """``Edges`` with ``Loop`` and ``Model`` declared as in ``tests.apps.edges``, bodies changed."""
    actor = akter.Actor("Edges", state=edges.Book, events=[edges.Note])
    loop_wf = actor.workflow("Loop", input=edges.Job, output=edges.Done)
    echo, nap = loop_wf.activity("echo", success=str), loop_wf.sleep("nap")

    @loop_wf.body
    async def run_loop(wf: akter.WorkflowContext, job: edges.Job) -> edges.Done:
        seen = []
        for i in range(job.count - 1 if loop == "one less" else job.count):
            if loop == "reordered":
                await nap(timedelta(seconds=job.seconds))
                seen.append(await echo(edges.echo, f"{job.name}-{i}"))
            else:
                seen.append(await echo(edges.echo, f"{job.name}-{i}"))
                await nap(timedelta(seconds=job.seconds))
        return edges.Done(",".join(seen))

    model_wf = actor.workflow("Model", input=edges.Job, output=edges.Done)
    effect = model_wf.activity("effect", success=int, retry=akter.Retry(times=3))
    heard, rest = model_wf.wait("heard", edges.Note), model_wf.sleep("rest")
    least = 10 if model == "pickier" else 0

    @model_wf.body
    async def run_model(wf: akter.WorkflowContext, job: edges.Job) -> edges.Done:
        await effect(edges.ledger_effect, f"{job.name}-1")
        got = await heard(
            where=lambda n: n.name == job.name and n.value > least, timeout=timedelta(seconds=1)
        )
        await rest(timedelta(seconds=job.seconds))
        await effect(edges.ledger_effect, f"{job.name}-2")
        return edges.Done("heard" if isinstance(got, Some) else "timeout")

    return actor


def test_reordered_awaits_diverge_at_the_first_occurrence() -> None:
    report = testing.replay_history([_edges(loop="reordered")], RECENT)
    assert not report.replays
    reordered = ("echo#1", "activity echo#1", "clock nap#1")
    assert _divergences(report, "Loop") == {"loop-done": reordered, "loop-open": reordered}
    with pytest.raises(
        AssertionError, match=r"at echo#1: recorded activity echo#1; this code asked for clock nap#1"
    ):
        report.assert_replays()


def test_a_skipped_iteration_diverges_only_where_the_history_reaches_it() -> None:
    report = testing.replay_history([_edges(loop="one less")], RECENT)
    # loop-open is parked in its second nap: nothing recorded tells the two codes apart yet
    assert _divergences(report, "Loop") == {
        "loop-done": ("echo#3", "activity echo#3", "the body to return"),
    }
    (loop,) = [w for w in report.workflows if w.workflow == "Loop"]
    assert (loop.replayed, loop.checked) == (1, 2)


def test_a_wait_whose_where_no_longer_matches_its_recorded_event_diverges() -> None:
    report = testing.replay_history([_edges(model="pickier")], RECENT)
    assert _divergences(report, "Model") == {
        "model": ("heard#1", "wait heard#1", "a wait whose where does not match the recorded event #1"),
    }


def test_swapped_race_branches_diverge_in_the_branch_that_changed() -> None:
    actor = akter.Actor("Flows", state=flows.Board, events=[flows.Signal])
    racing = actor.workflow("Racing", input=flows.Job, output=flows.Done)
    signal_in, deadline = racing.wait("signal", flows.Signal), racing.sleep("deadline")
    first, slow = racing.race("signal-or-deadline"), racing.activity("slow", success=str)

    @racing.body
    async def swapped(wf: akter.WorkflowContext, job: flows.Job) -> flows.Done:
        outcome = await first.run(
            deadline(timedelta(seconds=job.seconds)), signal_in(where=lambda s: s.name == job.name)
        )
        label = "deadline" if outcome is None else f"signal {outcome.unwrap().value}"
        return flows.Done(f"{label}; {await slow(flows.plain, f'{job.name}-after')}")

    report = testing.replay_history([actor], RECENT)
    swapped_at = ("signal#1 in branch 1.0", "wait signal#1 in branch 1.0", "clock deadline#1 in branch 1.0")
    pending = (
        "signal#1 in branch 1.0",
        "wait signal#1 in branch 1.0, pending",
        "clock deadline#1 in branch 1.0",
    )
    diverged = _divergences(report, "Racing")
    assert sorted(diverged.values()) == sorted([swapped_at, pending])


def test_a_file_that_is_not_a_history_is_refused_by_name(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(akter.InvalidInput, match=r"bad.json is not an akter history file: its format"):
        testing.load_history(bad)
