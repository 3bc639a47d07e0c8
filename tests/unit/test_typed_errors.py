"""What a user sees when a declaration, a retry policy or a failure is wrong: a typed akter error
that names what is wrong, never a raw ``TypeError`` or an empty message."""

from __future__ import annotations

import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
from returns.primitives.exceptions import UnwrapFailedError
from returns.result import Failure

import akter
from akter.workflow.api.policies import Backoff
from akter.workflow.core import exits
from akter.workflow.core.driver import retry_at_ms

ROOT = Path(__file__).parents[2]


@attrs.frozen
class Empty:
    pass


@attrs.frozen
class Tick:
    n: int


def _flow(actor: str) -> akter.Workflow[Empty, Any]:
    return akter.Actor(actor, state=Empty, events=[Tick]).workflow("Flow", input=Empty)


@pytest.mark.parametrize("kind", ["activity", "sleep", "race", "wait"])
@pytest.mark.parametrize("name", [["x"], {"x": 1}, {"x"}])
def test_an_unhashable_step_name_is_a_declaration_error_naming_the_workflow_and_the_name(
    kind: str, name: Any
) -> None:
    flow = _flow(f"Unhashable{kind.title()}")
    declare = getattr(flow, kind)
    with pytest.raises(akter.DeclarationError) as info:
        declare(name, Tick) if kind == "wait" else declare(name)
    assert "Flow" in info.value.subject
    assert any(repr(name) in p and "not valid" in p for p in info.value.problems), info.value.problems
    assert flow.steps == {}  # nothing half-declared


def test_a_step_name_that_is_not_a_string_is_refused_once_with_its_workflow() -> None:
    flow = _flow("NumberStep")
    with pytest.raises(akter.DeclarationError) as info:
        flow.activity(7)  # type: ignore[call-overload]  # wrong on purpose
    assert info.value.subject == "activity NumberStep.Flow.7"
    assert info.value.problems == ["step name 7 is not valid (a str of letters, digits, _ . : -)"]


def test_unlimited_retries_are_declared_with_times_none_and_never_run_out() -> None:
    step = _flow("Unlimited").activity("a", retry=akter.Retry(times=None))
    defect = {"defect": {"type": "ValueError", "message": "boom"}}
    for attempt in (1, 2, 50, 10_000, 10**9):
        due = retry_at_ms(step, attempt, defect, now_ms=0, interrupting=False)
        assert due is not None
        # the backoff's cap is the longest wait between two attempts
        assert 0 <= due <= 10 * 60 * 1000
    assert retry_at_ms(step, 10**9, defect, now_ms=0, interrupting=True) is None


def test_the_backoff_reaches_its_cap_and_stays_there_for_any_attempt() -> None:
    backoff = akter.Retry.exponential(timedelta(seconds=1), times=None, cap=timedelta(minutes=5)).backoff
    assert backoff.delay(1) == timedelta(seconds=1)
    assert backoff.delay(3) == timedelta(seconds=4)
    assert backoff.delay(2_000) == timedelta(minutes=5)  # 2.0 ** 1999 overflows a float
    assert backoff.delay(10**12) == timedelta(minutes=5)


@pytest.mark.parametrize(
    ("times", "problem"),
    [
        (0, "times must be a positive int"),
        (-3, "times must be a positive int"),
        (1.5, "times must be a positive int"),
        ("3", "times must be a positive int"),
        (True, "times must be a positive int"),
    ],
)
def test_a_bad_attempt_count_is_a_declaration_error_saying_what_to_pass(times: Any, problem: str) -> None:
    with pytest.raises(akter.DeclarationError) as info:
        akter.Retry(times=times)
    assert problem in info.value.problems[0]
    assert "None for no limit" in info.value.problems[0]


