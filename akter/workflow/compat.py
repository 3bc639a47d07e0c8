"""Can this runner replay an execution faithfully? (invariant 7, checked before every pass)

``replay_problems`` compares an open execution — its recorded steps, its start manifest, its
version markers — with this process's declarations and returns every reason it cannot be
replayed here. An empty list means go ahead. A runner that gets reasons leaves the execution
suspended for a compatible runner (``passes.Pass._leave_blocked``); it never fails it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from akter.workflow import manifest

if TYPE_CHECKING:
    from akter.app import App
    from akter.workflow.driver import StepRow


def replay_problems(app: App, actor_type: str, head: dict[str, Any], history: dict[str, list[StepRow]]) -> list[str]:
    actor = app.actors.get(actor_type)
    if actor is None:
        return [f"actor type {actor_type!r} is not declared here"]
    workflow = actor.extensions.get("workflows", {}).get(head["workflow"])
    if workflow is None:
        return [f"workflow {actor_type}.{head['workflow']} is not declared here"]
    problems: list[str] = []
    current, digest = manifest.of(workflow)
    for name, rows in history.items():
        step = workflow.steps.get(name)
        if step is None:
            problems.append(f"recorded step {name!r} is not declared")
        elif rows and rows[0].kind != step.kind:
            problems.append(f"recorded step {name!r} is a {rows[0].kind}, declared as a {step.kind}")
    versions = head["versions"] if isinstance(head["versions"], dict) else json.loads(head["versions"])
    for marker, value in versions.items():
        rng = workflow.versions.get(marker)
        if rng is None:
            problems.append(f"recorded version marker {marker!r} is no longer declared")
        elif not rng.min <= value <= rng.current:
            problems.append(f"version marker {marker!r}={value} is outside {rng.min}..{rng.current}")
    del current, digest
    return problems
