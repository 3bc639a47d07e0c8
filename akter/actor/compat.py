"""Would this code misread an actor type's stored data? (the actor half of the deploy check)

The judgement, without I/O: ``state_problems`` says why a state stored in one shape (a stored
fingerprint) would not read as this code's state type — unless the shape is the state type's
own or one it declares an upgrade from (``akter.actor.upgrade``); ``member_problems`` says why
stored events and undelivered command payloads, described by the latest stored manifest, would
not read as this code's event types and payload types. A value reads when every field it holds
is still declared with the same type and every new field has a default
(``akter.fingerprint.changes``); anything else would drop stored values or fail to decode.

``check`` applies it to a database, in the caller's transaction (one snapshot), grouping in SQL
and counting only where something changed:

1. ``LATEST``: each declared actor type's latest stored manifest. An actor type whose manifest
   is that one needs nothing more (this is what an App opening with unchanged code costs: one
   small query); one with no stored manifest has nothing to compare with (a first deploy);
2. when the state type or its upgrades changed: ``STORED_SHAPES``, every stored manifest of
   those types, to look stored shapes up in, and ``STATE_SHAPES``, the stored states counted
   per (actor type, shape) from the index on exactly those columns (every stored state carries
   its shape: the column is NOT NULL). Each shape with states is judged;
3. when an event type or a command payload changed: ``EVENTS`` (and ``OPEN_WAITS``, the
   pending waits of open executions on that event type) or ``INTENTS`` count the stored rows
   of exactly those tags and commands. A change no stored row uses is allowed.

Two callers: ``akter.workflow.tools.check.check`` (``akter workflows check``, ``akter relay``'s
start-up check) adds the refusals to its report; ``refuse_misreads``, called when an App opens
its runtime, raises ``IncompatibleStoredData`` with the same report before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, LiteralString

import attrs

from akter.actor import manifest
from akter.actor.upgrade import readable_shapes, state_shape
from akter.errors import IncompatibleStoredData
from akter.fingerprint import Change, Fingerprint, changes, describe, shape, with_defaults

if TYPE_CHECKING:
    import psycopg

    from akter.actor.declare import Actor

#: every reason, in the order reports list them
CODES = (
    "state_shape_unknown",
    "state_changed",
    "event_removed",
    "event_changed",
    "command_removed",
    "payload_changed",
)

#: what a user can do about each reason
HINTS: dict[str, str] = {
    "state_shape_unknown": "run the code that wrote these states against this database once "
    "(`akter workflows check` with it stores its manifest), or declare an upgrade from their shape",
    "state_changed": "declare an upgrade from the stored shape (akter.Actor(..., "
    "upgrade=akter.Upgrade(OldState, lambda old: NewState(...))), the old type kept under another name), "
    "or keep the state type as it was (a new field needs a default)",
    "event_removed": "keep the event type declared: stored events are history, and waits read them",
    "event_changed": "keep the event type as it was (a new field needs a default); declare a new event "
    "type, under another class name, for the new shape",
    "command_removed": "keep the command declared until these intents are delivered (a running relay "
    "delivers them), then remove it",
    "payload_changed": "keep the command's payload type as it was (a new field needs a default) until "
    "these intents are delivered, or declare a new command for the new payload",
}

_SUBJECTS = ("state", "event", "command")
_WHAT = {"state": "the state type", "event": "the event type", "command": "the payload type"}


@attrs.frozen
class Problem:
    """One reason stored rows of an actor type would be misread: ``code`` (one of ``CODES``),
    its ``subject`` (``"state"``, ``"event"``, ``"command"``), the event type or command it is
    about (``name``; None for the state), the ``field`` (dotted path) if it is about one."""

    code: str
    subject: str
    message: str
    name: str | None = None
    field: str | None = None


def _messages(found: Iterable[Change], subject: str) -> list[tuple[str | None, str]]:
    whose = " of its payload" if subject == "command" else ""
    out: list[tuple[str | None, str]] = []
    for c in found:
        what = f"field {c.path!r}{whose}" if c.path else _WHAT[subject]
        if c.kind == "removed":
            renamed = f" (renamed to {c.renamed_to!r}?)" if c.renamed_to else ""
            message = f"{what} is no longer declared{renamed}, so its stored values would be dropped"
        elif c.kind == "added_required":
            message = f"{what} was added without a default, so the stored values lack it"
        else:
            message = f"{what} changed type from {describe(c.stored)} to {describe(c.declared)}"
        out.append((c.path or None, message))
    return out


def state_problems(actor: Actor[Any], stored: Fingerprint) -> list[Problem]:
    """Why a state stored as ``stored`` would not read as ``actor``'s state (none: it reads —
    it is the state's own shape, an upgrade's from-shape, or reads with new fields' defaults)."""
    if shape(stored) in readable_shapes(actor):
        return []
    found = changes(stored, with_defaults(actor.state_type))
    return [
        Problem("state_changed", "state", message, field=field)
        for field, message in _messages(found, "state")
    ]


