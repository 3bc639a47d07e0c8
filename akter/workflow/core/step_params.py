"""The parameters that name one step occurrence in the pass's statements (``queries.py``)."""

from __future__ import annotations

from typing import Any

from akter import codec
from akter.workflow.api.history import StepKey, StepRow


def key_params(key: StepKey) -> dict[str, Any]:
    return {"step": key.step, "scope": key.scope, "occurrence": key.occurrence}


def record_params(
    kind: str,
    key: StepKey,
    *,
    exit_: bytes | None = None,
    after_ms: float | None = None,
    tag: str | None = None,
    cursor: int | None = None,
) -> dict[str, Any]:
    """For ``akter_wf_record``: a clock, wait or race step written (and settled, with ``exit_``)."""
    return {
        "kind": kind,
        **key_params(key),
        "exit": exit_,
        "after_ms": after_ms,
        "wait_tag": tag,
        "cursor": cursor,
    }


def settle_params(settles: list[tuple[StepKey, int, bytes]]) -> dict[str, Any]:
    """The parallel arrays of attempts to settle, as the statements that settle take them."""
    return {
        "steps": [k.step for k, _, _ in settles],
        "scopes": [k.scope for k, _, _ in settles],
        "occurrences": [k.occurrence for k, _, _ in settles],
        "attempts": [a for _, a, _ in settles],
        "exits": [e for _, _, e in settles],
    }


def step_row(r: dict[str, Any]) -> StepRow:
    """A step row as the pass's statements return it, as the driver records it."""
    return StepRow(
        key=StepKey(r["step"], r["scope"], r["occurrence"]),
        attempt=r["attempt"],
        kind=r["kind"],
        exit=None if r["exit"] is None else codec.decode_primitive(bytes(r["exit"])),
        due_ms=r["due_ms"],
        started_ms=r["started_ms"] or 0,
        cursor=r["wait_cursor"],
        scanned=r["scanned"],
    )
