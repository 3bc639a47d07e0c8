"""Laws of the identities (``akter.ids``) and the codec (``akter.codec``), checked by hypothesis.

These are the two places where a silent change corrupts data already stored: a routing key that
drifts sends an actor's rows to a different key, and a codec that stops round-tripping makes stored
state unreadable. So the properties are stated for all generated inputs, and one routing key is
pinned to its literal value."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import attrs
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from akter import codec
from akter.errors import CorruptRecord, InvalidActorId, InvalidCommandId, InvalidInput
from akter.ids import (
    MAX_ACTOR_ID_BYTES,
    MAX_ACTOR_TYPE_BYTES,
    MAX_TENANT_BYTES,
    ActorRef,
    CommandId,
    bucket_of,
    routing_key,
)

# Hypothesis' per-example deadline trips on a loaded CI machine for reasons unrelated to the
# laws; the suite's own per-test timeout still bounds a runaway test.
laws = settings(deadline=None)


# -- the codec ------------------------------------------------------------------------------------


@attrs.frozen
class Line:
    sku: str
    quantity: int
    note: str | None = None


@attrs.frozen
class Order:
    number: int
    placed_at: datetime
    lines: list[Line]
    tags: dict[str, str]
    gift: Line | None
    weight: float


finite_floats = st.floats(allow_nan=False, allow_infinity=False)
ZONES = st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))])
# naive datetimes are refused (InvalidInput): test_codec_types.py says so
datetimes = st.datetimes(timezones=ZONES)
lines = st.builds(Line, sku=st.text(), quantity=st.integers(), note=st.none() | st.text())
orders = st.builds(
    Order,
    number=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    placed_at=datetimes,
    lines=st.lists(lines, max_size=8),
    tags=st.dictionaries(st.text(), st.text(), max_size=8),
    gift=st.none() | lines,
    weight=finite_floats,
)
json_scalars = st.none() | st.booleans() | st.integers() | st.text() | finite_floats
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@laws
@given(orders)
def test_every_value_decodes_to_what_was_encoded(order: Order) -> None:
    stored = codec.encode(order)
    assert codec.decode(stored, Order) == order
    assert codec.encode(codec.decode(stored, Order)) == stored


@laws
@given(st.dictionaries(st.text(max_size=10), json_values, min_size=2, max_size=8), st.data())
def test_equal_dicts_give_equal_bytes_whatever_their_order(
    value: dict[str, object], data: st.DataObject
) -> None:
    keys = data.draw(st.permutations(list(value)).filter(lambda ks: ks != list(value)))
    reordered = {k: value[k] for k in keys}

    assert codec.canonical_json(reordered) == codec.canonical_json(value)
    assert codec.encode(reordered) == codec.encode(value)
    assert codec.digest(reordered) == codec.digest(value)


@laws
@given(st.binary(max_size=codec.COMPRESS_ABOVE))
def test_short_bodies_are_stored_raw_and_read_back(body: bytes) -> None:
    stored = codec.frame(body)
    assert stored[0] == codec.RAW
    assert codec.unframe(stored) == body


@laws
@given(st.binary(min_size=codec.COMPRESS_ABOVE + 1, max_size=20_000) | st.just(b"a" * 10_000))
def test_long_bodies_are_compressed_and_read_back(body: bytes) -> None:
    stored = codec.frame(body)
    assert stored[0] == codec.ZSTD
    assert codec.unframe(stored) == body


def test_a_repetitive_body_really_shrinks() -> None:
    assert len(codec.frame(b"akter " * 1000)) < 200


# The zstd frame magic, and the range of "skippable frame" magics, both little-endian.
_ZSTD_MAGICS = (bytes.fromhex("28b52ffd"), *(bytes([n, 0x2A, 0x4D, 0x18]) for n in range(0x50, 0x60)))


@laws
@given(st.binary(min_size=1).filter(lambda b: not b.startswith(_ZSTD_MAGICS)))
def test_a_zstd_header_over_garbage_is_a_corrupt_record(garbage: bytes) -> None:
    with pytest.raises(CorruptRecord):
        codec.unframe(bytes([codec.ZSTD]) + garbage)


@laws
@given(st.binary(min_size=codec.COMPRESS_ABOVE + 1, max_size=4000), st.data())
def test_a_truncated_compressed_value_is_a_corrupt_record(body: bytes, data: st.DataObject) -> None:
    stored = codec.frame(body)
    cut = data.draw(st.integers(min_value=1, max_value=len(stored) - 1))
    with pytest.raises(CorruptRecord):
        codec.unframe(stored[:cut])


@laws
@given(st.integers(min_value=2, max_value=255), st.binary())
def test_an_unknown_frame_header_is_a_corrupt_record(header: int, body: bytes) -> None:
    with pytest.raises(CorruptRecord):
        codec.unframe(bytes([header]) + body)


def test_empty_bytes_are_a_corrupt_record() -> None:
    with pytest.raises(CorruptRecord):
        codec.unframe(b"")


@pytest.mark.parametrize("body", [b"{not json", b"\xff\xfe", b""], ids=["not-json", "not-utf8", "empty"])
def test_a_raw_body_that_is_not_json_is_a_corrupt_record(body: bytes) -> None:
    with pytest.raises(CorruptRecord):
        codec.decode_primitive(bytes([codec.RAW]) + body)


def test_json_of_the_wrong_shape_is_a_corrupt_record() -> None:
    with pytest.raises(CorruptRecord, match="Order"):
        codec.decode(codec.encode({"number": "not a number"}), Order)


@pytest.mark.parametrize(
    "value",
    ["\ud800", {"note": "half a pair \udfff"}, {"\ud83d": 1}, Line(sku="\udc80", quantity=1)],
    ids=["str", "nested", "key", "attrs-field"],
)
def test_a_lone_surrogate_cannot_be_encoded_or_hashed(value: object) -> None:
    # Python strings may hold lone surrogates (from surrogateescape, or JSON "\ud800" escapes);
    # UTF-8 has no form for them, so they are refused as input rather than stored mangled.
    with pytest.raises(InvalidInput, match="surrogate"):
        codec.encode(value)
    with pytest.raises(InvalidInput, match="surrogate"):
        codec.digest(codec.to_primitive(value))


# -- routing keys ---------------------------------------------------------------------------------

names = st.text(max_size=40)


def test_the_routing_key_encoding_never_drifts() -> None:
    # Computed once with encoding v1 and pinned: rows already stored under this key must still
    # be found by every future akter. If this fails, the change needs a new encoding version.
    assert routing_key("acme", "Account", "alice") == 5609119533741952218
    assert bucket_of(5609119533741952218) == 77


@laws
@given(names, names, names)
def test_routing_keys_are_deterministic_signed_64_bit(tenant: str, actor_type: str, actor_id: str) -> None:
    key = routing_key(tenant, actor_type, actor_id)
    assert key == routing_key(tenant, actor_type, actor_id)
    assert -(2**63) <= key < 2**63
    assert -128 <= bucket_of(key) <= 127


@laws
@given(st.text(min_size=1, max_size=20).filter(lambda s: "\x00" not in s), names, names)
def test_an_actor_ref_carries_its_routing_key_and_bucket(tenant: str, actor_type: str, actor_id: str) -> None:
    assume(actor_type and actor_id and "\x00" not in actor_type + actor_id)
    ref = ActorRef(tenant=tenant, actor_type=actor_type, actor_id=actor_id)
    assert ref.routing_key == routing_key(tenant, actor_type, actor_id)
    assert ref.bucket == bucket_of(ref.routing_key)


@laws
@given(st.text(min_size=1, max_size=30), st.data())
def test_moving_a_boundary_between_parts_changes_the_key(joined: str, data: st.DataObject) -> None:
    # ("a", "bc") and ("ab", "c") concatenate alike; length prefixes keep them apart.
    cuts = st.tuples(st.integers(0, len(joined)), st.integers(0, len(joined))).map(sorted)
    i, j = data.draw(cuts)
    k, m = data.draw(cuts)
    assume((i, j) != (k, m))
    first = (joined[:i], joined[i:j], joined[j:])
    second = (joined[:k], joined[k:m], joined[m:])
    assert routing_key(*first) != routing_key(*second)


def test_the_key_tells_parts_apart_not_just_their_concatenation() -> None:
    assert routing_key("t", "a", "bc") != routing_key("t", "ab", "c")
    assert routing_key("ab", "c", "x") != routing_key("a", "bc", "x")


# -- command ids ----------------------------------------------------------------------------------

MS_2000, MS_2200 = 946_684_800_000, 7_258_118_400_000


@laws
@given(st.integers(MS_2000, MS_2200), st.integers(0, 10 * 365 * 86_400_000))
def test_a_minted_command_id_parses_back_to_itself(now_ms: int, window_ms: int) -> None:
    minted = CommandId.mint(now_ms, window_ms)
    text = str(minted)
    parsed = CommandId.parse(text)
    assert parsed == minted
    assert (parsed.issued_ms, parsed.expires_ms) == (now_ms, now_ms + window_ms)
    assert str(parsed) == text


def test_two_mints_at_the_same_instant_differ() -> None:
    assert CommandId.mint(MS_2000, 1000) != CommandId.mint(MS_2000, 1000)


NONCE = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    "text",
    [
        f"v2.1.2.{NONCE}",
        f"V1.1.2.{NONCE}",
        f"1.2.{NONCE}",
        "v1.1.2.0123456789abcdef0123456789abcdeg",
        f"v1.1.2.{NONCE.upper()}",
        f"v1.1.2.{NONCE}0",
        f"v1.1.2.{NONCE[:-1]}",
        f"v1.x.2.{NONCE}",
        f"v1.-1.2.{NONCE}",
        f"v1.2.1.{NONCE}",
        f"v1.1234567890123456.1234567890123457.{NONCE}",
        f" v1.1.2.{NONCE}",
        f"v1.1.2.{NONCE}\n",
        "",
        "v1." + "9" * 10_000,
    ],
    ids=[
        "wrong-version",
        "upper-version",
        "no-version",
        "non-hex",
        "upper-hex",
        "long-nonce",
        "short-nonce",
        "non-numeric",
        "negative",
        "expires-before-issued",
        "oversize-timestamps",
        "leading-space",
        "trailing-newline",
        "empty",
        "oversize",
    ],
)
def test_a_malformed_command_id_is_refused(text: str) -> None:
    with pytest.raises(InvalidCommandId):
        CommandId.parse(text)


@pytest.mark.parametrize("value", [None, 42, b"v1.1.2." + NONCE.encode(), ["v1"]], ids=repr)
def test_a_command_id_that_is_not_a_str_is_refused(value: object) -> None:
    with pytest.raises(InvalidCommandId, match="must be a str"):
        CommandId.parse(value)


def test_the_error_for_an_oversize_id_does_not_echo_it_whole() -> None:
    with pytest.raises(InvalidCommandId) as raised:
        CommandId.parse("x" * 10_000)
    assert len(str(raised.value)) < 300
    assert isinstance(raised.value, InvalidInput)


# -- actor references -----------------------------------------------------------------------------

LIMITS = {"tenant": MAX_TENANT_BYTES, "actor_type": MAX_ACTOR_TYPE_BYTES, "actor_id": MAX_ACTOR_ID_BYTES}


def ref_with(field: str, value: object) -> ActorRef:
    parts: dict[str, object] = {"tenant": "acme", "actor_type": "Account", "actor_id": "alice", field: value}
    return ActorRef(**parts)  # type: ignore[arg-type]  # ill-typed parts are what is tested


@pytest.mark.parametrize("field", LIMITS)
@pytest.mark.parametrize(
    ("value", "why"),
    [("", "empty"), ("a\x00b", "NUL"), (None, "str"), (7, "str"), (b"alice", "str"), ("\ud800", "UTF-8")],
    ids=["empty", "nul", "none", "int", "bytes", "lone-surrogate"],
)
def test_a_bad_part_is_refused(field: str, value: object, why: str) -> None:
    with pytest.raises(InvalidActorId, match=why):
        ref_with(field, value)


@pytest.mark.parametrize("field", LIMITS)
def test_limits_count_utf8_bytes_not_characters(field: str) -> None:
    limit = LIMITS[field]
    # "é" is two bytes: at the limit in bytes is accepted, one character more is refused even
    # though the character count is far below the limit.
    assert ref_with(field, "é" * (limit // 2)).routing_key
    with pytest.raises(InvalidActorId, match="bytes"):
        ref_with(field, "é" * (limit // 2) + "e")
    with pytest.raises(InvalidActorId, match="bytes"):
        ref_with(field, "€" * (limit // 3 + 1))


@laws
@given(st.sampled_from(list(LIMITS)), st.text(min_size=1, max_size=300))
def test_a_part_is_accepted_exactly_when_it_fits(field: str, value: str) -> None:
    fits = len(value.encode()) <= LIMITS[field] and "\x00" not in value
    if fits:
        assert getattr(ref_with(field, value), field) == value
    else:
        with pytest.raises(InvalidActorId):
            ref_with(field, value)


def test_equal_ids_of_two_tenants_are_two_actors() -> None:
    mine = ActorRef(tenant="acme", actor_type="Account", actor_id="alice")
    theirs = ActorRef(tenant="globex", actor_type="Account", actor_id="alice")
    assert mine != theirs
    assert mine.routing_key != theirs.routing_key
    assert mine == ActorRef(tenant="acme", actor_type="Account", actor_id="alice")
