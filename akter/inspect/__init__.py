"""Read-only views of what akter stored: an actor's state, receipts, events and outbox rows, and
its workflow executions with their decoded steps.

``akter inspect`` (``akter.cli.inspect``) prints these views; ``akter demo`` (``akter.demo``)
narrates a run from them; a test can read them as an outside observer. Every query names the
routing key first, and one view is read in one read-only, repeatable-read transaction: a
consistent snapshot, and nothing is ever written.

Values are decoded with the declarations of the ``App`` given — the actor's state type, its event
types, each command's input and output, each workflow step's result and error types — through the
codec the engine itself uses (``akter.codec``, the exit tags of ``akter.workflow.core.exits``). A value
that does not decode, or whose declaration is gone from the App, is shown as *undecodable* with
the reason and its raw form; nothing is replaced by a default (design, section 5).

The package, by concept: ``decode`` (stored values as shown), ``views`` (the records read),
``read`` (the queries, one snapshot per view), ``render`` (text and JSON); the command is in
``akter.cli``.
"""

from __future__ import annotations

from akter.inspect.decode import Shown, decode_exit, decode_value
from akter.inspect.limits import DEFAULT_LIMIT
from akter.inspect.read import connect, read_actor, read_events, read_execution
from akter.inspect.render import jsonable, render_actor, render_execution, step_line, to_json, when
from akter.inspect.views import (
    ActorView,
    EventView,
    ExecutionSummary,
    ExecutionView,
    OutboxView,
    ReceiptView,
    StepView,
)

__all__ = [
    "DEFAULT_LIMIT",
    "ActorView",
    "EventView",
    "ExecutionSummary",
    "ExecutionView",
    "OutboxView",
    "ReceiptView",
    "Shown",
    "StepView",
    "connect",
    "decode_exit",
    "decode_value",
    "jsonable",
    "read_actor",
    "read_events",
    "read_execution",
    "render_actor",
    "render_execution",
    "step_line",
    "to_json",
    "when",
]
