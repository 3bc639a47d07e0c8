"""The types an order or billing system stores, through akter's one converter (``akter.codec``).

Three laws, each checked over generated values: a supported value reads back exactly (same value,
same class, same ``Decimal`` exponent, same UTC offset) and encodes to the same bytes every time;
stored JSON of any other shape is a ``CorruptRecord``, never a default or a coerced value; a
value that would not read back (a field of the wrong type) is ``InvalidInput`` naming the field.
And a type the converter cannot store is refused when it is declared, every offending field at
once, by its path."""

from __future__ import annotations

import contextlib
import enum
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any, Generic, Literal, TypeVar
from uuid import UUID

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import akter
from akter import codec
from akter.errors import CorruptRecord, DeclarationError, InvalidInput

laws = settings(deadline=None)

T = TypeVar("T")


class Currency(enum.Enum):
    EUR = "EUR"
    USD = "USD"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


@attrs.frozen
class Card:
    last4: str


@attrs.frozen
class Transfer:
    iban: str


@attrs.frozen
class Cash:
    """The same fields as ``Refund``: only the union's tag tells them apart."""

    amount: Decimal


@attrs.frozen
class Refund:
    amount: Decimal


@attrs.frozen
class Line:
    sku: str
    quantity: int
    unit_price: Decimal


@attrs.frozen
class Box(Generic[T]):
    item: T


@attrs.frozen
class Invoice:
    number: UUID
    issued_at: datetime
    due: date
    currency: Currency
    priority: Priority
    total: Decimal
    lines: tuple[Line, ...]
    tags: frozenset[str]
    seen: set[int]
    signature: bytes
    range: tuple[int, str]
    by_priority: dict[Priority, int]
    by_line: dict[int, Decimal]
    by_id: dict[UUID, str]
    paid_with: Card | Transfer | None
    money: Cash | Refund
    mode: Literal["draft", "final"]
    amount: int | float | None
    boxed: Box[Decimal]
    gift: Line | None = None
    note: str = ""


ZONES = st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))])
decimals = st.decimals(allow_nan=False, allow_infinity=False)
aware = st.datetimes(timezones=ZONES)
lines = st.builds(Line, sku=st.text(max_size=8), quantity=st.integers(), unit_price=decimals)
finite = st.floats(allow_nan=False, allow_infinity=False)
invoices = st.builds(
    Invoice,
    number=st.uuids(),
    issued_at=aware,
    due=st.dates(),
    currency=st.sampled_from(Currency),
    priority=st.sampled_from(Priority),
    total=decimals,
    lines=st.lists(lines, max_size=4).map(tuple),
    tags=st.frozensets(st.text(max_size=6), max_size=6),
    seen=st.sets(st.integers(), max_size=6),
    signature=st.binary(max_size=40),
    range=st.tuples(st.integers(), st.text(max_size=4)),
    by_priority=st.dictionaries(st.sampled_from(Priority), st.integers(), max_size=2),
    by_line=st.dictionaries(st.integers(), decimals, max_size=4),
    by_id=st.dictionaries(st.uuids(), st.text(max_size=4), max_size=3),
    paid_with=st.none() | st.builds(Card, st.text(max_size=4)) | st.builds(Transfer, st.text(max_size=4)),
    money=st.builds(Cash, decimals) | st.builds(Refund, decimals),
    mode=st.sampled_from(["draft", "final"]),
    amount=st.none() | st.integers() | finite,
    boxed=st.builds(Box[Decimal], decimals),
    gift=st.none() | lines,
    note=st.text(max_size=10),
)


def _same_everywhere(a: Any, b: Any) -> None:
    """Equal, and of the same class all the way down, with the same Decimal spelling and UTC
    offset: ``==`` alone would take Decimal("1.1") for Decimal("1.10"), a list for a tuple."""
    assert type(a) is type(b), (a, b)
    if attrs.has(type(a)):
        for field in attrs.fields(type(a)):
            _same_everywhere(getattr(a, field.name), getattr(b, field.name))
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same_everywhere(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b) or set(a) == set(b)
        for key in a:
            _same_everywhere(a[key], b[key])
    elif isinstance(a, Decimal):
        assert str(a) == str(b)
    elif isinstance(a, datetime):
        assert a == b
        assert a.utcoffset() == b.utcoffset()
    else:
        assert a == b


