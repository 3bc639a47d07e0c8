"""Logs with fields: what every akter log record carries, and the two ways it is printed.

akter logs through the standard ``logging`` module (loggers ``akter.*``). A record about an
execution, an actor, a step or a bucket carries them as fields, passed with ``extra=`` and built
by ``fields``, so the message stays a sentence and the identities stay machine-readable::

    log.warning("activity attempt failed: %r", exc, extra=logs.fields(execution=eid, step=key, attempt=n))

The fields (``FIELDS``): ``execution`` (the canonical execution id), ``actor``
(``tenant/type/id``), ``workflow``, ``step``, ``attempt``, ``bucket`` and ``command_id``.
``fields`` derives ``actor``, ``workflow`` and ``bucket`` from an execution id, so a call names
the most specific identity it has and gets the rest.

Two formatters print them, one per audience, chosen by ``configure`` (``akter relay
--log-format``, ``AKTER_LOG_FORMAT``):

``TextFormatter`` (the default), for people::

    2026-12-01 11:40:02,113 WARNING akter.workflow activity attempt failed: ValueError('no stock')
      execution=acme/Shop/s1/Ship/o-1 step=reserve#1 attempt=2 bucket=17

  (one line; folded here). An execution id — in a field or inside a message — is shown by its
  readable parts ``tenant/type/id/workflow/key`` instead of its base64 form; the ``actor`` and
  ``workflow`` it implies are not repeated.

``JsonFormatter``, for machines: one JSON object per line with ``time`` (ISO 8601, UTC),
``level``, ``logger``, ``message``, every field present (the execution by its canonical id, as
``akter inspect execution`` takes it) and ``exception`` when there is one.

Records of other libraries, and akter's records that carry no fields, print the same way with
fewer keys; any other ``extra=`` key a caller adds is printed as a field too.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from datetime import UTC, datetime
from typing import Any, Final

from akter.errors import ConfigurationError, InvalidExecutionId
from akter.ids import ActorRef, ExecutionId

#: the fields akter records carry where they are known, in the order they are printed
FIELDS: Final = ("execution", "actor", "workflow", "step", "attempt", "bucket", "command_id")
FORMATS: Final = ("text", "json")

# every attribute a bare LogRecord has: anything else on a record came in through ``extra=``
_STANDARD: Final = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}
_EXECUTION_ID = re.compile(r"\bx1\.[A-Za-z0-9_-]+")


def fields(
    *,
    execution: ExecutionId | str | None = None,
    actor: ActorRef | None = None,
    step: object = None,
    attempt: int | None = None,
    bucket: int | None = None,
    command_id: object = None,
) -> dict[str, Any]:
    """The ``extra=`` of a log call: the given identities as fields, plus the actor, workflow and
    bucket an execution id implies. ``None`` leaves a field out."""
    out: dict[str, Any] = {}
    eid = _parse(execution) if isinstance(execution, str) else execution
    if eid is not None:
        out["execution"] = str(eid)
        out["workflow"] = eid.workflow
        actor = actor or eid.owner
    elif execution is not None:
        out["execution"] = str(execution)  # not parseable: kept as given, never dropped
    if actor is not None:
        out["actor"] = str(actor)
        out["bucket"] = actor.bucket if bucket is None else bucket
    elif bucket is not None:
        out["bucket"] = bucket
    if step is not None:
        out["step"] = str(step)
    if attempt is not None:
        out["attempt"] = attempt
    if command_id is not None:
        out["command_id"] = str(command_id)
    return out


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a record carries: akter's in ``FIELDS`` order, then any other ``extra=`` key."""
    extra = {k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")}
    known: dict[str, Any] = {k: extra.pop(k) for k in FIELDS if k in extra}
    return {**known, **extra}


def readable_execution(text: str) -> str:
    """``tenant/type/id/workflow/key`` for a canonical execution id; anything else as it is."""
    eid = _parse(text)
    if eid is None:
        return text
    owner = eid.owner
    return f"{owner.tenant}/{owner.actor_type}/{owner.actor_id}/{eid.workflow}/{eid.key}"


class TextFormatter(logging.Formatter):
    """``time level logger message key=value ...``; execution ids by their readable parts."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = _EXECUTION_ID.sub(lambda m: readable_execution(m.group()), record.message)
        line = super().formatMessage(record)
        pairs = []
        found = record_fields(record)
        if "execution" in found:
            found.pop("actor", None)  # both are in the execution's readable form
            found.pop("workflow", None)
        for key, value in found.items():
            shown = readable_execution(value) if key == "execution" and isinstance(value, str) else value
            pairs.append(f"{key}={_quoted(shown)}")
        return " ".join([line, *pairs])


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the fields, the exception."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record_fields(record).items():
            out.setdefault(key, value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is when a record is emitted, so a handler installed
    before stderr was replaced (a test runner, a daemon) never writes to a closed stream."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:  # logging's own rule: a record that cannot be written never raises
            self.handleError(record)


def formatter(name: str) -> logging.Formatter:
    """The formatter of a format name (``text`` or ``json``)."""
    if name == "json":
        return JsonFormatter()
    if name == "text":
        return TextFormatter()
    raise ConfigurationError(f"log format {name!r} is not one of {', '.join(FORMATS)}")


def configure(level: str | None = None, fmt: str | None = None) -> None:
    """Send log records to stderr in ``fmt`` (else ``AKTER_LOG_FORMAT``, else text) at ``level``.

    Like ``logging.basicConfig``, it leaves a root logger that already has someone else's
    handlers alone (a host application's, a test runner's); called again, it replaces the
    handler it installed, so ``akter relay --log-format json`` can refine what the group set."""
    chosen = formatter((fmt or os.environ.get("AKTER_LOG_FORMAT") or "text").lower())
    root = logging.getLogger()
    ours = [h for h in root.handlers if isinstance(h, _StderrHandler)]
    if len(ours) != len(root.handlers):
        return
    for handler in ours:
        root.removeHandler(handler)
    handler = _StderrHandler()
    handler.setFormatter(chosen)
    root.addHandler(handler)
    if level is not None:
        root.setLevel(level.upper())


def _parse(text: str) -> ExecutionId | None:
    try:
        return ExecutionId.parse(text)
    except InvalidExecutionId:
        return None


def _quoted(value: object) -> str:
    text = str(value)
    if text and not any(c.isspace() or c in '"=\\' for c in text):
        return text
    return json.dumps(text, ensure_ascii=False)
