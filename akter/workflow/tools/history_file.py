"""Recorded executions as JSON: the history files ``akter.testing`` exports and replays. No I/O
beyond what the caller hands in (text in, text out).

A history file holds executions exactly as the store holds them, stored bytes read as their
cattrs primitives (the same values ``replay_read`` hands the replay check), so replaying a file
is replaying the database as it was when the file was written::

    {"format": "akter.history/1", "note": "...",
     "executions": [{"execution_id": "x1....", "tenant": ..., "actor_type": ..., "actor_id": ...,
                     "workflow": ..., "key": ..., "status": "suspended", "interrupt": false,
                     "payload": {...}, "principal": {"user": "ann"} | null,
                     "versions": {...}, "outcome": null, "result": null,
                     "steps": [{"step": ..., "scope": "", "occurrence": 1, "attempt": 1,
                                "kind": "activity", "exit": {"ok": ...}, "started_us": ...,
                                "due_ms": null, "cursor": null, "scanned": null}, ...]}]}

Keys are sorted, steps are in key order and nothing in it says when it was written, so a file
exported twice from the same rows is the same file (a golden file's diff shows what changed, and
only that). Its replay's clock is the latest moment its rows record (``recorded_ms``: the last
step attempt's start), not the export's. Files written before carry ``exported_at_ms``, which
is still their clock. A file that is not of this shape is ``InvalidInput`` naming what is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import attrs

from akter.callers import Anonymous, Principal, User
from akter.errors import InvalidInput
from akter.workflow.core.driver import StepKey
from akter.workflow.tools.replay import RecordedExecution, RecordedStep

FORMAT = "akter.history/1"


@attrs.frozen
class History:
    """The executions of one file, and the clock their replay uses (``recorded_ms`` of them; a
    file written before kept its export time)."""

    executions: tuple[RecordedExecution, ...]
    clock_ms: int
    note: str = ""

    @property
    def exported_at_ms(self) -> int:
        """The replay's clock, by the name it had when files carried their export time."""
        return self.clock_ms


def recorded_ms(executions: Iterable[RecordedExecution]) -> int:
    """The latest moment the executions' rows record, in epoch milliseconds: the start of the
    last step attempt (0 when none has a step)."""
    return max((s.started_us // 1000 for e in executions for s in e.steps), default=0)


def _principal(principal: Principal | None) -> dict[str, str] | None:
    match principal:
        case User(subject=subject):
            return {"user": subject}
        case Anonymous():
            return {"anonymous": ""}
    return None


def _read_principal(data: Any) -> Principal | None:
    if data is None:
        return None
    if isinstance(data, dict) and isinstance(data.get("user"), str):
        return User(data["user"])
    if data == {"anonymous": ""}:
        return Anonymous()
    raise InvalidInput(f"principal {data!r} is neither {{'user': name}}, {{'anonymous': ''}} nor null")


def dumps(history: History) -> str:
    """The file's text."""
    return json.dumps(
        {
            "format": FORMAT,
            "note": history.note,
            "executions": [_execution(e) for e in history.executions],
        },
        indent=1,
        sort_keys=True,
        ensure_ascii=False,
    )


def _execution(e: RecordedExecution) -> dict[str, Any]:
    if e.unreadable is not None:
        raise InvalidInput(f"execution {e.execution_id} cannot be exported: {e.unreadable}")
    # a first run's file is written as before this field existed
    run = {} if e.run_number == 1 else {"run_number": e.run_number}
    return {
        **run,
        "execution_id": e.execution_id,
        "tenant": e.tenant,
        "actor_type": e.actor_type,
        "actor_id": e.actor_id,
        "workflow": e.workflow,
        "key": e.key,
        "status": e.status,
        "interrupt": e.interrupt,
        "payload": e.payload,
        "principal": _principal(e.principal),
        "versions": dict(e.versions),
        "outcome": e.outcome,
        "result": e.result,
        "steps": [
            {
                "step": s.key.step,
                "scope": s.key.scope,
                "occurrence": s.key.occurrence,
                "attempt": s.attempt,
                "kind": s.kind,
                "exit": s.exit,
                "started_us": s.started_us,
                "due_ms": s.due_ms,
                "cursor": s.cursor,
                "scanned": s.scanned,
            }
            for s in sorted(e.steps, key=lambda s: (s.key, s.attempt))
        ],
    }


def loads(text: str, *, source: str = "the history") -> History:
    """A file's text as a ``History``; ``InvalidInput`` naming ``source`` when it is not one."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InvalidInput(f"its format is not {FORMAT!r}")
        executions = tuple(_read_execution(e) for e in data["executions"])
        clock = int(data["exported_at_ms"]) if "exported_at_ms" in data else recorded_ms(executions)
        return History(executions, clock, str(data.get("note", "")))
    except (ValueError, KeyError, TypeError) as exc:
        what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise InvalidInput(f"{source} is not an akter history file: {what}") from exc


def _read_execution(e: dict[str, Any]) -> RecordedExecution:
    return RecordedExecution(
        execution_id=str(e["execution_id"]),
        tenant=str(e["tenant"]),
        actor_type=str(e["actor_type"]),
        actor_id=str(e["actor_id"]),
        workflow=str(e["workflow"]),
        key=str(e["key"]),
        status=str(e["status"]),
        payload=e["payload"],
        principal=_read_principal(e["principal"]),
        versions={str(k): int(v) for k, v in e["versions"].items()},
        steps=tuple(_read_step(s) for s in e["steps"]),
        interrupt=bool(e["interrupt"]),
        outcome=e["outcome"],
        result=e["result"],
        run_number=int(e.get("run_number", 1)),
    )


def _read_step(s: dict[str, Any]) -> RecordedStep:
    def number(name: str) -> int | None:
        return None if s[name] is None else int(s[name])

    return RecordedStep(
        key=StepKey(str(s["step"]), str(s["scope"]), int(s["occurrence"])),
        attempt=int(s["attempt"]),
        kind=str(s["kind"]),
        exit=s["exit"],
        started_us=int(s["started_us"]),
        due_ms=number("due_ms"),
        cursor=number("cursor"),
        scanned=number("scanned"),
    )


def of(executions: Iterable[RecordedExecution], note: str = "") -> History:
    """The executions as one file's, in id order, with the clock their rows record."""
    ordered = tuple(sorted(executions, key=lambda e: e.execution_id))
    return History(ordered, recorded_ms(ordered), note)
