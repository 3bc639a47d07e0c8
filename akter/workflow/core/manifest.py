"""Manifests: the shape of a workflow as deployed, derived from its declarations alone.

A manifest describes one workflow member the way the replay of its executions depends on it:
the payload schema, each step's name, kind and result schema, the version markers with their
``min..current`` ranges, and (for reference) the output and declared errors. It is plain JSON;
its hash (SHA-256 of the canonical JSON, ``codec.canonical_json``) is recorded with every
execution when it starts, and every manifest a process runs with is stored in
``actor_workflow_manifests`` (``manifest_store.accept``), so a later runner can load any
execution's start manifest by hash (``manifest_store.load``). ``compat.py`` compares manifests;
``check.py`` does it for every open execution before a deploy. This module does no I/O.

A manifest (``derive``)::

    {"akter_manifest": 1,
     "actor_type": "Shop", "workflow": "Ship",
     "payload": <fingerprint of the input type>,
     "output":  <fingerprint of the output type>,
     "errors":  {"<error class __name__>": <fingerprint>, ...},
     "steps":   {"<step name>": {"kind": "activity" | "clock" | "wait" | "race" | "child",
                                 "result": <result schema>}, ...},
     "versions": {"<marker>": {"min": int, "current": int}, ...}}

A step's result schema is what decoding its recorded exit depends on: for an activity
``{"ok": <fingerprint of success>, "errors": {"<name>": <fingerprint>}}`` (declared errors are
recorded by class name), and the same for a child step with the child workflow's output and
errors (``children.py``); for a wait ``{"event": "<event type __name__>", "fields": <fingerprint>}``
(events are stored under their type's name); for a clock or a race ``"none"`` (a clock records
nothing, a race the index of its winner). Retry policies and timeouts are not part of it: they
change what happens next, never how a recorded exit reads.

Fingerprints (``akter.fingerprint``) describe how the codec stores and reads each type; their
table, and what they make free and what not, is in that module's docstring.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from akter import codec
from akter.fingerprint import Fingerprint, fingerprint
from akter.workflow.api.declare import ActivityStep, WaitStep, Workflow, workflows_of

if TYPE_CHECKING:
    from akter.actor.declare import Actor

#: bumped only when the manifest's own layout changes (every stored hash would change with it)
MANIFEST_VERSION = 1

Manifest = dict[str, Any]


def _errors(errors: Iterable[type[BaseException]]) -> dict[str, Fingerprint]:
    return {e.__name__: fingerprint(e) for e in errors}


def _step_result(step: Any) -> Fingerprint:
    if isinstance(step, ActivityStep):
        return {"ok": fingerprint(step.success), "errors": _errors(step.errors)}
    if step.kind == "child":  # a child's result reads as its workflow's output and errors
        return {"ok": fingerprint(step.success), "errors": _errors(step.errors)}
    if isinstance(step, WaitStep):
        # an event type is an attrs class (Actor checks): {"event": name, "fields": {...}}
        return {"event": step.event.__name__, **fingerprint(step.event)}
    return "none"


def derive(workflow: Workflow[Any, Any]) -> Manifest:
    """The manifest of ``workflow`` (see this module's docstring for its layout)."""
    return {
        "akter_manifest": MANIFEST_VERSION,
        "actor_type": workflow.actor.name,
        "workflow": workflow.name,
        "payload": fingerprint(workflow.input),
        "output": fingerprint(workflow.output),
        "errors": _errors(workflow.errors),
        "steps": {
            name: {"kind": step.kind, "result": _step_result(step)} for name, step in workflow.steps.items()
        },
        "versions": {k: {"min": v.min, "current": v.current} for k, v in workflow.versions.items()},
    }


def manifest_hash(manifest: Manifest) -> str:
    """SHA-256 (hex) of the manifest's canonical JSON: equal manifests, equal hashes."""
    return hashlib.sha256(codec.canonical_json(manifest)).hexdigest()


def of(workflow: Workflow[Any, Any]) -> tuple[Manifest, str]:
    """The workflow's manifest and its hash, derived once (steps are only declared while its
    module loads; the cache is rebuilt if one was added since)."""
    cached: tuple[int, Manifest, str] | None = getattr(workflow, "_akter_manifest", None)
    if cached is None or cached[0] != len(workflow.steps):
        m = derive(workflow)
        cached = (len(workflow.steps), m, manifest_hash(m))
        workflow._akter_manifest = cached  # type: ignore[attr-defined]
    return cached[1], cached[2]


def all_workflows(actors: Iterable[Actor[Any]]) -> list[Workflow[Any, Any]]:
    """Every workflow member of ``actors``, in declaration order."""
    return [w for a in actors for w in workflows_of(a).values()]


def step_kinds(manifest: Mapping[str, Any]) -> dict[str, str]:
    return {name: entry["kind"] for name, entry in manifest["steps"].items()}
