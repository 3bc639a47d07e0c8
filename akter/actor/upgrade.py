"""Upgrades: how an actor's stored states of an older shape are read by code with a newer one.

An actor type can declare that its state type replaced older ones::

    Cart = akter.Actor("Cart", state=CartV2, upgrade=akter.Upgrade(CartV1, lambda old: CartV2(...)))

and a chain, oldest first, each function returning the next one's from-type and the last the
state type::

    upgrade=[akter.Upgrade(CartV1, v1_to_v2), akter.Upgrade(CartV2, v2_to_v3)]

Every stored state carries its **shape** — the hash of the fingerprint of the type it was
written as (``akter.fingerprint.shape``), in ``actor_state.shape`` beside the state. The kernel
reads a state (``read_state``) in the shape it has: a state of an upgrade's from-shape is
decoded as that type and run through the chain from there; any other is decoded as the state
type (the deploy check and an App starting its engine have made sure it reads:
``akter.actor.compat``). So decoding stays exact — a stored value is never read as a type it
was not written as, nor filled in with defaults it was not checked for — and a successful turn
writes the state back in the current shape (``plan.prepare_write``), even when the handler
did not change it.

An upgrade function that raises, or returns something other than the next type, is a
``Defect``: the turn rolls back, the stored state stays as it was. ``akter.actor.manifest``
puts the from-types' fingerprints in the actor manifest, so the deploy check accepts a rename
exactly when an upgrade from the stored shape is declared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import attrs

from akter import codec
from akter.actor._types import Actor
from akter.errors import Defect
from akter.fingerprint import fingerprint, shape

Old = TypeVar("Old")


@attrs.frozen
class Upgrade(Generic[Old]):
    """Stored states of ``source``'s shape are read as ``source`` and passed to ``function``,
    which returns the next shape: the state type, or the from-type of the next upgrade in a
    chain. Keep the old type under any Python name: only its fields make its shape."""

    source: type[Old]
    function: Callable[[Old], Any]


def chain_of(upgrade: Upgrade[Any] | Sequence[Upgrade[Any]]) -> tuple[Upgrade[Any], ...]:
    """``Actor(upgrade=...)`` as a tuple, oldest first: one upgrade or a sequence of them."""
    if isinstance(upgrade, Upgrade):
        return (upgrade,)
    if isinstance(upgrade, str | bytes) or not isinstance(upgrade, Sequence):
        return (upgrade,)  # reported by declaration_problems
    return tuple(upgrade)


def declaration_problems(state: Any, upgrades: Sequence[Any]) -> list[str]:
    """What is wrong with these upgrades of an actor type with this state type, every problem
    at once (``Actor`` raises them as one ``DeclarationError``)."""
    problems: list[str] = []
    current = fingerprint(state) if isinstance(state, type) and attrs.has(state) else None
    seen: dict[str, str] = {}
    for i, up in enumerate(upgrades, 1):
        subject = f"upgrade {i}"
        if not isinstance(up, Upgrade):
            problems.append(f"{subject}: {up!r} is not an akter.Upgrade")
            continue
        if not (isinstance(up.source, type) and attrs.has(up.source)):
            problems.append(f"{subject}: from-type {up.source!r} must be an attrs class")
        else:
            fp = fingerprint(up.source)
            if fp == current:
                problems.append(
                    f"{subject}: {up.source.__name__} has the state type's own shape, so it would never apply"
                )
            digest = shape(fp)
            if digest in seen:
                problems.append(f"{subject}: two upgrades are from the shape of {seen[digest]}")
            seen.setdefault(digest, up.source.__name__)
        if not callable(up.function):
            problems.append(f"{subject}: its function is not callable")
    return problems


@attrs.frozen
class _Shapes:
    current: str
    #: from-shape -> index of its upgrade in the chain
    sources: dict[str, int]


def _shapes(actor: Actor[Any]) -> _Shapes:
    # Derived on first use, not at declaration: annotations may name types defined later.
    cached: _Shapes | None = getattr(actor, "_akter_shapes", None)
    if cached is None:
        cached = _Shapes(
            current=shape(fingerprint(actor.state_type)),
            sources={shape(fingerprint(up.source)): i for i, up in enumerate(actor.upgrades)},
        )
        actor._akter_shapes = cached  # type: ignore[attr-defined]
    return cached


def state_shape(actor: Actor[Any]) -> str:
    """The shape states of ``actor`` are written in: the hash of its state type's fingerprint."""
    return _shapes(actor).current


def readable_shapes(actor: Actor[Any]) -> set[str]:
    """The shapes ``read_state`` reads as what they are: the state's own and the upgrades'."""
    shapes = _shapes(actor)
    return {shapes.current, *shapes.sources}


def stored_type(actor: Actor[Any], stored_shape: str | None) -> Any:
    """The type a state stored in ``stored_shape`` was written as, as far as this code knows:
    an upgrade's from-type, else the state type (what ``akter inspect`` shows it as)."""
    start = _shapes(actor).sources.get(stored_shape) if stored_shape is not None else None
    return actor.state_type if start is None else actor.upgrades[start].source


def read_state(actor: Actor[Any], data: bytes, stored_shape: str | None) -> Any:
    """The stored state ``data``, written in ``stored_shape``, as ``actor``'s state type."""
    start = _shapes(actor).sources.get(stored_shape) if stored_shape is not None else None
    if start is None:
        return codec.decode(data, actor.state_type)
    return _upgrade(actor, codec.decode(data, actor.upgrades[start].source), start)


def _upgrade(actor: Actor[Any], value: Any, start: int) -> Any:
    for i in range(start, len(actor.upgrades)):
        up = actor.upgrades[i]
        expected = actor.upgrades[i + 1].source if i + 1 < len(actor.upgrades) else actor.state_type
        try:
            value = up.function(value)
        except Exception as exc:
            raise Defect(
                f"the upgrade of {actor.name}'s state from {up.source.__name__} raised "
                f"{type(exc).__name__}: {exc}",
                error_type=type(exc).__qualname__,
            ) from exc
        if not isinstance(value, expected):
            raise Defect(
                f"the upgrade of {actor.name}'s state from {up.source.__name__} returned a "
                f"{type(value).__name__}, not a {expected.__name__}",
                error_type="TypeError",
            )
    return value