# -- exact round trips ----------------------------------------------------------------------------


@laws
@given(invoices)
def test_every_supported_value_reads_back_exactly(invoice: Invoice) -> None:
    stored = codec.encode(invoice, Invoice)
    decoded = codec.decode(stored, Invoice)
    _same_everywhere(invoice, decoded)
    assert codec.encode(decoded, Invoice) == stored
    assert codec.frame(codec.check(invoice, Invoice)) == stored


@laws
@given(decimals)
def test_a_decimal_keeps_its_exponent(amount: Decimal) -> None:
    decoded = codec.decode(codec.encode(Box(amount), Box[Decimal]), Box[Decimal])
    assert str(decoded.item) == str(amount)


def test_a_decimal_is_stored_as_a_string_so_no_float_rounds_it() -> None:
    stored = codec.unframe(codec.encode(Box(Decimal("0.10")), Box[Decimal]))
    assert stored == b'{"item":"0.10"}'


@laws
@given(st.frozensets(st.text(max_size=5) | st.integers().map(str), max_size=10), st.randoms())
def test_equal_sets_give_equal_bytes_whatever_their_order(members: frozenset[str], rnd: Any) -> None:
    # a set iterates in hash order, which differs between processes (string hash seeds): the
    # members are sorted, so a payload hash does not depend on the process that computed it
    shuffled = list(members)
    rnd.shuffle(shuffled)
    rebuilt = frozenset(shuffled)
    assert codec.encode(Box(rebuilt), Box[frozenset[str]]) == codec.encode(Box(members), Box[frozenset[str]])
    primitive = json.loads(codec.unframe(codec.encode(Box(members), Box[frozenset[str]])))
    assert primitive["item"] == sorted(primitive["item"], key=lambda m: json.dumps(m, ensure_ascii=False))


def test_a_union_of_records_is_tagged_so_look_alikes_read_back_as_themselves() -> None:
    for money in (Cash(Decimal("5")), Refund(Decimal("5"))):
        stored = codec.encode(Box(money), Box[Cash | Refund])
        assert json.loads(codec.unframe(stored)) == {"item": {"_type": type(money).__name__, "amount": "5"}}
        assert type(codec.decode(stored, Box[Cash | Refund]).item) is type(money)


def test_an_optional_record_is_stored_untagged() -> None:
    # X | None needs no tag (null or an object): values stored before tags existed still read
    assert codec.unframe(codec.encode(Box(Card("4242")), Box[Card | None])) == b'{"item":{"last4":"4242"}}'


def test_an_int_given_for_a_float_is_stored_as_the_float_it_means() -> None:
    assert codec.encode(Box(1), Box[float]) == codec.encode(Box(1.0), Box[float])
    assert codec.decode(codec.encode(Box(1), Box[float]), Box[float]) == Box(1.0)


def test_a_datetime_in_a_named_zone_keeps_its_instant_and_offset() -> None:
    zone = timezone(timedelta(hours=1), "CET")
    at = datetime(2026, 12, 1, 9, 30, tzinfo=zone)
    decoded = codec.decode(codec.encode(Box(at), Box[datetime]), Box[datetime]).item
    assert decoded == at
    assert decoded.utcoffset() == timedelta(hours=1)


# -- refused when encoded or checked: InvalidInput, before anything is written ---------------------


@laws
@given(st.datetimes(timezones=st.none()))
def test_a_naive_datetime_is_refused(naive: datetime) -> None:
    with pytest.raises(InvalidInput, match="naive"):
        codec.encode(Box(naive), Box[datetime])
    with pytest.raises(InvalidInput, match=r"Box\.item: .*naive"):
        codec.check(Box(naive), Box[datetime])


