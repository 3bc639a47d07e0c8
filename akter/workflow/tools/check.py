"""The deploy check: would this code strand any open execution? (``akter workflows check APP``)

It compares an App's declarations with every open (not finished) execution in the database,
grouping in SQL, in one read-only snapshot:

1. ``BY_MANIFEST``: open executions counted per (actor type, workflow, manifest hash), from the
   index on exactly those columns. An execution whose hash is this code's manifest hash for its
   workflow needs nothing more: it started under (or was moved onto) exactly these
   declarations. When every execution is such, the check ends here — which is what makes
   ``akter relay``'s start-up check cheap when the code did not change;
2. for the other hashes, ``START_MANIFESTS``: those manifests, by hash; ``GROUPS``: executions
   counted per (manifest hash, recorded version markers), with the oldest start; and, only for
   the steps whose result schema changed (or every step of a manifest that is not stored),
   ``STEPS``: executions counted per (manifest hash, recorded step, kind), with the oldest
   start. A few hundred rows at most, however many executions;
3. only when recorded steps are refused and their counts alone cannot tell how many executions
   that is (several refused steps of one manifest, or a manifest also refused as a whole):
   ``REFUSED_BY_STEPS`` counts the executions that recorded one, outside the groups already
   refused as a whole, so that the total of refused executions is exact (one execution can have
   several reasons).

The App's actor types are judged too, in the same snapshot (``akter.actor.compat.check``): a
state, event or payload change that would misread stored rows is refused with the number of
rows, in the same report (``Report.actor_refusals``).

Each group is judged by the same ``compat.judge`` a runner applies before every pass, once with
no recorded step (what holds for every execution of the group: its start manifest, payload and
markers) and once per recorded (step, kind) (what recording that step adds). The problems are
added up per (actor type, workflow, reason) into a ``Report`` — compatible or not, counts,
oldest start times and what to do — printed as text (``Report.text``) or data (``Report.data``,
``--json``). A compatible check stores this code's manifests as accepted.

``check`` is a function of the actor types and a connection, returning the ``Report`` value; it
prints nothing and knows no command line. ``akter workflows check APP`` (``akter.cli.workflows``)
prints it and exits on it; ``akter relay APP`` (``akter.cli.relay``) runs it on the App's pool
before it starts and refuses to start, with the same report, when the check refuses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, LiteralString

import attrs
import psycopg
from psycopg.types.json import Jsonb

from akter.actor import compat as actor_compat
from akter.actor import manifest as actor_manifest
from akter.workflow.core import compat, manifest
from akter.workflow.engine import manifest_store

if TYPE_CHECKING:
    from akter.actor.declare import Actor
    from akter.workflow.api.declare import Workflow

BY_MANIFEST: LiteralString = """
SELECT actor_type, workflow, manifest_hash, count(*) AS executions
  FROM actor_workflow_executions
 WHERE status <> 'finished'
 GROUP BY actor_type, workflow, manifest_hash"""

# The joins of executions and steps name only ``execution_id``, which determines the routing key:
# joining on both makes the planner multiply their selectivities, expect a handful of rows and
# sort hundreds of thousands of them instead of hashing. A manifest hash names one (actor type,
# workflow) — the manifest holds both — so filtering on hashes alone is exact.

GROUPS: LiteralString = """
SELECT actor_type, workflow, manifest_hash, versions, count(*) AS executions, min(started_at) AS oldest
  FROM actor_workflow_executions
 WHERE status <> 'finished' AND manifest_hash = ANY(%(hashes)s::text[])
 GROUP BY actor_type, workflow, manifest_hash, versions"""

# Executions that recorded given steps: every step of the manifests in %(every_step_of)s, and
# the (manifest, step) pairs in %(step_hashes)s / %(steps)s — the ``= ANY`` filters repeat the
# pairs' columns so that both tables are narrowed before they are joined. Every recorded step has
# an attempt 1 (clocks, waits and races only that; an activity's later attempts follow it), so
# counting attempt 1 counts executions.
STEPS: LiteralString = """
SELECT e.manifest_hash, s.step, s.kind, count(*) AS executions, min(e.started_at) AS oldest
  FROM actor_workflow_executions e
  JOIN actor_workflow_step s ON s.execution_id = e.execution_id AND s.attempt = 1
 WHERE e.status <> 'finished'
   AND e.manifest_hash = ANY(%(every_step_of)s::text[])
 GROUP BY e.manifest_hash, s.step, s.kind
