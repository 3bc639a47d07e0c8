"""Manifests: the shape of a workflow as deployed, derived from its declarations alone.

A manifest describes one workflow member the way the replay of its executions depends on it:
the payload schema, each step's name, kind and result schema, the version markers with their
``min..current`` ranges, and (for reference) the output and declared errors. It is plain JSON;
its hash (SHA-256 of the canonical JSON, ``codec.canonical_json``) is recorded with every
execution when it starts, and every manifest a process runs with is stored in
``actor_workflow_manifests`` (``accept``), so a later runner can load any execution's start
manifest by hash (``load``). ``compat.py`` compares manifests; ``check.py`` does it for every
open execution before a deploy.

A manifest (``derive``)::

    {"akter_manifest": 1,
     "actor_type": "Shop", "workflow": "Ship",
     "payload": <fingerprint of the input type>,
     "output":  <fingerprint of the output type>,
     "errors":  {"<error class __name__>": <fingerprint>, ...},
     "steps":   {"<step name>": {"kind": "activity" | "clock" | "wait" | "race",
                                 "result": <result schema>}, ...},
     "versions": {"<marker>": {"min": int, "current": int}, ...}}

A step's result schema is what decoding its recorded exit depends on: for an activity
``{"ok": <fingerprint of success>, "errors": {"<name>": <fingerprint>}}`` (declared errors are
recorded by class name); for a wait ``{"event": "<event type __name__>", "fields": <fingerprint>}``
(events are stored under their type's name); for a clock or a race ``"none"`` (a clock records
nothing, a race the index of its winner). Retry policies and timeouts are not part of it: they
change what happens next, never how a recorded exit reads.

A fingerprint (``fingerprint``) describes how the codec (cattrs' JSON preconf converter)
stores and reads a type, and nothing else:

=====================================  =================================================
type                                   fingerprint
=====================================  =================================================
``None``                               ``"none"``
``typing.Any``, ``object``, a TypeVar  ``"any"``
a builtin (``int``, ``str``, ...)      its name: ``"int"``
an attrs class or a dataclass          ``{"fields": {"<field name>": <fingerprint>, ...}}``
                                       — the fields cattrs reads (``init=False`` ones
                                       are skipped), by name, types resolved
an ``enum.Enum``                       ``{"enum": [<member values>]}``, values sorted
``Literal[a, b]``                      ``{"literal": [a, b]}``, sorted
``X | Y``, ``Optional[X]``             ``{"union": [<fingerprint>, ...]}``, sorted; in a
                                       union of two or more records each of them also
                                       carries ``"tag": "<class __name__>"``, the name
                                       the codec stores it under
``list[X]``, ``dict[K, V]``, ...       ``{"generic": "list", "args": [<fingerprint>, ...]}``
``Annotated[X, ...]``, a ``NewType``   the fingerprint of ``X`` / of its supertype
a class met again inside itself        ``{"recursive": n}``: n levels up
any other class                        ``"<module>.<qualname>"``, e.g. ``"datetime.datetime"``
=====================================  =================================================

So what is free: the class's own name, the Python variable a type, step or body is bound to,
the order of fields, of steps, of errors, of union members, defaults. What is not: a field's
name, its type, adding or removing a field, at any depth — every change that would make a
stored value read differently. Declared errors, wait events and the records of a union of
records are named by their class name, because that is how they are stored.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from akter import codec
from akter.workflow.declare import ActivityStep, WaitStep, Workflow

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

    from akter.actor.declare import Actor

#: bumped only when the manifest's own layout changes (every stored hash would change with it)
MANIFEST_VERSION = 1

Fingerprint = Any
Manifest = dict[str, Any]


def fingerprint(tp: Any) -> Fingerprint:
    """A JSON-able description of how the codec stores a value of type ``tp`` (see the table in
    this module's docstring)."""
    return _fingerprint(tp, ())


def _fingerprint(tp: Any, stack: tuple[Any, ...]) -> Fingerprint:  # noqa: PLR0911 -- one case per kind of type
    if tp is None or tp is type(None):
        return "none"
    if tp is typing.Any or tp is object or isinstance(tp, typing.TypeVar):
        return "any"
    supertype = getattr(tp, "__supertype__", None)  # typing.NewType
    if supertype is not None:
        return _fingerprint(supertype, stack)
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _fingerprint(typing.get_args(tp)[0], stack)
    if origin is typing.Union or origin is types.UnionType:
        members = typing.get_args(tp)
        records = [m for m in members if _is_record(m)]
        return {
            "union": _sorted(
                # a union of two or more records stores each under its class name (codec.TAG)
                {"tag": _record_class(m).__name__, **_fingerprint(m, stack)}
                if len(records) > 1 and m in records
                else _fingerprint(m, stack)
                for m in members
            )
        }
    if origin is typing.Literal:
        return {"literal": _sorted(_value(a) for a in typing.get_args(tp))}
    cls = origin if origin is not None else tp
    if isinstance(cls, type) and (attrs.has(cls) or dataclasses.is_dataclass(cls)):
        if cls in stack:
            return {"recursive": len(stack) - stack.index(cls)}
        return {"fields": _fields(cls, typing.get_args(tp), (*stack, cls))}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": _sorted(_value(member.value) for member in tp)}
    if origin is not None:
        return {"generic": _name(origin), "args": [_arg(a, stack) for a in typing.get_args(tp)]}
    if isinstance(tp, str):
        # An annotation that could not be resolved: its text is all there is to compare.
        return {"unresolved": tp}
    return _name(tp)


def _record_class(tp: Any) -> Any:
    return typing.get_origin(tp) or tp


def _is_record(tp: Any) -> bool:
    cls = _record_class(tp)
    return isinstance(cls, type) and (attrs.has(cls) or dataclasses.is_dataclass(cls))


def _value(value: Any) -> Any:
    """A literal or enum value as JSON: itself when JSON has it, else its repr."""
    if isinstance(value, enum.Enum):
        value = value.value
    return value if value is None or isinstance(value, str | int | float | bool) else repr(value)


def _arg(arg: Any, stack: tuple[Any, ...]) -> Fingerprint:
    return "..." if arg is Ellipsis else _fingerprint(arg, stack)


def _fields(cls: type, args: tuple[Any, ...], stack: tuple[Any, ...]) -> dict[str, Fingerprint]:
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):
        hints = {}  # one unresolvable annotation: resolve the others one by one below
    # A generic attrs class used with arguments (Box[int]): its type variables stand for them.
    params = dict(zip(getattr(cls, "__parameters__", ()), args, strict=False))
    if attrs.has(cls):
        declared = [(f.name, f.type) for f in attrs.fields(cls) if f.init]
    else:
        declared = [(f.name, f.type) for f in dataclasses.fields(cls) if f.init]
    out: dict[str, Fingerprint] = {}
    for name, raw in declared:
        hint = hints[name] if name in hints else _resolve(cls, raw)
        out[name] = _fingerprint(params.get(hint, hint) if isinstance(hint, typing.TypeVar) else hint, stack)
    return out