def member_problems(actor: Actor[Any], latest: Mapping[str, Any]) -> list[Problem]:
    """Why stored events and undelivered payloads, as the ``latest`` stored manifest describes
    them, would not read as ``actor`` declares them now."""
    problems: list[Problem] = []
    for tag, stored in sorted(latest["events"].items()):
        event = actor.event_types.get(tag)
        if event is None:
            problems.append(
                Problem("event_removed", "event", "the event type is no longer declared", name=tag)
            )
            continue
        found = changes(stored, with_defaults(event))
        problems += [
            Problem("event_changed", "event", m, name=tag, field=f) for f, m in _messages(found, "event")
        ]
    for name, entry in sorted(latest["commands"].items()):
        command = actor.commands.get(name)
        if command is None:
            problems.append(
                Problem("command_removed", "command", "the command is no longer declared", name=name)
            )
            continue
        found = changes(entry["payload"], with_defaults(command.input))
        problems += [
            Problem("payload_changed", "command", m, name=name, field=f)
            for f, m in _messages(found, "command")
        ]
    return problems


# ---- against a database -----------------------------------------------------------------------

LATEST: LiteralString = """
SELECT DISTINCT ON (actor_type) actor_type, manifest_hash, manifest
  FROM actor_manifests
 WHERE actor_type = ANY(%(types)s::text[])
 ORDER BY actor_type, accepted_at DESC, manifest_hash"""

STORED_SHAPES: LiteralString = """
SELECT actor_type, manifest FROM actor_manifests
 WHERE actor_type = ANY(%(types)s::text[])
 ORDER BY accepted_at, manifest_hash"""

STATE_SHAPES: LiteralString = """
SELECT actor_type, shape, count(*) FROM actor_state
 WHERE actor_type = ANY(%(types)s::text[])
 GROUP BY actor_type, shape"""

# (actor type, tag) pairs: the ``= ANY`` filters narrow the scan, the join makes it exact.
EVENTS: LiteralString = """
SELECT v.actor_type, v.tag, count(*) FROM actor_events v
  JOIN unnest(%(types)s::text[], %(names)s::text[]) AS c(actor_type, tag)
    ON c.actor_type = v.actor_type AND c.tag = v.tag
 WHERE v.actor_type = ANY(%(types)s::text[]) AND v.tag = ANY(%(names)s::text[])
 GROUP BY v.actor_type, v.tag"""

OPEN_WAITS: LiteralString = """
SELECT e.actor_type, s.wait_tag, count(*) FROM actor_workflow_step s
  JOIN actor_workflow_executions e ON e.execution_id = s.execution_id
  JOIN unnest(%(types)s::text[], %(names)s::text[]) AS c(actor_type, tag)
    ON c.actor_type = e.actor_type AND c.tag = s.wait_tag
 WHERE s.kind = 'wait' AND s.exit IS NULL AND e.status <> 'finished'
   AND s.wait_tag = ANY(%(names)s::text[])
 GROUP BY e.actor_type, s.wait_tag"""

INTENTS: LiteralString = """
SELECT o.target_type, o.command, count(*) FROM actor_outbox o
  JOIN unnest(%(types)s::text[], %(names)s::text[]) AS c(actor_type, command)
    ON c.actor_type = o.target_type AND c.command = o.command
 WHERE o.target_type = ANY(%(types)s::text[]) AND o.command = ANY(%(names)s::text[])
 GROUP BY o.target_type, o.command"""


