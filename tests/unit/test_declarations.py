"""Declarations are validated when made, and every problem is reported at once."""

from __future__ import annotations

import attrs
import pytest

import akter


@attrs.frozen
class State:
    n: int = 0


@attrs.frozen
class NeedsArgs:
    n: int


class NotAttrs:
    pass


@attrs.frozen
class Ev:
    x: int


def test_actor_reports_every_problem_at_once() -> None:
    with pytest.raises(akter.DeclarationError) as info:
        akter.Actor("bad name!", state=NeedsArgs, events=[NotAttrs, Ev, Ev], max_state_bytes=0)
    problems = info.value.problems
    assert len(problems) == 5, problems
    assert any("bad name!" in p for p in problems)
    assert any("fields without defaults" in p for p in problems)
    assert any("NotAttrs" in p for p in problems)
    assert any("two event types are named Ev" in p for p in problems)
    assert any("max_state_bytes" in p for p in problems)


def test_size_caps_default_to_256_kib_and_must_be_positive() -> None:
    actor = akter.Actor("Capped", state=State)
    caps = (actor.max_payload_bytes, actor.max_event_bytes, actor.max_result_bytes)
    assert caps == (256 * 1024,) * 3
    with pytest.raises(akter.DeclarationError) as info:
        akter.Actor("Bad", state=State, max_payload_bytes=0, max_event_bytes=-1, max_result_bytes=1.5)  # type: ignore[arg-type]  # wrong on purpose
    assert [p.split()[0] for p in info.value.problems] == [
        "max_payload_bytes",
        "max_event_bytes",
        "max_result_bytes",
    ]


def test_reserved_prefix_is_refused() -> None:
    with pytest.raises(akter.DeclarationError, match="reserved prefix"):
        akter.Actor("akter.internal", state=State)


def test_initial_allows_state_without_defaults() -> None:
    actor = akter.Actor("Ok", state=NeedsArgs, initial=lambda: NeedsArgs(3))
    assert actor.initial_state() == NeedsArgs(3)


def test_command_problems_are_reported_together() -> None:
    actor = akter.Actor("A", state=State)

    class PlainError(Exception):
        pass

    with pytest.raises(akter.DeclarationError) as info:

        @actor.command(errors=[PlainError, int])  # type: ignore[list-item, arg-type]  # wrong on purpose
        async def handler(turn, cmd, extra):  # type: ignore[no-untyped-def]  # unannotated on purpose
            return None

    problems = info.value.problems
    assert any("async def" in p for p in problems)
    assert any("takes 3 parameters" in p for p in problems)
    assert any("annotate the payload" in p for p in problems)
    assert any("return type" in p for p in problems)
    assert any("PlainError must be an attrs class" in p for p in problems)
    assert any("not an Exception subclass" in p for p in problems)


def test_duplicate_command_names_are_refused() -> None:
    actor = akter.Actor("A", state=State)

    @actor.command
    def go(turn: akter.Turn[State], cmd: State) -> None:
        return None

    with pytest.raises(akter.DeclarationError, match="already declares a command named 'go'"):

        @actor.command(name="go")
        def go_again(turn: akter.Turn[State], cmd: State) -> None:
            return None


def test_command_types_come_from_annotations() -> None:
    actor = akter.Actor("A", state=State)

    @actor.command
    def go(turn: akter.Turn[State], cmd: Ev) -> int:
        return cmd.x

    assert (go.name, go.input, go.output, go.internal) == ("go", Ev, int, False)


def test_emitting_an_undeclared_event_type_is_a_defect() -> None:
    actor = akter.Actor("A", state=State, events=[Ev])
    with pytest.raises(akter.Defect, match="does not declare event type"):
        actor.event_tag(State())


def test_app_refuses_duplicate_actor_names() -> None:
    a = akter.Actor("Same", state=State)
    b = akter.Actor("Same", state=State)
    with pytest.raises(akter.DeclarationError, match="two actor types are named 'Same'"):
        akter.App([a, b], database_url="postgresql://unused")
