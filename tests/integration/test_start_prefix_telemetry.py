"""An execution its start turn finished (``prefix.py``) leaves the pass span and count a pass
that finished it would: ``akter.pass <workflow>`` with ``akter.pass.result = finished`` and the
outcome, a child of the start turn's span, counted in ``akter.workflow.passes``."""

from __future__ import annotations

from typing import Any

import pytest
from returns.result import Success

from akter.workflow.engine.passes import Pass
from tests.integration.otel_support import EXPORTER, install, metric_points
from tests.integration.test_start_prefix import Answer, Ask, Desk, Told, make_app, running

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", autouse=True)
def _sdk() -> None:
    install()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    EXPORTER.clear()


def _of(span: Any) -> tuple[str, object]:
    return span.name, (span.attributes or {}).get("akter.execution.id")


def _finished(workflow: str) -> int:
    key = ("akter.workflow.passes", (("akter.pass.result", "finished"), ("akter.workflow", workflow)))
    return int(metric_points().get(key, 0))


async def test_a_start_that_finished_its_execution_leaves_a_finished_pass_span(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []
    original = Pass._run

    async def counted(self: Pass) -> None:
        ran.append(str(self.eid))
        await original(self)

    monkeypatch.setattr(Pass, "_run", counted)
    before = _finished("Answer")
    async with running(make_app(database_url)) as (_, client):
        desk = client.actor(Desk, "d1", tenant="acme")
        ok = await desk.start(Answer, Ask("ok"))
        refused = await desk.start(Answer, Ask("refuse"))
        assert await ok.result(timeout=30) == Success(Told("ok 0 0 Anonymous()"))
        assert not isinstance(await refused.result(timeout=30), Success)
    assert ran == []  # no pass ran: the spans are the start turns'
    spans = EXPORTER.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    for run, outcome in ((ok, "succeeded"), (refused, "failed")):
        [span] = [
            s
            for s in spans
            if s.name == "akter.pass Answer"
            and (s.attributes or {}).get("akter.execution.id") == run.execution_id
        ]
        attributes = dict(span.attributes or {})
        assert attributes["akter.pass.result"] == "finished"
        assert attributes["akter.execution.outcome"] == outcome
        assert attributes["akter.pass.in_start_turn"] is True
        assert span.parent is not None
        assert by_id[span.parent.span_id].name.startswith("akter.turn PrefixDesk.")
        assert (span.start_time or 0) <= (span.end_time or 0)
    assert _finished("Answer") == before + 2
