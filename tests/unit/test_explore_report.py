"""What ``ExploreReport`` tells a user about each crashed run (no database: runs as recorded)."""

from __future__ import annotations

import pytest
from returns.result import Failure, Success

from akter.errors import ActivityOutcomeUnknown
from akter.testing._explore import ExploreReport, Run

BASELINE = Run(None, 0, Success(3), receipts=2, probed=1, hits={"workflow.before_settle": 2})


def _crash(hit: int, **changes: object) -> Run:
    fields: dict[str, object] = {
        "point": "workflow.before_settle",
        "hit": hit,
        "outcome": Success(3),
        "receipts": 2,
        "probed": 1,
        "step": f"pay#{hit} attempt 1",
        "crashed": True,
    }
    fields.update(changes)
    return Run(**fields)  # type: ignore[arg-type]


def test_each_kind_of_difference_is_named_for_its_crash() -> None:
    report = ExploreReport(
        BASELINE,
        (
            _crash(1),
            _crash(2, probed=2),
            _crash(3, receipts=3, outcome=Success(4)),
            _crash(4, outcome=Failure(ActivityOutcomeUnknown("past its expiry"))),
            _crash(5, crashed=False, step=None),
        ),
    )
    assert [(run.hit, problem) for run, problem in report.problems] == [
        (2, "probe counted 2 effects, not 1"),
        (3, "ended <Success: 4>, not <Success: 3>; 3 commands received, not 2"),
        (4, f"ended {report.crashes[3].outcome!r}, not <Success: 3>; ActivityOutcomeUnknown"),
        (5, "never reached workflow.before_settle #5: the run took another path"),
    ]
    lines = report.text().splitlines()
    assert lines[2].endswith("exactly once")
    with pytest.raises(AssertionError, match=r"pay#2 attempt 1 .* probe counted 2 effects, not 1"):
        report.assert_exactly_once()


def test_a_report_without_problems_passes() -> None:
    ExploreReport(BASELINE, (_crash(1), _crash(2))).assert_exactly_once()
