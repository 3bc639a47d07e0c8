"""Actor manifests, the read check of fingerprints, and upgrades of stored states, without a
database.

The pinned hash is a promise like the workflow manifest's (tests/unit/test_manifest.py): stored
actor manifests are found by it, so a change to the derivation must be deliberate (bump
``ACTOR_MANIFEST_VERSION``), never the expected value alone.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

import akter
from akter import codec
from akter.actor import compat, manifest, upgrade
from akter.fingerprint import Change, changes, describe, fingerprint, shape, with_defaults
from tests.apps import cart

# ---- does a stored value still read? ------------------------------------------------------------


@attrs.frozen
class Line:
    sku: str
    qty: int = 1


@attrs.frozen
class LineWithNote:
    sku: str
    qty: int = 1
    note: str = ""


@attrs.frozen
class LineRenamed:
    code: str
    qty: int = 1


@attrs.frozen
class Order:
    lines: list[Line]
    total: int = 0


@attrs.frozen
class OrderWithNotes:
    lines: list[LineWithNote]
    total: int = 0


@attrs.frozen
class OrderRenamedLines:
    lines: list[LineRenamed]
    total: int = 0


def read(old: type, new: type) -> list[Change]:
    return changes(fingerprint(old), with_defaults(new))


def test_a_value_reads_as_its_own_type_and_as_one_with_new_defaulted_fields() -> None:
    assert read(cart.Cart, cart.Cart) == []
    assert read(cart.Cart, cart.CartWithNote) == []
    assert read(Order, OrderWithNotes) == []  # inside a container too


def test_a_renamed_field_is_removed_and_named_as_a_likely_rename() -> None:
    items = fingerprint(cart.Cart)["fields"]["items"]
    assert read(cart.Cart, cart.CartLines) == [Change("removed", "items", items, None, renamed_to="lines")]
    assert read(cart.Cart, cart.CartLinesRequired) == [
        Change("removed", "items", items, None, renamed_to="lines"),
        Change("added_required", "lines", None, items),
    ]
    assert read(Order, OrderRenamedLines) == [
        Change("removed", "lines[].sku", "str", None, renamed_to="code"),
        Change("added_required", "lines[].code", None, "str"),
    ]


def test_a_changed_type_is_reported_at_the_field_that_holds_it() -> None:
    assert read(cart.Cart, cart.CartCounted) == [
        Change(
            "type_changed",
            "items",
            {"generic": "tuple", "args": ["str", "..."]},
            {"generic": "tuple", "args": ["int", "..."]},
        )
    ]
    assert describe(fingerprint(tuple[int, ...])) == "tuple[int, ...]"
    assert describe(fingerprint(int | None)) == "int | None"  # sorted members


def test_defaults_do_not_change_a_fingerprint() -> None:
    assert fingerprint(cart.CartLines) == fingerprint(cart.CartLinesRequired)
    assert with_defaults(cart.CartLines) != with_defaults(cart.CartLinesRequired)


# ---- actor manifests --------------------------------------------------------------------------


def test_an_actor_manifest_holds_state_upgrades_events_and_commands() -> None:
    carts = cart.VARIANTS["upgraded"][0]
    m = manifest.derive(carts)
    assert m == {
        "akter_actor_manifest": 1,
        "actor_type": "Cart",
        "state": fingerprint(cart.CartLines),
        "upgrades": [fingerprint(cart.Cart)],
        "events": {"Added": fingerprint(cart.Added)},
        "commands": {
            "add": {"payload": fingerprint(cart.Add), "output": "int", "errors": {}},
            "fill": {"payload": fingerprint(cart.Fill), "output": "none", "errors": {}},
            "show": {"payload": {"fields": {}}, "output": {"generic": "list", "args": ["str"]}, "errors": {}},
        },
    }
    assert manifest.of(carts) == (m, manifest.manifest_hash(m))


def test_the_actor_manifest_hash_is_pinned() -> None:
    assert manifest.of(cart.VARIANTS["before"][0])[1] == (
        "131503f2109621dd1478bde067d7cc9f6c1a5553b8f4ab6d368a7f18fb6c8f5c"
    )


def test_python_names_are_free_but_shapes_are_not() -> None:
    before = manifest.of(cart.VARIANTS["before"][0])[1]
    assert manifest.of(cart.build()[0])[1] == before
    assert manifest.of(cart.VARIANTS["additive"][0])[1] != before
    assert manifest.of(cart.VARIANTS["upgraded"][0])[1] != manifest.of(cart.VARIANTS["renamed"][0])[1]


def test_what_a_deploy_changes_is_judged_against_the_stored_manifest() -> None:
    stored = manifest.derive(cart.VARIANTS["before"][0])
    state = fingerprint(cart.Cart)

    def problems(variant: str) -> list[tuple[str, str | None, str | None]]:
        actor = cart.VARIANTS[variant][0]
        found = compat.state_problems(actor, state) + compat.member_problems(actor, stored)
        return [(p.code, p.name, p.field) for p in found]

    assert problems("before") == problems("additive") == problems("upgraded") == problems("chained") == []
    assert problems("renamed") == [("state_changed", None, "items")]
    assert problems("renamed_required") == [
        ("state_changed", None, "items"),
        ("state_changed", None, "lines"),
    ]
    assert problems("retyped") == [("state_changed", None, "items")]
    assert problems("event_removed") == [("event_removed", "Added", None)]
    assert problems("event_changed") == [("event_changed", "Added", "qty")]
    assert problems("payload_changed") == [("payload_changed", "add", "qty")]


# ---- upgrades ---------------------------------------------------------------------------------


def stored(value: Any) -> bytes:
    return codec.encode(value)


def test_a_state_is_read_in_the_shape_it_was_stored_in_and_upgraded() -> None:
    upgraded, chained = cart.VARIANTS["upgraded"][0], cart.VARIANTS["chained"][0]
    old, mid = shape(fingerprint(cart.Cart)), shape(fingerprint(cart.CartLines))
    assert upgrade.state_shape(upgraded) == mid
    lines = cart.CartLines(lines=("a",))
    assert upgrade.read_state(upgraded, stored(cart.Cart(items=("a",))), old) == lines
    assert upgrade.read_state(upgraded, stored(lines), mid) == lines
    # akter inspect shows a stored state as the type it was written as
    assert upgrade.stored_type(upgraded, old) is cart.Cart
    assert upgrade.stored_type(upgraded, mid) is upgrade.stored_type(upgraded, None) is cart.CartLines
    v3 = cart.CartV3(lines=(cart.Line(sku="a"),))
    assert upgrade.read_state(chained, stored(cart.Cart(items=("a",))), old) == v3
    assert upgrade.read_state(chained, stored(cart.CartLines(lines=("a",))), mid) == v3


def test_an_upgrade_that_fails_or_returns_another_type_is_a_defect() -> None:
    def broken(old: cart.Cart) -> cart.CartLines:
        raise ValueError("no")

    failing = akter.Actor("Cart", state=cart.CartLines, upgrade=akter.Upgrade(cart.Cart, broken))
    wrong = akter.Actor("Cart", state=cart.CartLines, upgrade=akter.Upgrade(cart.Cart, lambda old: old))
    data, old = stored(cart.Cart(items=("a",))), shape(fingerprint(cart.Cart))
    with pytest.raises(akter.Defect, match=r"upgrade of Cart's state from Cart raised ValueError: no"):
        upgrade.read_state(failing, data, old)
    with pytest.raises(akter.Defect, match=r"from Cart returned a Cart, not a CartLines"):
        upgrade.read_state(wrong, data, old)


def test_upgrades_are_validated_when_declared() -> None:
    with pytest.raises(akter.DeclarationError) as err:
        akter.Actor(
            "Cart",
            state=cart.CartLines,
            upgrade=[
                akter.Upgrade(dict, lambda old: old),  # type: ignore[arg-type]
                akter.Upgrade(cart.CartLinesRequired, lambda old: old),  # the same shape as the state
                akter.Upgrade(cart.Cart, "not callable"),  # type: ignore[arg-type]
                akter.Upgrade(cart.Cart, lambda old: old),
                "no upgrade",  # type: ignore[list-item]
            ],
        )
    assert err.value.problems == [
        "upgrade 1: from-type <class 'dict'> must be an attrs class",
        "upgrade 2: CartLinesRequired has the state type's own shape, so it would never apply",
        "upgrade 3: its function is not callable",
        "upgrade 4: two upgrades are from the shape of Cart",
        "upgrade 5: 'no upgrade' is not an akter.Upgrade",
    ]


def test_upgrades_of_an_invalid_state_type_are_reported_with_it() -> None:
    with pytest.raises(akter.DeclarationError) as err:
        akter.Actor("Cart", state=1, upgrade=akter.Upgrade(int, str))  # type: ignore[arg-type]
    assert "upgrade 1: from-type <class 'int'> must be an attrs class" in err.value.problems
    assert len(err.value.problems) == 2  # and the state type's own problem
