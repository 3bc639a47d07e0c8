"""akter's one exception tree: what a user can see, and what they cannot swallow."""

from __future__ import annotations

import ast
import inspect
import re
from datetime import timedelta
from pathlib import Path

import attrs
import pytest

import akter
from akter import errors, faults
from akter.store.pool import connection_kwargs
from akter.workflow.engine.passes import Stale

AKTER = Path(akter.__file__).parent


@attrs.frozen
class Empty:
    pass


@attrs.frozen
class Order:
    id: str


def _gone(module: str) -> type[Exception]:
    """An attrs error class named ``Gone`` that lives in ``module``."""
    cls = attrs.frozen(auto_exc=True)(type("Gone", (Exception,), {"__annotations__": {"why": "str"}}))
    cls.__module__ = module
    return cls


def test_the_tree_drawn_in_the_docstring_is_the_tree() -> None:
    assert errors.__doc__ is not None
    drawn_names = re.findall(r"[├└]── (\w+)", errors.__doc__)
    declared = {
        name
        for name, cls in vars(errors).items()
        if inspect.isclass(cls) and issubclass(cls, errors.AkterError) and cls is not errors.AkterError
    }
    assert sorted(drawn_names) == sorted(declared)
    exported = {name for name in declared if getattr(akter, name, None) is getattr(errors, name)}
    # the docstring lists the classes akter raises but does not export
    listed = errors.__doc__.split("not exported (import them from\nhere, or catch their base)::", 1)[1]
    assert set(listed.split("\n\n", 2)[1].split()) == declared - exported


def test_a_stale_pass_is_a_signal_an_except_exception_cannot_swallow() -> None:
    assert issubclass(Stale, BaseException)
    assert not issubclass(Stale, Exception)

    def logs_and_goes_on() -> None:
        try:
            raise Stale("generation 3 of Shop/s1 no longer holds")
        except Exception:  # what a loop that logs and goes on, or a user's handler, would write
            pytest.fail("Stale was caught as an Exception")

    with pytest.raises(Stale):
        logs_and_goes_on()


def test_two_declared_errors_of_one_class_name_are_refused_on_a_workflow() -> None:
    shop = akter.Actor("DupErrorsWf", state=Empty)
    with pytest.raises(akter.DeclarationError, match="share the class name 'Gone'") as info:
        shop.workflow("Ship", input=Order, errors=[_gone("billing"), _gone("stock")])
    assert "billing.Gone, stock.Gone" in str(info.value)


def test_two_declared_errors_of_one_class_name_are_refused_on_an_activity() -> None:
    flow = akter.Actor("DupErrorsAct", state=Empty).workflow("Ship", input=Order)
    with pytest.raises(akter.DeclarationError, match="share the class name 'Gone'"):
        flow.activity("reserve", errors=[_gone("billing"), _gone("stock")])
    assert "reserve" not in flow.steps  # nothing half-declared


def test_a_retry_of_no_attempts_is_a_declaration_error() -> None:
    with pytest.raises(akter.DeclarationError, match="at least one attempt"):
        akter.Retry(times=0)


def test_settings_errors_are_configuration_errors() -> None:
    with pytest.raises(akter.ConfigurationError, match="heartbeat must be under half"):
        akter.RelaySettings(heartbeat=timedelta(seconds=3), ownership_lease=timedelta(seconds=4))
    with pytest.raises(akter.ConfigurationError, match="lock_timeout must not be negative"):
        connection_kwargs("postgresql://unused", lock_timeout=timedelta(seconds=-1))
    with pytest.raises(akter.ConfigurationError, match="only 'crash'"):
        faults.load_environment("turn.before_commit=pause")
    # still a ValueError, as these were before they had their own class
    assert issubclass(akter.ConfigurationError, ValueError)


def test_no_assert_is_a_runtime_check_in_akter() -> None:
    """``python -O`` strips asserts; a check that must hold raises a typed error instead."""
    found = []
    for path in sorted(AKTER.rglob("*.py")):
        rel = path.relative_to(AKTER).as_posix()
        found.extend(
            f"{rel}:{node.lineno}"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Assert)
        )
    assert found == []


def test_crashes_from_the_environment_are_armed_once_however_often_an_engine_starts() -> None:
    try:
        for _ in range(3):  # each engine start loads AKTER_FAULTS again
            faults.load_environment("relay.before_delete=crash@order-7,turn.before_commit=crash")
        assert faults._armed["relay.before_delete"] == [faults.Crash("relay.before_delete", "order-7")]
        assert faults._armed["turn.before_commit"] == [faults.Crash("turn.before_commit", None)]
    finally:
        faults.disarm_all()
