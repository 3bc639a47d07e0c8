"""Manifests: the shape of a workflow as deployed, derived from its declarations alone.

A manifest records, for one workflow, the payload schema fingerprint, the output and declared
errors, each step's name, kind and result-schema fingerprint, and the version markers with their
``min..current`` ranges. Its hash (SHA-256 of the canonical JSON) is stored with every execution;
accepted manifests are stored in ``actor_workflow_manifests``.

A fingerprint describes a type by its structure — for an attrs class, its fields' names and
types, recursively; for a generic, its origin and arguments; for anything else, its qualified
name — so a renamed Python variable or a reordered declaration changes nothing, and a changed
field changes the fingerprint.
"""

from __future__ import annotations

import hashlib
import typing
from typing import Any

import attrs

from akter import codec
from akter.workflow.declare import ActivityStep, WaitStep, Workflow

MANIFEST_VERSION = 1


def fingerprint(tp: Any, _seen: frozenset[Any] = frozenset()) -> Any:
    """A JSON-able description of a type's stored structure."""
    if tp is None or tp is type(None):
        return "None"
    if isinstance(tp, type) and attrs.has(tp):
        if tp in _seen:
            return {"recursive": tp.__qualname__}
        seen = _seen | {tp}
        hints = typing.get_type_hints(tp)
        return {
            "attrs": sorted(
                ([f.name, fingerprint(hints.get(f.name, f.type), seen)] for f in attrs.fields(tp)),
                key=lambda pair: str(pair[0]),
            )
        }
    origin = typing.get_origin(tp)
    if origin is not None:
        return {"generic": _name(origin), "args": [fingerprint(a, _seen) for a in typing.get_args(tp)]}
    return _name(tp)


def _name(tp: Any) -> str:
    module = getattr(tp, "__module__", "")
    qual = getattr(tp, "__qualname__", repr(tp))
    return qual if module == "builtins" else f"{module}.{qual}"


def _errors(errors: tuple[type[Exception], ...]) -> list[Any]:
    return sorted(([e.__name__, fingerprint(e)] for e in errors), key=lambda pair: str(pair[0]))


def derive(workflow: Workflow[Any, Any]) -> dict[str, Any]:
    steps: dict[str, Any] = {}
    for name, step in workflow.steps.items():
        entry: dict[str, Any] = {"kind": step.kind}
        if isinstance(step, ActivityStep):
            entry["result"] = fingerprint(step.success)
            entry["errors"] = _errors(step.errors)
        elif isinstance(step, WaitStep):
            entry["result"] = fingerprint(step.event)
        steps[name] = entry
    return {
        "manifest": MANIFEST_VERSION,
        "actor_type": workflow.actor.name,
        "workflow": workflow.name,
        "payload": fingerprint(workflow.input),
        "output": fingerprint(workflow.output),
        "errors": _errors(workflow.errors),
        "steps": steps,
        "versions": {k: [v.min, v.current] for k, v in sorted(workflow.versions.items())},
    }


def manifest_hash(manifest: dict[str, Any]) -> str:
    return hashlib.sha256(codec.canonical_json(manifest)).hexdigest()


def of(workflow: Workflow[Any, Any]) -> tuple[dict[str, Any], str]:
    """The workflow's manifest and its hash, cached until a step is added."""
    cached: tuple[int, dict[str, Any], str] | None = getattr(workflow, "_manifest", None)
    if cached is None or cached[0] != len(workflow.steps):
        m = derive(workflow)
        cached = (len(workflow.steps), m, manifest_hash(m))
        workflow._manifest = cached  # type: ignore[attr-defined]
    return cached[1], cached[2]
