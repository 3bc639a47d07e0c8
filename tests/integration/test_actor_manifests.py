"""Changing an actor type's state, events or command payloads is checked like changing a
workflow (issue 9): ``akter workflows check``, ``akter relay``'s start-up and an App opening its
runtime refuse code that would misread stored data, with the grouped report and the number of
stored rows affected; additive changes pass; a declared upgrade reads old states and writes
them back in the new shape.

``tests.apps.cart``'s ``before`` code stores two carts (three ``Added`` events) and a shopper
whose ``add`` to a cart is staged a day ahead (one undelivered intent). The refusal tests share
one such database (module scope: they change nothing but manifests, which they put back); the
tests that run turns get their own.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result
from psycopg import sql
from returns.result import Success

import akter
from akter import codec
from akter.actor import manifest as actor_manifest
from akter.cli import load_app, main
from akter.store.database import with_database
from tests.apps import cart
from tests.integration.conftest import Peek
from tests.integration.test_deploy_check import settle

ROOT = Path(__file__).resolve().parents[2]
STATES = "SELECT actor_id, state, shape FROM actor_state WHERE actor_type = 'Cart' ORDER BY actor_id"
MANIFESTS = "SELECT actor_type, manifest_hash, manifest FROM actor_manifests ORDER BY 1, 2"

UPGRADE_HINT = (
    "declare an upgrade from the stored shape (akter.Actor(..., upgrade=akter.Upgrade(OldState, "
    "lambda old: NewState(...))), the old type kept under another name), or keep the state type as it "
    "was (a new field needs a default)"
)


@asynccontextmanager
async def peeking(url: str) -> AsyncIterator[Peek]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        yield Peek(conn)


async def store_before(url: str) -> None:
    """What ``before`` stores: carts c1 (apple, pear) and c2 (fig), three ``Added`` events, and
    shopper s1's ``add`` of kiwi to c1, due in a day."""
    app = cart.make_app("before", url)
    carts, shoppers = cart.VARIANTS["before"]
    add, remind = carts.commands["add"], shoppers.commands["remind"]
    async with app.client() as client:
        c1, c2 = client.actor(carts, "c1", tenant="acme"), client.actor(carts, "c2", tenant="acme")
        assert await c1.send(add, cart.Add(item="apple")) == Success(1)
        assert await c1.send(add, cart.Add(item="pear")) == Success(2)
        assert await c2.send(add, cart.Add(item="fig")) == Success(1)
        await client.actor(shoppers, "s1", tenant="acme").send(remind, cart.Remind(cart="c1", item="kiwi"))


@pytest.fixture(scope="module")
def stored(admin_url: str, template_database: str) -> Iterator[str]:
    """The URL of a database holding what ``before`` stores."""
    name = f"akter_t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_database)
            )
        )
    try:
        url = with_database(admin_url, name)
        asyncio.run(store_before(url))
        yield url
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
async def restored(stored: str) -> AsyncIterator[str]:
    """``stored``, with the manifests a test's check accepted taken out again afterwards."""
    async with peeking(stored) as peek:
        before = await peek.rows(MANIFESTS)
        yield stored
        await peek.rows(
            "DELETE FROM actor_manifests WHERE manifest_hash <> ALL(%s) RETURNING 1", [r[1] for r in before]
        )
        assert await peek.rows(MANIFESTS) == before


async def cli(*args: str) -> Result:
    # CliRunner runs the command in this process; asyncio.run inside it needs a thread of its own.
    return await asyncio.to_thread(CliRunner().invoke, main, list(args))


def refused(*groups: str) -> str:
    return "refused: this code would misread the stored data of 1 actor type\n\nactor type Cart\n" + "".join(
        groups
    )


RENAMED = (
    "  state\n"
    "    - field 'items' is no longer declared (renamed to 'lines'?), so its stored values would be "
    "dropped: 2 stored states\n"
    f"      what to do: {UPGRADE_HINT}\n"
)