@pytest.mark.parametrize(
    ("value", "as_type"),
    [
        (Box(Decimal("NaN")), Box[Decimal]),
        (Box(Decimal("Infinity")), Box[Decimal]),
        (Box(float("nan")), Box[float]),
        (Box(float("-inf")), Box[float]),
    ],
    ids=["decimal-nan", "decimal-inf", "float-nan", "float-inf"],
)
def test_numbers_json_cannot_hold_are_refused(value: Any, as_type: Any) -> None:
    with pytest.raises(InvalidInput):
        codec.encode(value, as_type)
    with pytest.raises(InvalidInput, match=r"Box\.item"):
        codec.check(value, as_type)


@attrs.frozen
class Ping:
    n: int
    label: str = ""
    price: Decimal = Decimal(0)
    at: datetime | None = None
    lines: tuple[Line, ...] = ()


#: for each field of Ping, values of another type (a value that would read back equal is no error)
WRONG = {
    "n": st.text()
    | st.floats()
    | st.booleans()
    | st.none()
    | st.lists(st.integers(), max_size=2)
    | st.complex_numbers()
    | st.decimals()
    | st.builds(object),
    "label": st.integers()
    | st.floats(allow_nan=False)
    | st.booleans()
    | st.binary(min_size=1)
    | st.lists(st.text(), max_size=2)
    | st.dictionaries(st.text(), st.text(), max_size=2),
    "price": st.integers()
    | st.floats()
    | st.text()
    | st.booleans()
    | st.decimals(allow_nan=True).filter(lambda d: not d.is_finite()),
    "at": st.datetimes(timezones=st.none()) | st.dates() | st.text() | st.integers() | st.floats(),
    "lines": st.lists(lines, min_size=1, max_size=2)
    | st.tuples(st.builds(Card, st.text()))
    | st.tuples(lines, st.integers())
    | st.text(),
}


@laws
@given(st.sampled_from(sorted(WRONG)).flatmap(lambda name: st.tuples(st.just(name), WRONG[name])))
def test_a_field_of_the_wrong_type_is_invalid_input_naming_the_field(wrong: tuple[str, Any]) -> None:
    name, value = wrong
    payload = attrs.evolve(Ping(n=1), **{name: value})
    with pytest.raises(InvalidInput, match=rf"Ping\.{name}\b"):
        codec.check(payload, Ping)


def test_the_refusal_says_what_was_expected_and_what_came() -> None:
    with pytest.raises(InvalidInput, match=r"Ping\.n: expected int, got str 'ten'"):
        codec.check(Ping(n="ten"), Ping)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"Ping\.lines\[1\]\.unit_price: expected Decimal, got float"):
        codec.check(Ping(1, lines=(Line("a", 1, Decimal(1)), Line("b", 1, 1.5))), Ping)  # type: ignore[arg-type]


def test_a_value_that_would_read_back_as_another_class_is_refused() -> None:
    @attrs.frozen
    class Special(Line):
        extra: int = 0

    with pytest.raises(InvalidInput, match=r"Ping\.lines\[0\]"):
        codec.check(Ping(1, lines=(Special("a", 1, Decimal(1), extra=5),)), Ping)
    with pytest.raises(InvalidInput, match=r"Ping\.lines"):
        codec.check(Ping(1, lines=[Line("a", 1, Decimal(1))]), Ping)  # type: ignore[arg-type]


def test_a_record_compared_by_identity_is_still_checked_field_by_field() -> None:
    @attrs.frozen(eq=False)
    class Opaque:
        n: int

    assert codec.check(Opaque(1), Opaque) == b'{"n":1}'
    with pytest.raises(InvalidInput, match=r"Opaque\.n"):
        codec.check(Opaque("1"), Opaque)  # type: ignore[arg-type]


# -- stored JSON of another shape: CorruptRecord, never a default ---------------------------------


@attrs.frozen
class Defaults:
    count: int = 0
    total: Decimal = Decimal(0)