@attrs.frozen
class Refusal:
    """Stored rows of one actor type misread for one reason: ``rows`` stored states, stored
    events or undelivered intents (by ``subject``), and for an event type the ``open_waits``
    on it."""

    actor_type: str
    subject: str
    name: str | None
    code: str
    message: str
    rows: int
    open_waits: int = 0
    field: str | None = None

    @property
    def hint(self) -> str:
        return HINTS[self.code]

    def counted(self) -> str:
        if self.subject == "state":
            return _n(self.rows, "stored state")
        if self.subject == "command":
            return _n(self.rows, "undelivered intent")
        waits = f", {_n(self.open_waits, 'open wait')}" if self.open_waits else ""
        return _n(self.rows, "stored event") + waits

    def data(self) -> dict[str, Any]:
        return {
            "actor_type": self.actor_type,
            "subject": self.subject,
            "name": self.name,
            "reason": self.code,
            "field": self.field,
            "message": self.message,
            "rows": self.rows,
            "open_waits": self.open_waits,
            "what_to_do": self.hint,
        }


@attrs.frozen
class Accepted:
    """An actor type whose state type changed without a refusal, and whose stored states are
    read otherwise than before: how many through an upgrade (``upgraded_states``), how many with
    new fields at their defaults (``defaulted_states``)."""

    actor_type: str
    upgraded_states: int = 0
    defaulted_states: int = 0

    def text(self) -> str:
        how = []
        if self.upgraded_states:
            how.append(
                f"{_n(self.upgraded_states, 'stored state')} of an older shape will be upgraded when read"
            )
        if self.defaulted_states:
            how.append(
                f"{_n(self.defaulted_states, 'stored state')} will be read with new fields at their defaults"
            )
        return f"actor type {self.actor_type}: {'; '.join(how)}"

    def data(self) -> dict[str, Any]:
        return {
            "actor_type": self.actor_type,
            "upgraded_states": self.upgraded_states,
            "defaulted_states": self.defaulted_states,
        }


@attrs.frozen
class Verdict:
    """What ``check`` found: the refusals, and the actor types whose stored states this code
    reads through an upgrade or with new fields' defaults."""

    refusals: tuple[Refusal, ...] = ()
    changes: tuple[Accepted, ...] = ()


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


async def check(conn: psycopg.AsyncConnection[Any], actors: Iterable[Actor[Any]]) -> Verdict:
    """Every way ``actors`` would misread what the database stores for them, counted, in the
    order reports list them, and the types that changed compatibly (see the module docstring).
    Runs in the caller's transaction."""
    declared = {a.name: a for a in actors}
    if not declared:
        return Verdict()
    latest: dict[str, tuple[str, Mapping[str, Any]]] = {
        t: (h, m) for t, h, m in await (await conn.execute(LATEST, {"types": list(declared)})).fetchall()
    }
    changed = {t: m for t, (h, m) in latest.items() if h != manifest.of(declared[t])[1]}
    if not changed:
        return Verdict()
    tally: dict[tuple[str, Problem], list[int]] = {}
    read = await _judge_states(conn, declared, changed, tally)
    await _judge_members(conn, declared, changed, tally)
    order = {code: i for i, code in enumerate(CODES)}
    refusals = sorted(
        (
            Refusal(t, p.subject, p.name, p.code, p.message, rows, waits, p.field)
            for (t, p), (rows, waits) in tally.items()
            if rows or waits
        ),
        key=lambda r: (r.actor_type, _SUBJECTS.index(r.subject), r.name or "", order[r.code], r.field or ""),
    )
    refused = {r.actor_type for r in refusals}
    changes = tuple(Accepted(t, *read[t]) for t in sorted(read) if t not in refused and any(read[t]))
    return Verdict(tuple(refusals), changes)


