"""``akter relay --log-format json``: a real relay process logs one JSON object a line, and its
records about an execution carry the execution, actor, workflow and bucket as fields."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from returns.result import Success

from akter.ids import ExecutionId
from tests.apps import flows
from tests.apps.flows import Done, Flows, Job, Settle
from tests.apps.relay_procs import RelayProcess
from tests.integration.workflow_support import until

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "how", [{"args": ["--log-format", "json"]}, {"AKTER_LOG_FORMAT": "json"}], ids=["flag", "variable"]
)
async def test_a_relay_logs_json_lines_with_the_execution_fields(
    database_url: str, how: dict[str, Any]
) -> None:
    flows.CALLS.clear()
    relay = RelayProcess(database_url, app="tests.apps.flows:app", **how)
    try:
        async with flows.make_app(database_url).client() as client:
            run = await client.actor(Flows, "j1", tenant="acme").start(Settle, Job("logged", seconds=0))
            assert await run.result(timeout=60) == Success(
                Done("ledger 2; principal Anonymous(); tenant acme")
            ), relay.output()
            # the result commits before the runner logs it: wait for the line, then stop
            await until(lambda: asyncio.to_thread(relay.output), lambda out: "execution succeeded" in out)
        assert relay.terminate() == 0, relay.output()
        lines = relay.output().splitlines()
    finally:
        relay.close()
    records: list[dict[str, Any]] = [json.loads(line) for line in lines]  # every line is JSON
    assert all({"time", "level", "logger", "message"} <= r.keys() for r in records), records
    assert any(r["message"].startswith("relay stopped") for r in records), records
    eid = ExecutionId.parse(run.execution_id)
    finished = [r for r in records if r["message"] == "execution succeeded"]
    assert len(finished) == 1, records
    assert finished[0]["level"] == "info"
    assert finished[0]["logger"] == "akter.workflow"
    assert finished[0]["execution"] == run.execution_id
    assert finished[0]["actor"] == "acme/Flows/j1"
    assert finished[0]["workflow"] == "Settle"
    assert finished[0]["bucket"] == eid.owner.bucket
