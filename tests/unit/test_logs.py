"""Log records with fields: the text format for people, the JSON format for machines."""

from __future__ import annotations

import json
import logging
import sys

import pytest

import akter
from akter import logs
from akter.ids import ActorRef, ExecutionId

EID = ExecutionId(ActorRef("acme", "Shop", "s1"), "Ship", "order-7")


def _record(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    logger = logging.getLogger("akter.workflow")
    return logger.makeRecord(logger.name, logging.WARNING, __file__, 1, msg, args, None, extra=extra)


def test_fields_derive_actor_workflow_and_bucket_from_an_execution_id() -> None:
    assert logs.fields(execution=EID, step="reserve#1", attempt=2) == {
        "execution": str(EID),
        "workflow": "Ship",
        "actor": "acme/Shop/s1",
        "bucket": EID.owner.bucket,
        "step": "reserve#1",
        "attempt": 2,
    }
    assert logs.fields(execution=str(EID)) == logs.fields(execution=EID)
    assert logs.fields(execution="not-an-id") == {"execution": "not-an-id"}  # kept, never dropped


def test_the_text_format_shows_an_execution_by_its_readable_parts() -> None:
    record = _record(
        "activity attempt failed: %r", ValueError("no stock"), **logs.fields(execution=EID, attempt=2)
    )
    line = logs.TextFormatter().format(record)
    assert line.endswith(
        f" WARNING akter.workflow activity attempt failed: ValueError('no stock') "
        f"execution=acme/Shop/s1/Ship/order-7 attempt=2 bucket={EID.owner.bucket}"
    )
    assert str(EID) not in line
    # today's calls that put the id in the message read the same way
    legacy = logs.TextFormatter().format(_record("execution %s succeeded", str(EID)))
    assert legacy.endswith(" execution acme/Shop/s1/Ship/order-7 succeeded")


def test_the_text_format_quotes_values_that_would_split_the_line() -> None:
    line = logs.TextFormatter().format(_record("m", **logs.fields(step="reserve#1 in branch 0")))
    assert line.endswith('m step="reserve#1 in branch 0"')


def test_the_json_format_is_one_object_a_line_with_every_field() -> None:
    try:
        raise ValueError("no stock")
    except ValueError:
        record = _record("attempt failed", **logs.fields(execution=EID, step="reserve#1", attempt=1))
        record.exc_info = sys.exc_info()
    line = logs.JsonFormatter().format(record)
    assert "\n" not in line
    out = json.loads(line)
    assert out["level"] == "warning"
    assert out["logger"] == "akter.workflow"
    assert out["message"] == "attempt failed"
    assert out["execution"] == str(EID)  # canonical, as `akter inspect execution` takes it
    assert (out["actor"], out["workflow"], out["step"], out["attempt"]) == (
        "acme/Shop/s1",
        "Ship",
        "reserve#1",
        1,
    )
    assert out["bucket"] == EID.owner.bucket
    assert "ValueError: no stock" in out["exception"]
    assert out["time"].endswith("+00:00")


def test_an_unknown_format_is_a_configuration_error() -> None:
    with pytest.raises(akter.ConfigurationError, match="log format 'xml'"):
        logs.formatter("xml")
