"""``akter.testing.explore``: a workflow crashed at every step boundary, for real (its runner
dropped at the fault point, a fresh runner finishing it), effects counted.

Over ``tests.apps.explored.Pay`` whose activities send commands with derived ids, every crash
ends as the uncrashed run did with the same commands received; over the same workflow whose
charge calls a provider without an idempotency key, the explorer reports the card charged twice
at the one boundary where that happens: after the charge ran, before its attempt settled. The
ten-step ``Fulfil`` (a day-long deadline skipped on the clock) is exactly once everywhere;
``Rounds`` puts boundaries in a race's losing branch and in the second await of a looped step.
The last test kills a real relay process after a resume turn committed and before its pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
from returns.result import Success

import akter
from akter import testing
from akter.testing import Explorer
from tests.apps import explored
from tests.apps.explored import Paid, Payment
from tests.apps.relay_procs import RelayProcess
from tests.integration.conftest import Peek
from tests.integration.test_readme import README, _example
from tests.integration.workflow_support import until


@pytest.fixture(autouse=True)
def _charges() -> Iterator[None]:
    explored.CHARGES.clear()
    yield
    explored.CHARGES.clear()
    explored.LEFT_DONE.clear()


def _charges_made() -> int:
    return len(explored.CHARGES)


async def test_activities_with_derived_ids_survive_a_crash_at_every_boundary(database_url: str) -> None:
    app = explored.make_app(database_url)
    report = await testing.explore(app, explored.Shop, "shop", explored.Pay, Payment("o1"))
    assert report.baseline.outcome == Success(Paid(order="o1", entries=2))
    assert report.baseline.receipts == 2
    # two passes (after the start, after the sleep), two attempts, two settles, one suspension
    assert [(r.point, r.hit) for r in report.crashes] == [
        ("workflow.before_pass", 1),
        ("workflow.before_pass", 2),
        ("workflow.before_activity", 1),
        ("workflow.before_activity", 2),
        ("workflow.before_settle", 1),
        ("workflow.before_settle", 2),
        ("workflow.before_suspend", 1),
    ]
    charge, record = "charge#1 attempt 1", "record#1 attempt 1"
    assert [r.step for r in report.crashes] == [
        "after its start",
        "resume for settle#1",
        charge,
        record,
        charge,
        record,
        "after charge#1",
    ]
    assert all(r.crashed for r in report.crashes)
    assert report.problems == ()
    report.assert_exactly_once()


async def test_an_effect_without_an_idempotency_key_is_reported_duplicated_where_it_is(
    database_url: str,
) -> None:
    app = explored.make_app(database_url)
    report = await testing.explore(
        app, explored.Shop, "naive", explored.Pay, Payment("o2", card="naive"), probe=_charges_made
    )
    assert report.baseline.probed == 1
    ((run, problem),) = report.problems
    assert (run.point, run.hit, run.step) == ("workflow.before_settle", 1, "charge#1 attempt 1")
    assert problem == "probe counted 2 effects, not 1"
    with pytest.raises(
        AssertionError, match=r"workflow.before_settle +1  charge#1 attempt 1 .* probe counted 2"
    ):
        report.assert_exactly_once()


async def test_a_ten_step_workflow_with_a_day_long_deadline_is_exactly_once_at_every_boundary(
    database_url: str, peek: Peek
) -> None:
    app = explored.make_app(database_url)
    report = await testing.explore(app, explored.Warehouse, "w", explored.Fulfil, explored.Order("o3"))
    assert report.baseline.outcome == Success(explored.Shipped(order="o3", entries=8, confirmed=False))
    # the wait's deadline is a day away: the clock jumped past the receipts' retry window and
    # retention pruned them, yet each run still counts the eight commands its activities sent
    assert await peek.value("SELECT akter_now() - now() > interval '1 day'")
    assert {r.receipts for r in (report.baseline, *report.crashes)} == {8}
    assert report.baseline.hits == {
        "workflow.before_pass": 3,  # after the start, the sleep and the deadline
        "workflow.before_activity": 8,
        "workflow.before_settle": 8,
        "workflow.before_suspend": 2,
    }
    assert len(report.crashes) == 21
    resumes = [r.step for r in report.crashes if r.point == "workflow.before_pass"]
    assert resumes == ["after its start", "resume for cool-off#1", "resume for confirmation#1"]
    report.assert_exactly_once()


async def test_boundaries_of_a_race_losing_branch_and_of_a_looped_step_are_explored(
    database_url: str,
) -> None:
    app = explored.make_app(database_url)
    report = await testing.explore(
        app, explored.Shop, "rounds", explored.Rounds, Payment("o4"), probe=_charges_made
    )
    assert report.baseline.outcome == Success(Paid(order="o4", entries=5))
    settles = [r.step for r in report.crashes if r.point == "workflow.before_settle"]
    assert settles == [
        "item#1 attempt 1",
        "item#2 attempt 1",
        "item#3 attempt 1",
        "prepare#1 in branch 1.1 attempt 1",  # the branch that loses the race
        "wrap-up#1 in branch 1.0 attempt 1",
    ]
    suspend = [r.step for r in report.crashes if r.point == "workflow.before_suspend"]
    assert suspend == ["after prepare#1 in branch 1.1"]
    report.assert_exactly_once()


async def test_a_duplicate_in_a_loops_second_await_and_in_a_losing_branch_is_reported_there(
    database_url: str,
) -> None:
    app = explored.make_app(database_url)
    report = await testing.explore(
        app, explored.Shop, "naive-rounds", explored.Rounds, Payment("o5", card="naive"), probe=_charges_made
    )
    assert report.baseline.probed == 2  # item 2 and prepare called the provider once each
    assert [(run.point, run.step, problem) for run, problem in report.problems] == [
        ("workflow.before_settle", "item#2 attempt 1", "probe counted 3 effects, not 2"),
        ("workflow.before_settle", "prepare#1 in branch 1.1 attempt 1", "probe counted 3 effects, not 2"),
    ]


async def test_side_by_side_attempts_are_named_by_the_one_the_crash_stopped_in(explorer: Explorer) -> None:
    app = explored.make_app(explorer.database_url)
    report = await explorer(
        app, explored.Shop, "split", explored.Split, Payment("o8", card="naive"), probe=_charges_made
    )
    left, right = "left#1 in branch 1.0 attempt 1", "right#1 in branch 1.1 attempt 1"
    settles = [r.step for r in report.crashes if r.point == "workflow.before_settle"]
    assert settles == [left, right]  # left makes its effect first (a barrier orders them)
    assert {r.step for r in report.crashes if r.point == "workflow.before_activity"} <= {left, right}
    # a crash in left after its call and before its settle calls the provider twice; a crash
    # at one of right's boundaries lands while left runs beside it, so whether left's settle was
    # written by then varies from run to run: those are not asserted
    assert ("workflow.before_settle", left) in [(run.point, run.step) for run, _ in report.problems]


async def test_the_explorer_fixture_explores_on_the_tests_database(
    explorer: Explorer, database_url: str
) -> None:
    app = akter.App([explored.Shop, explored.Ledger, explored.Warehouse])  # no database of its own
    report = await explorer(
        app, explored.Shop, "fixture", explored.Pay, Payment("o6", card="naive"), probe=_charges_made
    )
    assert explorer.database_url == database_url
    assert explorer.reports == [report]
    assert [run.step for run, _ in report.problems] == ["charge#1 attempt 1"]


async def test_the_testing_page_shows_the_table_the_explorer_prints_for_a_charge_without_a_key(
    explorer: Explorer,
) -> None:
    page = (README.parent / "docs" / "testing.md").read_text()  # the README's testing section, whole
    shown = re.findall(r"^ *# ((?:point|workflow\.).*)$", page, re.M)
    assert len(shown) == 8, shown
    app = explored.make_app(explorer.database_url)
    report = await explorer(
        app, explored.Shop, "shop-1", explored.Pay, Payment("o1", card="naive"), probe=_charges_made
    )
    assert report.text().splitlines()[1:] == shown


async def test_the_readme_worked_example_is_exactly_once_at_every_boundary(explorer: Explorer) -> None:
    ex = _example()
    report = await explorer(akter.App([ex.Shop]), ex.Shop, "shop-1", ex.Ship, ex.Order(id="o-1", qty=2))
    # nobody pays: the day-long wait ends at its deadline, skipped on the clock
    assert report.baseline.outcome == Success(ex.Shipped(order="o-1", paid=None))
    assert report.baseline.hits == {
        "workflow.before_pass": 3,
        "workflow.before_activity": 1,
        "workflow.before_settle": 1,
        "workflow.before_suspend": 2,
    }
    report.assert_exactly_once()


async def test_the_explorer_refuses_a_database_where_another_relay_runs(explorer: Explorer) -> None:
    app = explored.make_app(explorer.database_url)
    async with app.relay() as relay:
        await relay.idle()
        with pytest.raises(akter.ConfigurationError, match=r"1 relay\(s\) are live on it \(" + relay.member):
            await explorer(app, explored.Shop, "busy", explored.Pay, Payment("o9"))
    assert explorer.reports == []


@pytest.mark.slow
async def test_a_relay_killed_after_a_resume_turn_committed_is_finished_once_by_a_fresh_runner(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    receipts = "SELECT count(*) FROM actor_receipts WHERE actor_id = %s AND command = %s"
    first = RelayProcess(database_url, app="tests.apps.explored:app")
    dying: RelayProcess | None = None
    try:
        app = explored.make_app(database_url)
        async with app.client() as client:
            run = await client.actor(explored.Shop, "killed", tenant="acme").start(
                explored.Pay, Payment("o7")
            )
            await until(run.poll, lambda s: s.status == "suspended")  # charged, in its hour's sleep
            assert first.terminate() == 0, first.output()
            resumed = await peek.value(receipts, "killed", "akter.wf.resume")
            dying = RelayProcess(
                database_url, app="tests.apps.explored:app", faults="workflow.before_pass=crash@killed"
            )
            await clock.advance(timedelta(hours=1, seconds=1))
            assert dying.wait(timeout=60) == -9, dying.output()
            # the resume turn committed (its receipt, the execution running) and its pass never
            # began: the sleep is still open and the ledger holds the charge alone
            assert await peek.value(receipts, "killed", "akter.wf.resume") == resumed + 1
            assert (await run.poll()).status == "running"
            assert await peek.value(
                "SELECT exit IS NULL FROM actor_workflow_step WHERE execution_id = %s AND step = 'settle'",
                run.execution_id,
            )
            assert await peek.count("actor_receipts", "ledger-killed") == 1
            async with app.relay():
                await clock.advance(timedelta(seconds=31))  # the recovery timer the resume armed
                result = await run.result(timeout=60)
        assert result == Success(Paid(order="o7", entries=2))
        assert await peek.count("actor_receipts", "ledger-killed") == 2
        state = bytes(await peek.value("SELECT state FROM actor_state WHERE actor_id = 'ledger-killed'"))
        assert b'"texts":["charge o7","paid o7"]' in state, state
        attempts = await peek.rows(
            "SELECT step, count(*) FROM actor_workflow_step WHERE execution_id = %s AND kind = 'activity'"
            " GROUP BY step ORDER BY step",
            run.execution_id,
        )
        assert attempts == [("charge", 1), ("record", 1)]
    finally:
        first.close()
        if dying is not None:
            dying.close()
