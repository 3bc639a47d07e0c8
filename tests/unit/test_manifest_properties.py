"""Fingerprint laws, over generated attrs types.

A *shape* is a small description of a stored type — scalars, lists, dicts, homogeneous tuples,
optionals and attrs classes with named fields, nested — from which ``build`` makes real attrs
classes, with a class name and a field order of the test's choosing. The laws:

* cosmetic freedom: the same shape built with other class names and another field order has
  the same fingerprint (and a workflow whose steps are declared in another order, the same
  manifest hash);
* sensitivity: any change to a shape, at any depth — a field renamed, added, removed, or of
  another type; a container or scalar swapped — changes the fingerprint;
* stability: a manifest's hash survives a JSON round trip (as through the ``jsonb`` column).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Optional

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

import akter
from akter.fingerprint import fingerprint
from akter.workflow.core import manifest

SCALARS = {"int": int, "str": str, "float": float, "bool": bool, "bytes": bytes, "datetime": datetime}
CONTAINERS = ("list", "dict", "tuple")

# A shape: ("scalar", name) | (container, shape) | ("opt", shape other than opt)
#          | ("cls", ((field name, shape), ...) sorted by name)
Shape = tuple[Any, ...]

# a fixed pool keeps generation cheap (no filtering) and makes name clashes between levels likely
field_names = st.sampled_from(["id", "qty", "name", "when", "items", "total", "note", "a", "b", "x_1"])
class_names = st.from_regex(r"[A-Z][A-Za-z0-9]{0,9}", fullmatch=True)
scalars = st.sampled_from(sorted(SCALARS)).map(lambda name: ("scalar", name))


def _extend(children: st.SearchStrategy[Shape]) -> st.SearchStrategy[Shape]:
    return st.one_of(
        st.tuples(st.sampled_from(CONTAINERS), children),
        children.map(lambda s: s if s[0] == "opt" else ("opt", s)),  # Optional[Optional[X]] is Optional[X]
        st.dictionaries(field_names, children, max_size=4).map(lambda f: ("cls", tuple(sorted(f.items())))),
    )


shapes = st.recursive(scalars, _extend, max_leaves=8)
classes = st.dictionaries(field_names, shapes, min_size=1, max_size=5).map(
    lambda f: ("cls", tuple(sorted(f.items())))
)


def build(shape: Shape, draw_name: Any, draw_order: Any) -> Any:
    """A real type of ``shape``; class names and field orders come from the two callables."""
    kind = shape[0]
    if kind == "scalar":
        return SCALARS[shape[1]]
    if kind == "list":
        return list[build(shape[1], draw_name, draw_order)]  # type: ignore[misc]
    if kind == "dict":
        return dict[str, build(shape[1], draw_name, draw_order)]  # type: ignore[misc]
    if kind == "tuple":
        return tuple[build(shape[1], draw_name, draw_order), ...]  # type: ignore[misc]
    if kind == "opt":
        return Optional[build(shape[1], draw_name, draw_order)]  # noqa: UP045 -- one of the spellings
    fields = list(shape[1])
    return attrs.make_class(
        draw_name(),
        {name: attrs.field(type=build(sub, draw_name, draw_order)) for name, sub in draw_order(fields)},
        frozen=True,
    )


def mutations(shape: Shape) -> list[Shape]:
    """Every shape one change away from ``shape`` (at any depth)."""
    kind = shape[0]
    out: list[Shape] = []
    if kind == "scalar":
        out += [("scalar", other) for other in sorted(SCALARS) if other != shape[1]]
        out.append(("list", shape))
    elif kind in CONTAINERS:
        out += [(other, shape[1]) for other in CONTAINERS if other != kind]
        out += [(kind, m) for m in mutations(shape[1])]
    elif kind == "opt":
        out.append(shape[1])
        out += [("opt", m) for m in mutations(shape[1]) if m[0] != "opt"]
    else:
        fields = dict(shape[1])

        def cls(f: dict[str, Shape]) -> Shape:
            return ("cls", tuple(sorted(f.items())))

        def unused(stem: str) -> str:
            return next(f"{stem}_{i}" for i in range(len(fields) + 1) if f"{stem}_{i}" not in fields)

        out.append(cls({**fields, unused("new"): ("scalar", "int")}))
        for name, sub in fields.items():
            rest = {k: v for k, v in fields.items() if k != name}
            out.append(cls(rest))
            out.append(cls({**rest, unused(name): sub}))
            out += [cls({**rest, name: m}) for m in mutations(sub)]
    return out


@st.composite
def builds(draw: st.DrawFn, shape: Shape) -> Any:
    return build(shape, lambda: draw(class_names), lambda fields: draw(st.permutations(fields)))


@settings(max_examples=40, deadline=None)
@given(st.data(), classes)
def test_names_and_field_order_are_free(data: st.DataObject, shape: Shape) -> None:
    one, other = data.draw(builds(shape)), data.draw(builds(shape))
    assert fingerprint(one) == fingerprint(other)


@settings(max_examples=60, deadline=None)
@given(st.data(), classes)
def test_any_change_at_any_depth_changes_the_fingerprint(data: st.DataObject, shape: Shape) -> None:
    changed = data.draw(st.sampled_from(mutations(shape)))
    assert changed != shape
    assert fingerprint(data.draw(builds(shape))) != fingerprint(data.draw(builds(changed)))


@st.composite
def workflows(draw: st.DrawFn, results: list[Shape]) -> Any:
    """A workflow with one activity per result shape, declared in a drawn order."""

    @attrs.frozen
    class State:
        n: int = 0

    actor = akter.Actor("Prop", state=State)
    payload = draw(builds(("cls", (("id", ("scalar", "str")),))))
    workflow = actor.workflow("Flow", input=payload)
    for index in draw(st.permutations(range(len(results)))):
        workflow.activity(f"step{index}", success=draw(builds(results[index])))
    return workflow


@settings(max_examples=15, deadline=None)
@given(st.data(), st.lists(classes, min_size=1, max_size=4))
def test_a_manifest_hash_ignores_declaration_order_and_sees_any_result_change(
    data: st.DataObject, results: list[Shape]
) -> None:
    one, other = data.draw(workflows(results)), data.draw(workflows(results))
    digest = manifest.of(one)[1]
    assert manifest.of(other)[1] == digest
    index = data.draw(st.integers(0, len(results) - 1))
    changed = [*results[:index], data.draw(st.sampled_from(mutations(results[index]))), *results[index + 1 :]]
    assert manifest.of(data.draw(workflows(changed)))[1] != digest
    # the stored jsonb reads back as the same manifest, with the same hash
    assert manifest.manifest_hash(json.loads(json.dumps(manifest.derive(one)))) == digest