@pytest.mark.parametrize(
    ("raw", "as_type"),
    [
        ([1, 2], Defaults),
        ({"zzz": 1}, Defaults),
        ({"count": 1, "zzz": 1}, Defaults),
        ("count", Defaults),
        (None, Defaults),
        ({"count": "5"}, Defaults),
        ({"count": 5.0}, Defaults),
        ({"count": True}, Defaults),
        ({"total": 1.5}, Defaults),
        ({"total": "one"}, Defaults),
        ({"total": "NaN"}, Defaults),
        ({}, Ping),
        ({"n": 1, "label": 5}, Ping),
        ({"n": 1, "at": "2026-12-01T10:00:00"}, Ping),
        ({"n": 1, "at": "yesterday"}, Ping),
        ({"n": 1, "lines": {"sku": "a"}}, Ping),
        ({"n": 1, "lines": "abc"}, Ping),
        ({"n": 1, "lines": [{"sku": "a", "quantity": 1}]}, Ping),
        ({"item": 1.5}, Box[bool]),
        ({"item": 1}, Box[bool]),
        ({"item": 1}, Box[str]),
        ({"item": "1"}, Box[float]),
        ({"item": "not-a-uuid"}, Box[UUID]),
        ({"item": "2026-13-01"}, Box[date]),
        ({"item": "GBP"}, Box[Currency]),
        ({"item": "1"}, Box[Priority]),
        ({"item": True}, Box[Priority]),
        ({"item": "~~~~~"}, Box[bytes]),
        ({"item": [1, "a", 2]}, Box[tuple[int, str]]),
        ({"item": [1]}, Box[tuple[int, str]]),
        ({"item": ["a", "a"]}, Box[frozenset[str]]),
        ({"item": {"01": "x"}}, Box[dict[int, str]]),
        ({"item": {"x": "x"}}, Box[dict[int, str]]),
        ({"item": [["a", 1]]}, Box[dict[str, int]]),
        ({"item": {"amount": "1"}}, Box[Cash | Refund]),
        ({"item": {"_type": "Card", "amount": "1"}}, Box[Cash | Refund]),
        ({"item": {"_type": "Cash", "amount": "1", "zzz": 0}}, Box[Cash | Refund]),
        ({"item": "1"}, Box[int | None]),
        ({"item": "maybe"}, Box[Literal["draft", "final"]]),
        ({"item": 1}, Box[Literal[True]]),
    ],
)
def test_json_of_another_shape_is_a_corrupt_record(raw: Any, as_type: Any) -> None:
    stored = codec.frame(json.dumps(raw).encode())
    with pytest.raises(CorruptRecord):
        codec.decode(stored, as_type)
    with pytest.raises(CorruptRecord):
        codec.from_primitive(raw, as_type)


def test_a_corrupt_record_names_every_bad_field_by_its_path() -> None:
    stored = {"n": "1", "lines": [{"sku": 1, "quantity": 1, "unit_price": "1"}], "x": 0}
    with pytest.raises(CorruptRecord) as caught:
        codec.from_primitive(stored, Ping)
    message = str(caught.value)
    assert "Ping.n: expected int, got str '1'" in message
    assert "Ping.lines[0].sku: expected str" in message
    assert "Ping: unknown fields (x)" in message


def test_a_validator_refusing_a_stored_value_is_a_corrupt_record() -> None:
    @attrs.frozen
    class Positive:
        n: int = attrs.field(validator=attrs.validators.gt(0))

    with pytest.raises(CorruptRecord):
        codec.from_primitive({"n": -1}, Positive)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6) | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)


@laws
@given(json_values | st.fixed_dictionaries({"n": json_values}, optional={"label": json_values}))
def test_any_stored_json_is_a_value_or_a_corrupt_record(raw: Any) -> None:
    try:
        value = codec.from_primitive(raw, Ping)
    except CorruptRecord:
        return
    # whatever decoded must be a Ping that stores back as the same JSON (its defaults filled in)
    assert codec.check(value, Ping)


# -- refused when declared ------------------------------------------------------------------------


class Plain:
    """Not an attrs class: the converter has no stored form for it."""


