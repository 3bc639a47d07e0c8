"""``akter.testing.explore``: a workflow crashed at every step boundary, for real (its runner
dropped at the fault point, a fresh runner finishing it), effects counted.

Over ``tests.apps.explored.Pay`` whose activities send commands with derived ids, every crash
ends as the uncrashed run did with the same commands received; over the same workflow whose
charge calls a provider without an idempotency key, the explorer reports the card charged twice
at the one boundary where that happens: after the charge ran, before its attempt settled.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from returns.result import Success

from akter import testing
from tests.apps import explored
from tests.apps.explored import Paid, Payment


@pytest.fixture(autouse=True)
def _charges() -> Iterator[None]:
    explored.CHARGES.clear()
    yield
    explored.CHARGES.clear()


async def test_activities_with_derived_ids_survive_a_crash_at_every_boundary(database_url: str) -> None:
    app = explored.make_app(database_url)
    report = await testing.explore(app, explored.Shop, "shop", explored.Pay, Payment("o1"))
    assert report.baseline.outcome == Success(Paid(order="o1", entries=2))
    assert report.baseline.receipts == 2
    # two attempts, two settles, one suspension (the sleep): five crashes, each finished
    assert [(r.point, r.hit) for r in report.crashes] == [
        ("workflow.before_activity", 1),
        ("workflow.before_activity", 2),
        ("workflow.before_settle", 1),
        ("workflow.before_settle", 2),
        ("workflow.before_suspend", 1),
    ]
    charge, record = "charge#1 attempt 1", "record#1 attempt 1"
    assert [r.step for r in report.crashes] == [charge, record, charge, record, "after charge#1"]
    assert report.problems == ()
    report.assert_exactly_once()


async def test_an_effect_without_an_idempotency_key_is_reported_duplicated_where_it_is(
    database_url: str,
) -> None:
    app = explored.make_app(database_url)
    report = await testing.explore(
        app,
        explored.Shop,
        "naive",
        explored.Pay,
        Payment("o2", card="naive"),
        probe=lambda: len(explored.CHARGES),
    )
    assert report.baseline.probed == 1
    ((run, problem),) = report.problems
    assert (run.point, run.hit, run.step) == ("workflow.before_settle", 1, "charge#1 attempt 1")
    assert problem == "probe counted 2 effects, not 1"
    with pytest.raises(
        AssertionError, match=r"workflow.before_settle +1  charge#1 attempt 1 .* probe counted 2"
    ):
        report.assert_exactly_once()
