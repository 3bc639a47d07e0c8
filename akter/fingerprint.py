"""Fingerprints: how the codec stores a type, as JSON, and whether a stored value still reads.

A fingerprint (``fingerprint``) describes how the codec (cattrs' JSON preconf converter, see
``codec.py``) stores and reads a type, and nothing else. Workflow manifests
(``akter.workflow.core.manifest``) and actor manifests (``akter.actor.manifest``) are made of them;
the actor kernel stamps every stored state with the ``shape`` (the hash of its type's
fingerprint) it was written in (``akter.actor.upgrade``).

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

Defaults are not part of a fingerprint, but whether an old value reads as a new type depends on
them: a field added *with* a default reads from a value stored without it, one added without a
default does not. ``with_defaults`` is the fingerprint with, beside each ``"fields"``, the
sorted ``"defaults"`` (the fields that have one); ``changes(stored, with_defaults(new))`` lists
what would keep a value stored as ``stored`` from reading as ``new`` exactly — a field removed
or renamed (its stored values would be dropped), a field of another type, a field added without
a default — descending into fields and container arguments; an empty list means it reads.
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
from typing import Any

import attrs

from akter import codec

Fingerprint = Any


def fingerprint(tp: Any) -> Fingerprint:
    """A JSON-able description of how the codec stores a value of type ``tp`` (see the table in
    this module's docstring)."""
    return _fingerprint(tp, (), defaults=False)


def with_defaults(tp: Any) -> Fingerprint:
    """``fingerprint(tp)`` with a ``"defaults"`` list beside every ``"fields"``: what
    ``changes`` compares a stored fingerprint with. Never stored, never hashed."""
    return _fingerprint(tp, (), defaults=True)


def shape(fp: Fingerprint) -> str:
    """The hash (SHA-256 hex of the canonical JSON) of a fingerprint: the ``shape`` a stored
    state is stamped with."""
    return hashlib.sha256(codec.canonical_json(fp)).hexdigest()


def _fingerprint(tp: Any, stack: tuple[Any, ...], *, defaults: bool) -> Fingerprint:  # noqa: PLR0911 -- one case per kind of type
    if tp is None or tp is type(None):
        return "none"
    if tp is typing.Any or tp is object or isinstance(tp, typing.TypeVar):
        return "any"
    supertype = getattr(tp, "__supertype__", None)  # typing.NewType
    if supertype is not None:
        return _fingerprint(supertype, stack, defaults=defaults)
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _fingerprint(typing.get_args(tp)[0], stack, defaults=defaults)
    if origin is typing.Union or origin is types.UnionType:
        members = typing.get_args(tp)
        records = [m for m in members if _is_record_type(m)]
        return {
            "union": _sorted(
                # a union of two or more records stores each under its class name (codec.TAG)
                {"tag": _record_class(m).__name__, **_fingerprint(m, stack, defaults=defaults)}
                if len(records) > 1 and m in records
                else _fingerprint(m, stack, defaults=defaults)
                for m in members
            )
        }
    if origin is typing.Literal:
        return {"literal": _sorted(_value(a) for a in typing.get_args(tp))}
    cls = origin if origin is not None else tp
    if isinstance(cls, type) and (attrs.has(cls) or dataclasses.is_dataclass(cls)):
        if cls in stack:
            return {"recursive": len(stack) - stack.index(cls)}
        fields, with_default = _fields(cls, typing.get_args(tp), (*stack, cls), defaults=defaults)
        return {"fields": fields, "defaults": with_default} if defaults else {"fields": fields}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": _sorted(_value(member.value) for member in tp)}
    if origin is not None:
        args = typing.get_args(tp)
        return {
            "generic": _name(origin),
            "args": ["..." if a is Ellipsis else _fingerprint(a, stack, defaults=defaults) for a in args],
        }
    if isinstance(tp, str):
        # An annotation that could not be resolved: its text is all there is to compare.
        return {"unresolved": tp}
    return _name(tp)


def _record_class(tp: Any) -> Any:
    return typing.get_origin(tp) or tp


def _is_record_type(tp: Any) -> bool:
    cls = _record_class(tp)
    return isinstance(cls, type) and (attrs.has(cls) or dataclasses.is_dataclass(cls))


def _value(value: Any) -> Any:
    """A literal or enum value as JSON: itself when JSON has it, else its repr."""
    if isinstance(value, enum.Enum):
        value = value.value
    return value if value is None or isinstance(value, str | int | float | bool) else repr(value)


def _fields(
    cls: type, args: tuple[Any, ...], stack: tuple[Any, ...], *, defaults: bool
) -> tuple[dict[str, Fingerprint], list[str]]:
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):
        hints = {}  # one unresolvable annotation: resolve the others one by one below
    # A generic attrs class used with arguments (Box[int]): its type variables stand for them.
    params = dict(zip(getattr(cls, "__parameters__", ()), args, strict=False))
    if attrs.has(cls):
        declared = [(f.name, f.type, f.default is not attrs.NOTHING) for f in attrs.fields(cls) if f.init]
    else:
        missing = dataclasses.MISSING
        declared = [
            (f.name, f.type, f.default is not missing or f.default_factory is not missing)
            for f in dataclasses.fields(cls)
            if f.init
        ]
    out: dict[str, Fingerprint] = {}
    for name, raw, _ in declared:
        hint = hints[name] if name in hints else _resolve(cls, raw)
        hint = params.get(hint, hint) if isinstance(hint, typing.TypeVar) else hint
        out[name] = _fingerprint(hint, stack, defaults=defaults)
    return out, sorted(name for name, _, has_default in declared if has_default)


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