def _resolve(cls: type, annotation: Any) -> Any:
    if not isinstance(annotation, str):
        return annotation
    module = sys.modules.get(cls.__module__)
    try:
        # what typing.get_type_hints does for one annotation, in the class's module
        return eval(annotation, dict(vars(module)) if module else {}, dict(vars(cls)))
    except Exception:
        return annotation  # unresolvable: the fingerprint keeps the annotation's text


def _sorted(items: Iterable[Any]) -> list[Any]:
    # Order-free collections (union members, enum values) are compared as sorted lists.
    return sorted(items, key=lambda item: json.dumps(item, sort_keys=True, default=repr))


def _name(tp: Any) -> str:
    module = getattr(tp, "__module__", "")
    qual = getattr(tp, "__qualname__", None) or getattr(tp, "__name__", None) or repr(tp)
    return str(qual) if module == "builtins" else f"{module}.{qual}"


def _errors(errors: Iterable[type[BaseException]]) -> dict[str, Fingerprint]:
    return {e.__name__: fingerprint(e) for e in errors}


def _step_result(step: Any) -> Fingerprint:
    if isinstance(step, ActivityStep):
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


def workflows_of(actors: Iterable[Actor[Any]]) -> list[Workflow[Any, Any]]:
    return [w for a in actors for w in a.extensions.get("workflows", {}).values()]


# ---- storage ----------------------------------------------------------------------------------

ACCEPT: typing.LiteralString = """
INSERT INTO actor_workflow_manifests (actor_type, workflow, manifest_hash, manifest, accepted_at)
SELECT t.actor_type, t.workflow, t.manifest_hash, t.manifest, akter_now()
  FROM unnest(%(actor_types)s::text[], %(workflows)s::text[], %(hashes)s::text[], %(manifests)s::jsonb[])
       AS t(actor_type, workflow, manifest_hash, manifest)
ON CONFLICT (actor_type, workflow, manifest_hash) DO NOTHING"""

LOAD: typing.LiteralString = """
SELECT manifest FROM actor_workflow_manifests
 WHERE actor_type = %(actor_type)s AND workflow = %(workflow)s AND manifest_hash = %(manifest_hash)s"""


def accept_params(workflows: Iterable[Workflow[Any, Any]]) -> dict[str, list[str]]:
    """Parameters of ``ACCEPT`` for these workflows' manifests."""
    params: dict[str, list[str]] = {"actor_types": [], "workflows": [], "hashes": [], "manifests": []}
    for workflow in workflows:
        m, digest = of(workflow)
        params["actor_types"].append(workflow.actor.name)
        params["workflows"].append(workflow.name)
        params["hashes"].append(digest)
        params["manifests"].append(codec.canonical_json(m).decode())
    return params


async def accept(conn: psycopg.AsyncConnection[Any], actors: Iterable[Actor[Any]]) -> None:
    """Store the manifests of every workflow of ``actors`` (those already stored stay as they
    are). Done whenever a runtime opens, so every execution a process starts has its start
    manifest stored before the start can commit."""
    params = accept_params(workflows_of(actors))
    if params["hashes"]:
        await conn.execute(ACCEPT, params)


#: stored manifests by (actor type, workflow, hash): a hash names one manifest forever
_loaded: dict[tuple[str, str, str], Manifest] = {}


async def load(
    pool: psycopg_pool.AsyncConnectionPool[Any], actor_type: str, workflow: str, digest: str
) -> Manifest | None:
    """The stored manifest with this hash, or None when it was never stored (or was deleted)."""
    key = (actor_type, workflow, digest)
    found = _loaded.get(key)
    if found is not None:
        return found
    async with pool.connection() as conn:
        cur = await conn.execute(
            LOAD, {"actor_type": actor_type, "workflow": workflow, "manifest_hash": digest}
        )
        row = await cur.fetchone()
    if row is None:
        return None  # not cached: it may be stored later, by the code that has it
    manifest: Manifest = row[0]
    _loaded[key] = manifest
    return manifest


def step_kinds(manifest: Mapping[str, Any]) -> dict[str, str]:
    return {name: entry["kind"] for name, entry in manifest["steps"].items()}