@attrs.frozen
class Cart:
    total: complex
    owner: Plain
    anything: Any
    thing: object
    loose: list  # type: ignore[type-arg]
    ok: Decimal = Decimal(0)


CART_PROBLEMS = [
    "Cart.total: complex",
    "Cart.owner: Plain",
    "Cart.anything: Any",
    "Cart.thing: object",
    "Cart.loose: list",
]


def _problems(tp: Any, role: str = "value") -> list[str]:
    return [p.split(" ", 2)[0] + " " + p.split(" ", 2)[1] for p in codec.unsupported(tp, role)]


def test_every_unstorable_field_is_named_by_its_path() -> None:
    assert _problems(Cart) == CART_PROBLEMS


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (Invoice, []),
        (Box[int], []),
        (int | None, []),
        (Decimal, []),
        (None, []),
        (Box[complex], ["Box.item: complex"]),
        (Box[list[Plain]], ["Box.item[]: Plain"]),
        (Box[dict[str, complex]], ["Box.item{}: complex"]),
        (Box[tuple[int, complex]], ["Box.item[1]: complex"]),
        (Box[dict[float, int]], ["Box.item: dict"]),
        (Box[dict[Card, int]], ["Box.item: dict"]),
        (Box[str | Decimal], ["Box.item: in"]),
        (Box[datetime | date], ["Box.item: in"]),
        (Box[Card | dict[str, int]], ["Box.item: in"]),
        (Box[Cash | Refund | dict[str, int]], ["Box.item: in"]),
        (Box[int | Priority], ["Box.item: in"]),
        (Box[Any], ["Box.item: Any"]),
        (Box[T], ["Box.item: type"]),  # type: ignore[valid-type]
        (Box, ["Box.item: type"]),
        (complex, ["result: complex"]),
        (Any, ["result: Any"]),
    ],
    ids=repr,
)
def test_what_the_converter_cannot_store_is_named(tp: Any, expected: list[str]) -> None:
    assert _problems(tp, "result") == expected


@attrs.frozen
class Loose:
    seq: Sequence[int]
    mapping: Mapping[str, int]
    later: Nowhere  # type: ignore[name-defined]  # noqa: F821 -- the point of the test


@attrs.frozen
class Category:
    name: str
    children: tuple[Category, ...] = ()


@attrs.frozen
class Empty:
    n: int = 0


@attrs.frozen(auto_exc=True)
class Declined(Exception):
    why: object


@attrs.frozen
class Order:
    total: Decimal
    placed: datetime


@attrs.frozen(auto_exc=True)
class OutOfStock(Exception):
    sku: complex


def test_abstract_collections_and_unresolvable_annotations_are_named() -> None:
    problems = codec.unsupported(Loose)
    assert [p.split(":")[0] for p in problems] == ["Loose.seq", "Loose.mapping", "Loose.later"]
    assert "declare list[X] or tuple[X, ...]" in problems[0]
    assert "cannot be resolved" in problems[2]


def test_a_recursive_record_is_storable() -> None:
    assert codec.unsupported(Category) == []
    tree = Category("a", (Category("b", (Category("c"),)),))
    assert codec.decode(codec.encode(tree), Category) == tree


def test_enum_values_must_be_str_or_int() -> None:
    class Shape(enum.Enum):
        POINT = (0, 0)

    assert codec.unsupported(Box[Shape]) == [
        "Box.item: enum Shape has members whose value is not a str or int: ['POINT']"
    ]


def test_an_actor_refuses_unstorable_state_and_events_all_at_once() -> None:
    @attrs.frozen
    class Bad:
        when: complex

    with pytest.raises(DeclarationError) as caught:
        akter.Actor("BadShop", state=Cart, events=[Bad])
    named = [p.split(" ", 2)[0] + " " + p.split(" ", 2)[1] for p in caught.value.problems]
    assert named == [*CART_PROBLEMS, "state type", "Bad.when: complex"]