# ---- does a stored value still read? -----------------------------------------------------------


@attrs.frozen
class Change:
    """One reason a value stored as one fingerprint does not read exactly as another.

    ``kind``: ``"removed"`` (a field the stored value has is not declared: removed or renamed;
    ``renamed_to`` names the one new field of the same type, if there is exactly one),
    ``"added_required"`` (a new field without a default: stored values lack it) or
    ``"type_changed"``. ``path``: the field, dotted from the top (``"lines.qty"``), ``""`` for
    the type itself; ``[]`` stands for a container's element."""

    kind: str
    path: str
    stored: Fingerprint = None
    declared: Fingerprint = None
    renamed_to: str | None = None


def strip_defaults(fp: Fingerprint) -> Fingerprint:
    """A ``with_defaults`` fingerprint back to the plain one."""
    if isinstance(fp, dict):
        return {k: strip_defaults(v) for k, v in fp.items() if k != "defaults"}
    if isinstance(fp, list):
        return [strip_defaults(item) for item in fp]
    return fp


def changes(stored: Fingerprint, declared: Fingerprint, path: str = "") -> list[Change]:
    """What keeps a value stored as ``stored`` (a plain fingerprint) from reading exactly as
    ``declared`` (a ``with_defaults`` fingerprint); none: it reads, possibly with new fields at
    their defaults."""
    if _is_record(stored) and _is_record(declared):
        return _record_changes(stored["fields"], declared["fields"], set(declared.get("defaults", ())), path)
    if (
        isinstance(stored, dict)
        and isinstance(declared, dict)
        and "generic" in stored
        and stored.get("generic") == declared.get("generic")
        and len(stored["args"]) == len(declared["args"])
    ):
        # A container of records whose fields changed is judged element by element; one whose
        # element type changed otherwise is a change of the field that holds it.
        found: list[Change] = []
        for old, new in zip(stored["args"], declared["args"], strict=True):
            if old == strip_defaults(new):
                continue
            if not (_is_record(old) and _is_record(new)):
                break
            found += changes(old, new, f"{path}[]")
        else:
            return found
    plain = strip_defaults(declared)
    return [] if stored == plain else [Change("type_changed", path, stored, plain)]


def _is_record(fp: Fingerprint) -> bool:
    return isinstance(fp, dict) and "fields" in fp


def _record_changes(
    stored: Mapping[str, Fingerprint], declared: Mapping[str, Fingerprint], defaults: set[str], path: str
) -> list[Change]:
    prefix = f"{path}." if path else ""
    added = [name for name in declared if name not in stored]
    found: list[Change] = []
    for name in sorted(stored):
        if name in declared:
            found += changes(stored[name], declared[name], prefix + name)
            continue
        same_type = [new for new in added if strip_defaults(declared[new]) == stored[name]]
        renamed_to = same_type[0] if len(same_type) == 1 else None
        found.append(Change("removed", prefix + name, stored[name], None, renamed_to=renamed_to))
    found += [
        Change("added_required", prefix + name, None, strip_defaults(declared[name]))
        for name in sorted(added)
        if name not in defaults
    ]
    return found


def describe(fp: Fingerprint) -> str:  # noqa: PLR0911 -- one case per kind of fingerprint
    """A fingerprint as a person reads a type: ``tuple[str, ...]``, ``int | None``, a record
    as ``{a: int, b: str}``."""
    if isinstance(fp, str):
        if fp in {"none", "any"}:
            return fp.capitalize()
        return fp.rsplit(".", 1)[-1] if "." in fp and fp != "..." else fp
    if not isinstance(fp, dict):
        return repr(fp)
    if "fields" in fp:
        return "{" + ", ".join(f"{k}: {describe(v)}" for k, v in sorted(fp["fields"].items())) + "}"
    if "generic" in fp:
        return f"{describe(fp['generic'])}[{', '.join(describe(a) for a in fp['args'])}]"
    if "union" in fp:
        return " | ".join(describe(m) for m in fp["union"])
    if "literal" in fp:
        return f"Literal[{', '.join(repr(v) for v in fp['literal'])}]"
    if "enum" in fp:
        return f"enum of {', '.join(repr(v) for v in fp['enum'])}"
    if "recursive" in fp:
        return "<itself>"
    return str(fp.get("unresolved", fp))