#: variant → the report of its check against what ``before`` stored
REFUSALS: dict[str, str] = {
    "renamed": refused(RENAMED),
    "renamed_required": refused(
        RENAMED,
        "    - field 'lines' was added without a default, so the stored values lack it: 2 stored states\n"
        f"      what to do: {UPGRADE_HINT}\n",
    ),
    "retyped": refused(
        "  state\n"
        "    - field 'items' changed type from tuple[str, ...] to tuple[int, ...]: 2 stored states\n"
        f"      what to do: {UPGRADE_HINT}\n"
    ),
    "event_removed": refused(
        "  event type Added\n"
        "    - the event type is no longer declared: 3 stored events\n"
        "      what to do: keep the event type declared: stored events are history, and waits read them\n"
    ),
    "event_changed": refused(
        "  event type Added\n"
        "    - field 'qty' was added without a default, so the stored values lack it: 3 stored events\n"
        "      what to do: keep the event type as it was (a new field needs a default); declare a new event "
        "type, under another class name, for the new shape\n"
    ),
    "payload_changed": refused(
        "  command add\n"
        "    - field 'qty' of its payload was added without a default, so the stored values lack it: "
        "1 undelivered intent\n"
        "      what to do: keep the command's payload type as it was (a new field needs a default) until "
        "these intents are delivered, or declare a new command for the new payload\n"
    ),
}