UNION ALL
SELECT e.manifest_hash, s.step, s.kind, count(*), min(e.started_at)
  FROM actor_workflow_executions e
  JOIN actor_workflow_step s ON s.execution_id = e.execution_id AND s.attempt = 1
  JOIN unnest(%(step_hashes)s::text[], %(steps)s::text[]) AS c(manifest_hash, step)
    ON c.manifest_hash = e.manifest_hash AND c.step = s.step
 WHERE e.status <> 'finished'
   AND e.manifest_hash = ANY(%(step_hashes)s::text[]) AND s.step = ANY(%(steps)s::text[])
 GROUP BY e.manifest_hash, s.step, s.kind"""

START_MANIFESTS: LiteralString = """
SELECT manifest_hash, manifest FROM actor_workflow_manifests
 WHERE manifest_hash = ANY(%(hashes)s::text[])"""

REFUSED_BY_STEPS: LiteralString = """
SELECT count(DISTINCT e.execution_id)
  FROM actor_workflow_executions e
  JOIN actor_workflow_step s ON s.execution_id = e.execution_id AND s.attempt = 1
  JOIN unnest(%(bad_hashes)s::text[], %(bad_steps)s::text[]) AS b(manifest_hash, step)
    ON b.manifest_hash = e.manifest_hash AND b.step = s.step
 WHERE e.status <> 'finished'
   AND e.manifest_hash = ANY(%(bad_hashes)s::text[]) AND s.step = ANY(%(bad_steps)s::text[])
   AND (e.manifest_hash, e.versions) NOT IN (
       SELECT * FROM unnest(%(refused_hashes)s::text[], %(refused_versions)s::jsonb[]))"""


@attrs.frozen
class Refusal:
    """Open executions of one workflow refused for one reason."""

    actor_type: str
    workflow: str
    code: str
    message: str
    executions: int
    oldest_started_at: datetime
    step: str | None = None
    marker: str | None = None

    @property
    def hint(self) -> str:
        return compat.HINTS[self.code]


@attrs.frozen
class Report:
    """What the check found. ``open_executions``: all of them; ``checked``: those not on this
    code's manifests, judged against their start manifests; ``refused_executions``: those with
    at least one refusal (an execution can have several)."""

    open_executions: int
    checked: int
    refused_executions: int
    refusals: tuple[Refusal, ...]
    #: the ways the App's actor types would misread stored data (``akter.actor.compat``)
    actor_refusals: tuple[actor_compat.Refusal, ...] = ()
    #: the App's actor types whose stored states are read through an upgrade or with defaults
    actor_changes: tuple[actor_compat.Accepted, ...] = ()

    @property
    def compatible(self) -> bool:
        return not self.refusals and not self.actor_refusals

    def data(self) -> dict[str, Any]:
        """The report as JSON-able data (``--json``)."""
        return {
            "compatible": self.compatible,
            "open_executions": self.open_executions,
            "checked_against_start_manifests": self.checked,
            "refused_executions": self.refused_executions,
            "refusals": [
                {
                    "actor_type": r.actor_type,
                    "workflow": r.workflow,
                    "reason": r.code,
                    "step": r.step,
                    "marker": r.marker,
                    "message": r.message,
                    "executions": r.executions,
                    "oldest_started_at": _iso(r.oldest_started_at),
                    "what_to_do": r.hint,
                }
                for r in self.refusals
            ],
            "actor_refusals": [r.data() for r in self.actor_refusals],
            "actor_changes": [c.data() for c in self.actor_changes],
        }

    def text(self) -> str:
        """The report for a person: refusals grouped by actor type, workflow and reason."""
        if self.compatible:
            on_current = self.open_executions - self.checked
            return "\n".join(
                [
                    f"compatible: {_n(self.open_executions, 'open execution')} ({on_current} on this code's "
                    f"manifests, {self.checked} checked against their start manifests)",
                    *(c.text() for c in self.actor_changes),
                ]
            )
        if not self.refusals:
            return actor_compat.report_text(self.actor_refusals)
        lines = [
            f"refused: {self.refused_executions} of {_n(self.open_executions, 'open execution')} "
            "cannot be replayed by this code"
        ]
        actor_type = workflow = None
        for r in self.refusals:
            if r.actor_type != actor_type:
                actor_type, workflow = r.actor_type, None
                lines += ["", f"actor type {r.actor_type}"]
            if r.workflow != workflow:
                workflow = r.workflow
                lines.append(f"  workflow {r.workflow}")
            lines += [
                f"    - {r.message}: {_n(r.executions, 'open execution')}, "
                f"oldest started {_when(r.oldest_started_at)}",
                f"      what to do: {r.hint}",
            ]
        if self.actor_refusals:
            lines += ["", actor_compat.report_text(self.actor_refusals)]
        return "\n".join(lines)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _when(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _declared(actors: Iterable[Actor[Any]]) -> dict[tuple[str, str], Workflow[Any, Any]]:
    return {(w.actor.name, w.name): w for w in manifest.all_workflows(actors)}


async def check(
    conn: psycopg.AsyncConnection[Any], actors: Iterable[Actor[Any]], *, accept: bool = True
) -> Report:
    """Judge every open execution against the declarations of ``actors`` (an App's actor
    types; see the module docstring), on ``conn``, which the check leaves open and idle. With
    ``accept``, a compatible check stores their manifests."""
    by_name = {a.name: a for a in actors}
    declared = _declared(by_name.values())
    current = {key: manifest.of(w) for key, w in declared.items()}
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        by_manifest = await (await conn.execute(BY_MANIFEST)).fetchall()
        hashes = [h for t, w, h, _ in by_manifest if (t, w) not in current or current[(t, w)][1] != h]
        verdict = _Verdict(by_name, current)
        if hashes:
            params = {"hashes": hashes}
            starts = dict(await (await conn.execute(START_MANIFESTS, params)).fetchall())
            verdict.groups(await (await conn.execute(GROUPS, params)).fetchall(), starts)
            wanted = verdict.steps_worth_counting(starts)
            if wanted["every_step_of"] or wanted["steps"]:
                verdict.steps(await (await conn.execute(STEPS, wanted)).fetchall(), starts)
            if verdict.bad_steps:
                counted = verdict.refused_by_steps()
                if counted is None:
                    params = verdict.refused_by_steps_params()
                    row = await (await conn.execute(REFUSED_BY_STEPS, params)).fetchone()
                    counted = int(row[0]) if row else 0
                verdict.refused += counted
        judged = await actor_compat.check(conn, by_name.values())
    report = verdict.report(open_executions=sum(int(g[3]) for g in by_manifest))
    report = attrs.evolve(report, actor_refusals=judged.refusals, actor_changes=judged.changes)
    if report.compatible and accept:
        async with conn.transaction():
            await conn.execute(manifest_store.ACCEPT, manifest_store.accept_params(declared.values()))
            await actor_manifest.accept(conn, by_name.values())
    return report


class _Verdict:
    """The problems of the groups and recorded steps one check reads, added up."""

    def __init__(
        self,
        actors: Mapping[str, Actor[Any]],
        current: Mapping[tuple[str, str], tuple[manifest.Manifest, str]],
    ) -> None:
        self.actors = actors
        self.current = current
        self.tally: dict[tuple[str, str, compat.Problem], list[Any]] = {}
        self.owner: dict[str, tuple[str, str]] = {}  # manifest hash -> (actor type, workflow)
        self.checked = 0
        self.refused = 0
        self.refused_groups: list[tuple[str, Any]] = []
        #: (manifest hash, step) recorded by refused executions -> how many recorded it
        self.bad_steps: dict[tuple[str, str], int] = {}

    def _judge(
        self, actor_type: str, workflow: str, start_hash: str, starts: Mapping[str, Any], **seen: Any
    ) -> list[compat.Problem]:
        mine = self.current.get((actor_type, workflow))
        return compat.judge(
            actor_type=actor_type,
            workflow=workflow,
            declared_types=self.actors,
            current=None if mine is None else mine[0],
            start=starts.get(start_hash),
            start_hash=start_hash,
            **seen,
        )

    def _add(self, actor_type: str, workflow: str, problem: compat.Problem, n: int, oldest: datetime) -> None:
        seen = self.tally.setdefault((actor_type, workflow, problem), [0, oldest])
        seen[0] += n
        seen[1] = min(seen[1], oldest)

    def groups(self, rows: Iterable[tuple[Any, ...]], starts: Mapping[str, Any]) -> None:
        """What holds for every execution of a (manifest, markers) group."""
        for actor_type, workflow, start_hash, versions, count, oldest in rows:
            self.owner[start_hash] = (actor_type, workflow)
            n = int(count)
            self.checked += n
            problems = self._judge(actor_type, workflow, start_hash, starts, recorded={}, versions=versions)
            for problem in problems:
                self._add(actor_type, workflow, problem, n, oldest)
            if problems:
                self.refused += n
                self.refused_groups.append((start_hash, versions))

    def steps_worth_counting(self, starts: Mapping[str, Any]) -> dict[str, list[str]]:
        """Which recorded steps can add a problem, as ``STEPS`` parameters.

        A runner records only steps of the manifest an execution is on (it moves the execution
        onto its own manifest before it runs it), so a recorded step is a step of its start
        manifest, of the same kind. Whether that step is missing or of another kind now is a
        problem of every execution of the manifest, found by ``groups``; what recording it can
        add is only a changed result schema. So only steps whose result schema changed are
        counted — none at all when a deploy only adds steps — and every step of a manifest that
        is not stored (nothing to compare with)."""
        every_step_of: list[str] = []
        pairs: list[tuple[str, str]] = []
        for start_hash, (actor_type, workflow) in self.owner.items():
            mine = self.current.get((actor_type, workflow))
            start = starts.get(start_hash)
            if mine is None:
                continue  # refused as a whole already
            if start is None:
                every_step_of.append(start_hash)
                continue
            declared = mine[0]["steps"]
            pairs += [
                (start_hash, name)
                for name, entry in start["steps"].items()
                if name in declared
                and declared[name]["kind"] == entry["kind"]
                and declared[name]["result"] != entry["result"]
            ]
        return {
            "every_step_of": every_step_of,
            "step_hashes": [h for h, _ in pairs],
            "steps": [step for _, step in pairs],
        }

    def steps(self, rows: Iterable[tuple[Any, ...]], starts: Mapping[str, Any]) -> None:
        """What recording a step adds: its own problems, for the executions that recorded it."""
        for start_hash, step, kind, count, oldest in rows:
            actor_type, workflow = self.owner[start_hash]
            base = self._judge(actor_type, workflow, start_hash, starts, recorded={}, versions={})
            with_step = self._judge(
                actor_type, workflow, start_hash, starts, recorded={step: kind}, versions={}
            )
            added = [p for p in with_step if p not in base]
            for problem in added:
                self._add(actor_type, workflow, problem, int(count), oldest)
            if added:
                self.bad_steps[(start_hash, step)] = self.bad_steps.get((start_hash, step), 0) + int(count)

    def refused_by_steps(self) -> int | None:
        """The executions refused only for a step they recorded, when the counts tell: each
        manifest has one refused step and no group refused as a whole. Else None: counting them
        takes ``REFUSED_BY_STEPS`` (an execution may have recorded several)."""
        per_hash = Counter(h for h, _ in self.bad_steps)
        whole = {h for h, _ in self.refused_groups}
        if any(n > 1 for n in per_hash.values()) or whole & per_hash.keys():
            return None
        return sum(self.bad_steps.values())

    def refused_by_steps_params(self) -> dict[str, Any]:
        return {
            "bad_hashes": [h for h, _ in self.bad_steps],
            "bad_steps": [step for _, step in self.bad_steps],
            "refused_hashes": [h for h, _ in self.refused_groups],
            "refused_versions": [Jsonb(v) for _, v in self.refused_groups],
        }

    def report(self, *, open_executions: int) -> Report:
        order = {code: i for i, code in enumerate(compat.CODES)}
        refusals = sorted(
            (
                Refusal(t, w, p.code, p.message, n, oldest, step=p.step, marker=p.marker)
                for (t, w, p), (n, oldest) in self.tally.items()
            ),
            key=lambda r: (r.actor_type, r.workflow, order[r.code], r.step or "", r.marker or "", r.message),
        )
        return Report(open_executions, self.checked, self.refused, tuple(refusals))