def test_a_bad_backoff_is_a_declaration_error_listing_every_problem() -> None:
    with pytest.raises(akter.DeclarationError) as info:
        Backoff(base=timedelta(seconds=-1), factor=0.5, cap=timedelta(seconds=-2))
    assert [p.split()[0] for p in info.value.problems] == ["base", "factor", "cap"]
    with pytest.raises(akter.DeclarationError, match="cap must be at least base"):
        akter.Retry.exponential(timedelta(minutes=5), times=3, cap=timedelta(minutes=1))
    with pytest.raises(akter.DeclarationError, match="base must be a non-negative timedelta"):
        akter.Retry.constant(5, times=3)  # type: ignore[arg-type]  # wrong on purpose
    with pytest.raises(akter.DeclarationError, match="factor must be a finite number"):
        akter.Retry.exponential(timedelta(seconds=1), times=3, factor=float("inf"))
    with pytest.raises(akter.DeclarationError, match=r"backoff must be a Backoff \(akter\.Retry"):
        akter.Retry(times=3, backoff=timedelta(seconds=1))  # type: ignore[arg-type]  # wrong on purpose


def test_an_activity_refuses_a_retry_that_is_not_a_retry() -> None:
    flow = _flow("NotARetry")
    with pytest.raises(akter.DeclarationError, match=r"retry must be an akter\.Retry"):
        flow.activity("a", retry=3)  # type: ignore[call-overload]  # wrong on purpose
    assert flow.steps == {}


@pytest.mark.parametrize(
    ("defect", "shown", "represented"),
    [
        (akter.Defect("", error_type="ValueError"), "ValueError", "Defect('', error_type='ValueError')"),
        (
            akter.Defect("boom", error_type="ValueError"),
            "ValueError: boom",
            "Defect('boom', error_type='ValueError')",
        ),
        (akter.Defect("no type"), "Defect: no type", "Defect('no type')"),
        (akter.Defect(""), "Defect", "Defect('')"),
        # a message that already names its class is not told twice
        (
            akter.Defect("<command Shop.pay> raised KeyError: 'x'", error_type="KeyError"),
            "<command Shop.pay> raised KeyError: 'x'",
            "Defect(\"<command Shop.pay> raised KeyError: 'x'\", error_type='KeyError')",
        ),
    ],
)
def test_a_defect_names_its_error_class_and_message(
    defect: akter.Defect, shown: str, represented: str
) -> None:
    assert str(defect) == shown
    assert repr(defect) == represented
    assert repr(Failure(defect)) == f"<Failure: {shown}>"


def test_unwrapping_a_failed_result_shows_what_failed() -> None:
    with pytest.raises(UnwrapFailedError) as info:
        Failure(akter.Defect("", error_type="RuntimeError")).unwrap()
    shown = "".join(traceback.format_exception(info.value))
    assert "akter.errors.Defect: RuntimeError" in shown


def test_a_recorded_defect_reads_back_as_recorded_and_records_the_same_again() -> None:
    """Stored exits keep their shape: the class and the message, each in its own field."""
    recorded = {"defect": {"type": "ValueError", "message": "boom"}}
    outcome = exits.decode(recorded, None, ())
    assert isinstance(outcome, exits.Raise)
    assert isinstance(outcome.error, akter.Defect)
    assert (outcome.error.error_type, outcome.error.message, str(outcome.error)) == (
        "ValueError",
        "boom",
        "ValueError: boom",
    )
    assert exits.encode_error(outcome.error, ()) == recorded


def test_benchmarks_and_docs_name_no_absolute_checkout_path() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("benchmarks", "docs")
        for path in sorted((ROOT / folder).rglob("*"))
        if path.suffix in {".py", ".md", ".txt", ".toml", ".json"}
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "/work/" in line
    ]
    found += [
        f"README.md:{n}"
        for n, line in enumerate((ROOT / "README.md").read_text().splitlines(), 1)
        if "/work/" in line
    ]
    assert found == []


def test_an_unlimited_retry_always_pauses_between_attempts() -> None:
    # by default: 1 s, doubling, at most 10 min
    assert akter.Retry(times=None) == akter.Retry.exponential(
        timedelta(seconds=1), times=None, cap=timedelta(minutes=10)
    )
    assert akter.Retry(times=3).backoff == Backoff()  # a limited one keeps its default
    with pytest.raises(akter.DeclarationError, match="unlimited retries need a backoff with a positive base"):
        akter.Retry.constant(timedelta(0), times=None)