def test_a_command_refuses_unstorable_payload_result_and_error_fields() -> None:
    shop = akter.Actor("CodecShop", state=Empty)

    def handler(turn: akter.Turn[Empty], cmd: Cart) -> complex:
        raise NotImplementedError

    with pytest.raises(DeclarationError) as caught:
        shop.command(errors=[Declined])(handler)
    problems = caught.value.problems
    assert [p.split(":")[0] for p in problems] == [
        *(p.split(":")[0] for p in CART_PROBLEMS),
        "result",
        "Declined.why",
    ]


def test_a_workflow_refuses_unstorable_input_output_errors_and_activity_results() -> None:
    shop = akter.Actor("CodecFlows", state=Empty)
    with pytest.raises(DeclarationError) as caught:
        shop.workflow("Bad", input=Cart, output=complex, errors=[OutOfStock])
    assert [p.split(":")[0] for p in caught.value.problems] == [
        *(p.split(":")[0] for p in CART_PROBLEMS),
        "output",
        "OutOfStock.sku",
    ]
    flow = shop.workflow("Good", input=Order, output=Decimal | None)
    with pytest.raises(DeclarationError, match=r"success: Any"):
        flow.activity("reserve", success=Any)
    with pytest.raises(DeclarationError, match=r"OutOfStock\.sku: complex"):
        flow.activity("release", errors=[OutOfStock])
    assert flow.activity("charge", success=tuple[Decimal, UUID]).success == tuple[Decimal, UUID]


# -- the manifest sees what the tag stores ---------------------------------------------------------


@attrs.frozen
class Coins:
    """``Cash`` under another name: the same fields."""

    amount: Decimal


def test_renaming_a_record_of_a_tagged_union_changes_its_fingerprint() -> None:
    from akter.workflow.core.manifest import fingerprint

    # stored as {"_type": "Cash", ...}: a runner that knows only Coins could not read it back
    assert fingerprint(Cash | Refund) != fingerprint(Coins | Refund)
    # X | None is stored untagged: the class name stays free, as for any record
    assert fingerprint(Cash | None) == fingerprint(Coins | None)
    assert fingerprint(Cash) == fingerprint(Coins)


# -- recorded exits and receipts of another shape ---------------------------------------------------


@attrs.frozen(auto_exc=True)
class Refused(Exception):
    reason: str


@pytest.mark.parametrize(
    "exit_",
    [
        None,
        [1, 2],
        "ok",
        {},
        {"winner": 0},
        {"ok": {"amount": 1.5}},
        {"ok": {"amount": "1", "zzz": 0}},
        {"error": "Refused"},
        {"error": {"type": "Refused"}},
        {"error": {"type": ["Refused"], "value": {}}},
        {"error": {"type": "Refused", "value": {"reason": 5}}},
        {"error": {"type": "Gone", "value": {}}},
        {"defect": {"type": 1, "message": "boom"}},
        {"defect": {"message": "boom"}},
    ],
    ids=repr,
)
def test_a_recorded_exit_of_another_shape_is_a_corrupt_record(exit_: Any) -> None:
    from akter.workflow.core import exits

    with pytest.raises(CorruptRecord):
        exits.decode(exit_, Cash, [Refused])


@laws
@given(json_values)
def test_any_recorded_exit_decodes_or_is_a_corrupt_record(exit_: Any) -> None:
    from akter.workflow.core import exits

    # whatever it is, it is an outcome or a CorruptRecord: nothing else escapes
    with contextlib.suppress(CorruptRecord):
        exits.decode(exit_, Cash, [Refused])


@pytest.mark.parametrize(
    "stored",
    [b"[]", b'{"ok":"1","error":{}}', b'{"ok":5}', b'{"error":{"type":"Refused","value":{}}}', b'"ok"'],
    ids=repr,
)
def test_a_receipt_of_another_shape_is_a_corrupt_record(stored: bytes) -> None:
    from akter.actor.kernel import decode_outcome

    Receipts = akter.Actor("Receipts", state=Empty)

    @Receipts.command(errors=[Refused])
    def pay(turn: akter.Turn[Empty], cmd: Empty) -> Decimal:
        raise NotImplementedError

    with pytest.raises(CorruptRecord):
        decode_outcome(pay, codec.frame(stored))
