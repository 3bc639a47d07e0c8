"""The views ``akter inspect`` and ``akter demo`` read: plain records, no I/O."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    pass

from akter.inspect.children import ChildProgress
from akter.inspect.decode import Shown

# ---- views ------------------------------------------------------------------------------------


@attrs.frozen
class ReceiptView:
    command_id: str
    command: str
    failed: bool
    outcome: Shown
    caller: str
    created_at: datetime
    expires_at: datetime


@attrs.frozen
class EventView:
    sequence: int
    tag: str
    value: Shown
    command_id: str
    created_at: datetime


@attrs.frozen
class OutboxView:
    intent_id: str
    timer_key: str | None
    due_at: datetime
    target: str
    command: str
    payload: Shown
    caller: Shown
    attempts: int
    last_error: str | None
    claimed_by: str | None
    created_at: datetime
    #: set when the relay parked the row as undeliverable (``akter.outbox.admin``)
    parked_at: datetime | None = None
    parked_reason: str | None = None


@attrs.frozen
class StepView:
    step: str
    #: which await of the step this is (1-based) within ``scope`` ("" for the body, else a branch)
    occurrence: int
    scope: str
    attempt: int
    kind: str
    exit: Shown | None
    due_at: datetime | None
    wait_tag: str | None
    wait_cursor: int | None
    scanned: int | None
    started_at: datetime
    settled_at: datetime | None

    @property
    def pending(self) -> bool:
        return self.exit is None


@attrs.frozen
class ExecutionSummary:
    execution_id: str
    workflow: str
    key: str
    status: str
    outcome: str | None
    interrupt: bool
    result: Shown | None
    blocked_reason: str | None
    started_at: datetime
    finished_at: datetime | None


@attrs.frozen
class ExecutionView:
    now: datetime
    execution_id: str
    owner: str
    workflow: str
    key: str
    manifest_hash: str
    status: str
    outcome: str | None
    interrupt: bool
    blocked_reason: str | None
    payload: Shown
    principal: Shown
    versions: dict[str, Any]
    event_cursor: int
    result: Shown | None
    started_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    steps: list[StepView]
    timer: OutboxView | None
    #: the children it started (``akter.inspect.children``); None when it started none
    children: ChildProgress | None = None
    #: the execution that started this one as its child
    parent_id: str | None = None
    #: which run of the execution this is: one more per ``continue_as_new``
    run_number: int = 1
    #: when the execution is interrupted if it has not finished (``start(..., timeout=)``)
    deadline_at: datetime | None = None


@attrs.frozen
class ActorView:
    now: datetime
    actor: str
    routing_key: int
    bucket: int
    generation: int
    version: int
    event_seq: int
    created_at: datetime
    state: Shown | None
    state_updated_at: datetime | None
    executions: list[ExecutionSummary]
    receipts: list[ReceiptView]
    events: list[EventView]
    outbox: list[OutboxView]
    counts: dict[str, int]
