"""Can this code replay an execution faithfully? (invariant 7)

``judge`` is the one decision, without I/O: given the code's manifest of a workflow, the
execution's start manifest (the one whose hash it carries), the steps it has recorded (name →
kind) and its recorded version markers, it returns every ``Problem`` that makes a faithful replay
impossible. Two callers use it:

* a runner, before every pass (``adopt.replay_problems``, called by ``passes.Pass._run``): problems
  make the pass leave the execution suspended for a compatible runner — its timer re-armed a
  fixed interval ahead, one warning logged with the reasons (``Pass._leave_blocked``) — never
  fail it. No problems and another start manifest: the execution *moves* onto this code's
  manifest (its ``manifest_hash`` is updated, fenced like every engine write), so later
  checks compare with what it now runs under;
* the deploy check (``check.py``), for every group of alike open executions at once.

What is refused, and what is not (design section 7): a workflow or actor type the code lacks;
a step of the start manifest, or a recorded step, that the code no longer declares (removed or
renamed) or declares with another kind; a recorded step whose result schema changed; a changed
payload schema; a start manifest that cannot be loaded; a recorded version marker outside the
declared ``min..current`` or no longer declared; a marker whose ``min > 0`` that the execution
predates (it would replay as version 0). Free: new steps, new markers with ``min == 0``, and
any change to a step the execution has not reached except removing it or changing its kind.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Any

import attrs

from akter.workflow.api.determinism import is_builtin

#: every reason, in the order reports list them
CODES = (
    "actor_type_missing",
    "workflow_missing",
    "start_manifest_missing",
    "step_missing",
    "step_kind_changed",
    "result_schema_changed",
    "payload_schema_changed",
    "marker_not_declared",
    "marker_outside_range",
    "marker_predates",
)

#: what a user can do about each reason, printed by the deploy check
HINTS: dict[str, str] = {
    "actor_type_missing": "keep the actor type and its workflows declared until these executions finish "
    "(drain them first), then remove it",
    "workflow_missing": "keep the workflow declared until these executions finish (drain them first), "
    "then remove it",
    "start_manifest_missing": "run the code that started these executions against this database once "
    "(`akter workflows check` with it stores its manifests), or drain them first",
    "step_missing": "keep the step declared under its old name (a rename is a removal); stop calling it "
    "in new executions behind a version marker (wf.version), or drain these executions first",
    "step_kind_changed": "keep the old step as it was and declare the new one under a new name, chosen "
    "behind a version marker (wf.version), or drain these executions first",
    "result_schema_changed": "keep the step's old result type; declare a step with a new name for the new "
    "type, chosen behind a version marker (wf.version), or drain these executions first",
    "payload_schema_changed": "keep the workflow's input type as it was; start a new workflow for the new "
    "input, or drain these executions first",
    "marker_not_declared": "keep the version marker declared, with a range that includes the recorded "
    "value, until these executions finish",
    "marker_outside_range": "widen the marker's Versions(current, min) to include the recorded value, "
    "until these executions finish",
    "marker_predates": "lower the marker's min to 0 (so these executions replay as version 0), "
    "or drain them first",
}


@attrs.frozen
class Problem:
    """One reason an execution cannot be replayed: ``code`` (one of ``CODES``), the step or
    marker it concerns, and a one-line ``message`` naming it."""

    code: str
    message: str
    step: str | None = None
    marker: str | None = None

    @property
    def hint(self) -> str:
        return HINTS[self.code]


_ARTICLE = {"activity": "an activity", "clock": "a clock", "wait": "a wait", "race": "a race"}


def _a(kind: str) -> str:
    return _ARTICLE.get(kind, f"a {kind}")


def judge(
    *,
    actor_type: str,
    workflow: str,
    declared_types: Container[str],
    current: Mapping[str, Any] | None,
    start: Mapping[str, Any] | None,
    start_hash: str,
    recorded: Mapping[str, str],
    versions: Mapping[str, int],
) -> list[Problem]:
    """Every problem replaying an execution with this code would have.

    ``current``: this code's manifest of the workflow (None: not declared). ``start``: the
    execution's start manifest (None: not stored). ``recorded``: the steps it recorded, name →
    kind. ``versions``: its recorded markers."""
    if actor_type not in declared_types:
        return [Problem("actor_type_missing", f"actor type {actor_type} is not declared")]
    if current is None:
        return [Problem("workflow_missing", f"workflow {actor_type}.{workflow} is not declared")]
    problems: list[Problem] = []
    if start is None:
        problems.append(Problem("start_manifest_missing", f"start manifest {start_hash[:12]} is not stored"))
    problems += _step_problems(current["steps"], start, recorded)
    if start is not None and start["payload"] != current["payload"]:
        problems.append(Problem("payload_schema_changed", "the payload (input) schema changed"))
    problems += _marker_problems(current["versions"], versions)
    return problems


def _step_problems(
    declared: Mapping[str, Any], start: Mapping[str, Any] | None, recorded: Mapping[str, str]
) -> list[Problem]:
    then: dict[str, tuple[str, Any]] = {}
    if start is not None:
        then = {name: (entry["kind"], entry["result"]) for name, entry in start["steps"].items()}
    for name, kind in recorded.items():
        if is_builtin(name):
            continue  # akter's own steps (``@now``): declared by akter, never by the code
        # what was really recorded wins over what the start manifest declared
        then[name] = (kind, then.get(name, (kind, None))[1])
    problems: list[Problem] = []
    for name in sorted(then):
        kind, result = then[name]
        now = declared.get(name)
        if now is None:
            problems.append(
                Problem("step_missing", f"step {name!r} ({_a(kind)}) is no longer declared", step=name)
            )
        elif now["kind"] != kind:
            message = f"step {name!r} was {_a(kind)} and is now declared as {_a(now['kind'])}"
            problems.append(Problem("step_kind_changed", message, step=name))
        elif name in recorded and result is not None and result != now["result"]:
            message = f"the result schema of recorded step {name!r} changed"
            problems.append(Problem("result_schema_changed", message, step=name))
    return problems


def _marker_problems(declared: Mapping[str, Mapping[str, int]], versions: Mapping[str, int]) -> list[Problem]:
    problems: list[Problem] = []
    for marker in sorted(versions):
        value, rng = versions[marker], declared.get(marker)
        if rng is None:
            message = f"version marker {marker!r} (recorded {value}) is no longer declared"
            problems.append(Problem("marker_not_declared", message, marker=marker))
        elif not rng["min"] <= value <= rng["current"]:
            message = f"version marker {marker!r} recorded {value}, outside {rng['min']}..{rng['current']}"
            problems.append(Problem("marker_outside_range", message, marker=marker))
    for marker in sorted(declared):
        if marker not in versions and declared[marker]["min"] > 0:
            message = (
                f"version marker {marker!r} has min {declared[marker]['min']} but was not recorded at start "
                "(it would replay as 0)"
            )
            problems.append(Problem("marker_predates", message, marker=marker))
    return problems


# ---- at replay time ---------------------------------------------------------------------------