async def _judge_states(
    conn: psycopg.AsyncConnection[Any],
    declared: Mapping[str, Actor[Any]],
    changed: Mapping[str, Mapping[str, Any]],
    tally: dict[tuple[str, Problem], list[int]],
) -> dict[str, tuple[int, int]]:
    """Judge the stored states of the types whose state changed; returns, per type, how many
    states read through an upgrade and how many with new fields at their defaults."""

    def state_part(m: Mapping[str, Any]) -> tuple[Any, Any]:
        return m["state"], m["upgrades"]

    read: dict[str, tuple[int, int]] = {}
    types = [t for t, m in changed.items() if state_part(m) != state_part(manifest.of(declared[t])[0])]
    if not types:
        return read
    known: dict[str, dict[str, Fingerprint]] = {}  # actor type -> shape -> fingerprint
    for t, m in await (await conn.execute(STORED_SHAPES, {"types": types})).fetchall():
        for fp in (m["state"], *m["upgrades"]):
            known.setdefault(t, {}).setdefault(shape(fp), fp)
    for t, digest, count in await (await conn.execute(STATE_SHAPES, {"types": types})).fetchall():
        stored = known.get(t, {}).get(digest)
        if stored is None:
            message = f"stored in shape {digest[:12]}, which no stored manifest describes"
            problems = [Problem("state_shape_unknown", "state", message)]
        else:
            problems = state_problems(declared[t], stored)
            upgraded, defaulted = read.get(t, (0, 0))
            if shape(stored) in readable_shapes(declared[t]) and shape(stored) != state_shape(declared[t]):
                upgraded += int(count)
            elif shape(stored) != state_shape(declared[t]) and not problems:
                defaulted += int(count)
            read[t] = (upgraded, defaulted)
        for problem in problems:
            tally.setdefault((t, problem), [0, 0])[0] += int(count)
    return read


async def _judge_members(
    conn: psycopg.AsyncConnection[Any],
    declared: Mapping[str, Actor[Any]],
    changed: Mapping[str, Mapping[str, Any]],
    tally: dict[tuple[str, Problem], list[int]],
) -> None:
    found = [(t, p) for t, m in changed.items() for p in member_problems(declared[t], m)]
    for subject, queries in (("event", (EVENTS, OPEN_WAITS)), ("command", (INTENTS,))):
        wanted = sorted({(t, p.name or "") for t, p in found if p.subject == subject})
        if not wanted:
            continue
        params = {"types": [t for t, _ in wanted], "names": [n for _, n in wanted]}
        counts: list[dict[tuple[str, str], int]] = []
        for query in queries:
            rows = await (await conn.execute(query, params)).fetchall()
            counts.append({(t, n): int(c) for t, n, c in rows})
        for t, p in found:
            if p.subject == subject:
                key = (t, p.name or "")
                tally[(t, p)] = [counts[0].get(key, 0), counts[1].get(key, 0) if len(counts) > 1 else 0]


def report_text(refusals: Sequence[Refusal]) -> str:
    """The refusals for a person, grouped by actor type and what they are about (the state, an
    event type, a command), with counts and what to do."""
    types = sorted({r.actor_type for r in refusals})
    lines = [f"refused: this code would misread the stored data of {_n(len(types), 'actor type')}"]
    group: tuple[str, str, str | None] | None = None
    for r in refusals:
        if group is None or group[0] != r.actor_type:
            lines += ["", f"actor type {r.actor_type}"]
        if group != (r.actor_type, r.subject, r.name):
            heading = {"state": "state", "event": f"event type {r.name}", "command": f"command {r.name}"}
            lines.append(f"  {heading[r.subject]}")
        group = (r.actor_type, r.subject, r.name)
        lines += [f"    - {r.message}: {r.counted()}", f"      what to do: {r.hint}"]
    return "\n".join(lines)


async def refuse_misreads(conn: psycopg.AsyncConnection[Any], actors: Iterable[Actor[Any]]) -> None:
    """``check`` in a snapshot of its own; raises ``IncompatibleStoredData`` with the report
    when ``actors`` would misread stored data. Called when an App starts its engine, before it
    stores its manifests or runs anything."""
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        verdict = await check(conn, actors)
    if verdict.refusals:
        raise IncompatibleStoredData(report_text(verdict.refusals), verdict.refusals)
