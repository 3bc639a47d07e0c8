"""The parameters that name one step occurrence in the pass's statements (``queries.py``)."""

from __future__ import annotations

from typing import Any

from akter.workflow.driver import StepKey


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