def test_a_renamed_state_field_without_an_upgrade_is_refused_by_the_check_process(stored: str) -> None:
    # the real command, in its own process, as a deploy pipeline runs it
    done = subprocess.run(
        [sys.executable, "-m", "akter.cli", "workflows", "check", "tests.apps.cart:renamed",
         "--database-url", stored],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (1, REFUSALS["renamed"]), done.stderr


@pytest.mark.parametrize("variant", list(REFUSALS))
async def test_a_change_that_would_misread_stored_data_is_refused_with_counts(
    variant: str, restored: str
) -> None:
    url = restored
    async with peeking(url) as peek:
        states = await peek.rows(STATES)
        checked = await cli("workflows", "check", f"tests.apps.cart:{variant}", "--database-url", url)
        assert (checked.exit_code, checked.stdout) == (1, REFUSALS[variant]), checked.output
        as_json = await cli(
            "workflows", "check", f"tests.apps.cart:{variant}", "--json", "--database-url", url
        )
        assert as_json.exit_code == 1
        data = json.loads(as_json.stdout)
        assert (data["compatible"], data["refusals"], data["open_executions"]) == (False, [], 0)
        messages = [f"    - {r['message']}: " for r in data["actor_refusals"] if r["actor_type"] == "Cart"]
        assert all(m in REFUSALS[variant] for m in messages)
        assert {r["rows"] for r in data["actor_refusals"]} <= {1, 2, 3}
        relay = await cli("relay", f"tests.apps.cart:{variant}", "--database-url", url)
        assert (relay.exit_code, relay.stderr) == (1, REFUSALS[variant]), relay.output
        assert await peek.value("SELECT count(*) FROM akter_relay_members") == 0  # it never started
        # nothing was read or written on the way
        assert await peek.rows(STATES) == states


async def test_the_json_report_names_reason_field_rows_and_what_to_do(restored: str) -> None:
    checked = await cli("workflows", "check", "tests.apps.cart:renamed", "--json", "--database-url", restored)
    assert json.loads(checked.stdout)["actor_refusals"] == [
        {
            "actor_type": "Cart",
            "subject": "state",
            "name": None,
            "reason": "state_changed",
            "field": "items",
            "message": "field 'items' is no longer declared (renamed to 'lines'?), so its stored values "
            "would be dropped",
            "rows": 2,
            "open_waits": 0,
            "what_to_do": UPGRADE_HINT,
        }
    ]


async def test_an_event_type_changed_under_an_open_wait_is_refused_for_the_wait_and_the_events(
    database_url: str, peek: Peek
) -> None:
    app = cart.make_app("waiting", database_url)
    carts = cart.VARIANTS["waiting"][0]
    async with app.relay() as relay, app.client() as client:
        c1 = client.actor(carts, "c1", tenant="acme")
        await c1.send(carts.commands["add"], cart.Add(item="apple"))
        await c1.start(carts.workflows["Checkout"], cart.Show())
        await settle(app, relay)
    pending = "SELECT count(*) FROM actor_workflow_step WHERE kind = 'wait' AND exit IS NULL"
    assert await peek.value(pending) == 1
    url, app_path = database_url, "tests.apps.cart:waiting_event_changed"
    checked = await cli("workflows", "check", app_path, "--database-url", url)
    assert checked.exit_code == 1, checked.output
    # the workflow check refuses the recorded wait, the actor check the stored event under it
    assert "    - the result schema of recorded step 'added' changed: 1 open execution" in checked.stdout
    assert checked.stdout.endswith(
        "\n\nrefused: this code would misread the stored data of 1 actor type\n"
        "\n"
        "actor type Cart\n"
        "  event type Added\n"
        "    - field 'qty' was added without a default, so the stored values lack it: 1 stored event, "
        "1 open wait\n"
        "      what to do: keep the event type as it was (a new field needs a default); declare a new event "
        "type, under another class name, for the new shape\n"
    )


async def test_an_app_that_would_misread_stored_data_refuses_to_open_and_writes_nothing(stored: str) -> None:
    app = cart.make_app("renamed", stored)
    async with peeking(stored) as peek:
        states, manifests = await peek.rows(STATES), await peek.rows(MANIFESTS)
        receipts = await peek.count("actor_receipts")
        with pytest.raises(akter.IncompatibleStoredData) as refusal:
            async with app.client():
                pytest.fail("the App opened")
        assert str(refusal.value) == (
            "this App's actor types would misread data already stored in the database:\n"
            + REFUSALS["renamed"].rstrip("\n")
        )
        assert [r.code for r in refusal.value.refusals] == ["state_changed"]
        assert await peek.rows(STATES) == states
        assert await peek.rows(MANIFESTS) == manifests
        assert await peek.count("actor_receipts") == receipts


@pytest.mark.parametrize(
    ("variant", "says"),
    [
        ("additive", "2 stored states will be read with new fields at their defaults"),
        ("upgraded", "2 stored states of an older shape will be upgraded when read"),
        ("chained", "2 stored states of an older shape will be upgraded when read"),
        ("before", None),
    ],
)
async def test_compatible_changes_pass_and_their_manifests_are_stored(
    variant: str, says: str | None, restored: str
) -> None:
    app = load_app(f"tests.apps.cart:{variant}")
    checked = await cli("workflows", "check", f"tests.apps.cart:{variant}", "--database-url", restored)
    changed = "" if says is None else f"actor type Cart: {says}\n"
    assert (checked.exit_code, checked.stdout) == (
        0,
        "compatible: 0 open executions (0 on this code's manifests, 0 checked against their start "
        f"manifests)\n{changed}",
    ), checked.output
    async with peeking(restored) as peek:
        for actor in app.actors.values():
            m, digest = actor_manifest.of(actor)
            assert await peek.value(
                "SELECT manifest FROM actor_manifests WHERE actor_type = %s AND manifest_hash = %s",
                actor.name, digest,
            ) == m  # fmt: skip


async def test_an_event_type_may_go_when_no_event_of_it_is_stored(database_url: str, peek: Peek) -> None:
    carts = cart.VARIANTS["before"][0]
    async with cart.make_app("before", database_url).client() as client:
        await client.actor(carts, "c1", tenant="acme").send(carts.commands["fill"], cart.Fill(items=("a",)))
    assert await peek.count("actor_events") == 0
    checked = await cli("workflows", "check", "tests.apps.cart:event_removed", "--database-url", database_url)
    assert checked.exit_code == 0, checked.output
    async with cart.make_app("event_removed", database_url).client():
        pass  # opens


async def test_an_additive_change_reads_the_old_states_with_the_new_field_at_its_default(
    database_url: str, peek: Peek
) -> None:
    await store_before(database_url)
    carts = cart.VARIANTS["additive"][0]
    async with cart.make_app("additive", database_url).client() as client:
        c1 = client.actor(carts, "c1", tenant="acme")
        assert await c1.send(carts.commands["add"], cart.Add(item="plum")) == Success(3)
    state = await peek.value("SELECT state FROM actor_state WHERE actor_id = 'c1'")
    assert codec.decode_primitive(state) == {"items": ["apple", "pear", "plum"], "note": ""}


def shape_of(tp: type) -> str:
    from akter.fingerprint import fingerprint, shape

    return shape(fingerprint(tp))


async def test_an_upgrade_reads_old_states_upgraded_and_writes_them_back_in_the_new_shape(
    database_url: str, peek: Peek
) -> None:
    await store_before(database_url)
    assert await peek.rows(STATES) == [
        ("c1", codec.frame(b'{"items":["apple","pear"]}'), shape_of(cart.Cart)),
        ("c2", codec.frame(b'{"items":["fig"]}'), shape_of(cart.Cart)),
    ]
    checked = await cli("workflows", "check", "tests.apps.cart:upgraded", "--database-url", database_url)
    assert checked.exit_code == 0, checked.output
    carts = cart.VARIANTS["upgraded"][0]
    async with cart.make_app("upgraded", database_url).client() as client:
        c1 = client.actor(carts, "c1", tenant="acme")
        # a turn that only reads: the state it read was upgraded, and is written back so
        assert await c1.send(carts.commands["show"], cart.Show()) == Success(["apple", "pear"])
        assert (await peek.rows(STATES))[0] == (
            "c1",
            codec.frame(b'{"lines":["apple","pear"]}'),
            shape_of(cart.CartLines),
        )
        assert await c1.send(carts.commands["add"], cart.Add(item="plum")) == Success(3)
    assert await peek.rows(STATES) == [
        ("c1", codec.frame(b'{"lines":["apple","pear","plum"]}'), shape_of(cart.CartLines)),
        ("c2", codec.frame(b'{"items":["fig"]}'), shape_of(cart.Cart)),  # untouched: still the old shape
    ]
    # the next deploy upgrades twice: from what before stored and from what upgraded stored
    checked = await cli("workflows", "check", "tests.apps.cart:chained", "--database-url", database_url)
    assert checked.exit_code == 0, checked.output
    carts = cart.VARIANTS["chained"][0]
    async with cart.make_app("chained", database_url).client() as client:
        for actor_id, items in (("c1", ["apple", "pear", "plum"]), ("c2", ["fig"])):
            shown = await client.actor(carts, actor_id, tenant="acme").send(
                carts.commands["show"], cart.Show()
            )
            assert shown == Success(items)
    assert [
        (actor_id, codec.decode_primitive(state), shape) for actor_id, state, shape in await peek.rows(STATES)
    ] == [
        ("c1", {"lines": [{"sku": s, "qty": 1} for s in ("apple", "pear", "plum")]}, shape_of(cart.CartV3)),
        ("c2", {"lines": [{"sku": "fig", "qty": 1}]}, shape_of(cart.CartV3)),
    ]


async def test_a_state_is_never_stored_without_its_shape(database_url: str, peek: Peek) -> None:
    await store_before(database_url)
    with pytest.raises(psycopg.errors.NotNullViolation):
        await peek.rows("UPDATE actor_state SET shape = NULL WHERE actor_id = 'c2' RETURNING 1")
    assert (await peek.rows(STATES))[1] == ("c2", codec.frame(b'{"items":["fig"]}'), shape_of(cart.Cart))


async def test_an_app_opening_a_database_stores_its_actor_manifests(database_url: str, peek: Peek) -> None:
    app = cart.make_app("before", database_url)
    async with app.client():
        pass
    assert await peek.rows(MANIFESTS) == sorted(
        (a.name, actor_manifest.of(a)[1], actor_manifest.of(a)[0]) for a in app.actors.values()
    )
