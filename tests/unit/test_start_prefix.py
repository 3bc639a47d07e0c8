"""``prefix.run``: a body driven over an empty history, as a start turn runs it — an end when it
reached one without asking for any effect, None otherwise — with its ``wf.log`` records held."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from akter import codec
from akter.callers import System, User
from akter.ids import ActorRef, ExecutionId
from akter.outbox.intents import encode_caller
from akter.workflow.engine import prefix
from tests.integration.test_start_prefix import Answer, Ask

EID = ExecutionId(ActorRef("acme", "PrefixDesk", "d1"), "Answer", "k1")


def _params(ask: Ask) -> dict[str, Any]:
    return {
        "payload": codec.encode(ask, Ask),
        "principal": encode_caller(System(source="timer", ref="x", on_behalf_of=User("ann"))),
    }


@pytest.mark.parametrize(
    ("mode", "outcome"),
    [
        ("ok", "succeeded"),
        ("refuse", "failed"),
        ("crash", "defect"),
        ("unstorable", "defect"),
        ("seeded", "succeeded"),
    ],
)
def test_a_body_that_ends_before_an_effect_has_its_end(mode: str, outcome: str) -> None:
    done = prefix.run(Answer, EID, _params(Ask(mode, 3)))
    assert done is not None
    assert done.outcome == outcome
    stored = codec.decode_primitive(done.result)
    if mode == "ok":  # the principal is the stored one, decoded as a pass decodes it
        assert stored == {"ok": {"text": f"ok 3 0 {User('ann')!r}"}}
    if mode == "unstorable":
        assert "cannot be stored" in str(stored)


@pytest.mark.parametrize("mode", ["activity", "now", "again"])
def test_a_body_that_asks_for_an_effect_or_continues_is_left_to_its_pass(mode: str) -> None:
    assert prefix.run(Answer, EID, _params(Ask(mode))) is None


def test_the_same_execution_gets_the_same_seeded_values_every_run() -> None:
    first, second = (prefix.run(Answer, EID, _params(Ask("seeded"))) for _ in range(2))
    assert first is not None
    assert second is not None
    assert first.result == second.result


def test_the_body_logs_are_held_not_emitted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    done = prefix.run(Answer, EID, _params(Ask("ok")))
    assert done is not None
    assert [r for r in caplog.records if r.name == "akter.workflow.body"] == []
    [held] = done.records
    assert held.getMessage() == "answering ok"
    assert held.funcName == "answer"
    assert getattr(held, "execution", None) == str(EID)
    # and none at all from a run that is discarded: the pass logs them
    assert prefix.run(Answer, EID, _params(Ask("activity"))) is None
    assert [r for r in caplog.records if r.name == "akter.workflow.body"] == []


def test_a_payload_that_does_not_decode_is_left_to_the_pass() -> None:
    assert prefix.run(Answer, EID, {**_params(Ask("ok")), "payload": b"\x00not json"}) is None
