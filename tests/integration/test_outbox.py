"""Intents staged in turns and delivered by the relay running in the test's process
(``app.relay()``): what reaches the receiver, when, under which id and caller, and what stays in
the sender's outbox. Rows are read through a second connection (``peek``); time moves with the
database clock, never with sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from returns.result import Failure, Success

import akter
from akter import testing
from akter.errors import InvalidTimerKey
from akter.ids import CommandId
from akter.outbox.ownership import ALL_BUCKETS, wanted
from akter.outbox.relay import Relay, RelaySettings
from tests.apps import relay_app
from tests.apps.relay_app import Ping, Receiver, Sender, Stage, receive, stage
from tests.integration.conftest import Peek

FAST = RelaySettings(
    heartbeat=timedelta(milliseconds=200),
    ownership_lease=timedelta(seconds=1),
    backoff_base=timedelta(seconds=1),
)


@pytest.fixture(autouse=True)
def _reset_receivers() -> None:
    relay_app.DELIVERIES.clear()
    relay_app.FLAKY["failures"] = 0


@pytest.fixture
async def app(database_url: str) -> AsyncIterator[akter.App]:
    app = relay_app.make_app(database_url)
    yield app
    await app.close()


async def _idle(relay: Relay) -> None:
    async with asyncio.timeout(20):
        await relay.idle()


def _delivered() -> list[int]:
    return sorted(n for _, _, n in relay_app.DELIVERIES)


async def test_a_committed_intent_is_delivered_once_as_a_system_command(app: akter.App, peek: Peek) -> None:
    async with app.client(caller=akter.User("alice")) as client, app.relay(FAST) as relay:
        gate = testing.pause("relay.before_delivery", match="r1")
        sender = client.actor(Sender, "s1", tenant="acme")
        assert await sender.send(stage, Stage(target="r1", n=7)) == Success(1)
        await gate.reached()
        intent_id = await peek.value("SELECT intent_id FROM actor_outbox")
        gate.release()
        await _idle(relay)
    caller = akter.System(source="actor", ref="acme/Sender/s1", on_behalf_of=akter.User("alice"))
    deliveries = relay_app.DELIVERIES
    assert deliveries == [(intent_id, caller, 7)]
    assert await peek.rows(
        "SELECT command_id, command, caller_key, failed FROM actor_receipts WHERE actor_type = 'Receiver'"
    ) == [(intent_id, "receive", "system:actor", False)]
    assert await peek.count("actor_outbox") == 0
    cid = CommandId.parse(intent_id)
    # the id is a command id issued on the sender's clock and valid for the retry window
    assert cid.expires_ms - cid.issued_ms == 24 * 3600 * 1000


async def test_declared_failure_or_defect_in_the_sender_stages_nothing(app: akter.App, peek: Peek) -> None:
    async with app.client() as client, app.relay(FAST) as relay:
        sender = client.actor(Sender, "s1", tenant="acme")
        outcome = await sender.send(stage, Stage(target="r1", n=1, fail=True))
        assert isinstance(outcome, Failure)
        with pytest.raises(akter.Defect, match="the sender has a bug"):
            await sender.send(stage, Stage(target="r1", n=2, explode=True))
        assert await peek.count("actor_outbox") == 0
        await _idle(relay)
    assert relay_app.DELIVERIES == []
    assert await peek.value("SELECT count(*) FROM actor_receipts WHERE actor_type = 'Receiver'") == 0


async def test_an_uncommitted_intent_is_invisible(app: akter.App, peek: Peek) -> None:
    async with app.client() as client:
        gate = testing.pause("turn.before_commit", match="s1")
        task = asyncio.create_task(client.actor(Sender, "s1", tenant="acme").send(stage, Stage(target="r1")))
        await gate.reached()
        assert await peek.count("actor_outbox") == 0
        gate.release()
        await task
    assert await peek.count("actor_outbox") == 1


async def test_timers_fire_only_when_due(app: akter.App, peek: Peek, clock: testing.Clock) -> None:
    async with app.client() as client, app.relay(FAST) as relay:
        sender = client.actor(Sender, "s1", tenant="acme")
        now = await clock.now()
        await sender.send(stage, Stage(target="r1", n=1, after_ms=3_600_000))
        await sender.send(stage, Stage(target="r1", n=2, at=now + timedelta(hours=2)))
        await _idle(relay)
        assert _delivered() == []
        await clock.advance(timedelta(minutes=59))
        await _idle(relay)
        assert _delivered() == []
        await clock.advance(timedelta(minutes=2))
        await _idle(relay)
        assert _delivered() == [1]
        await clock.advance(timedelta(hours=1))
        await _idle(relay)
        assert _delivered() == [1, 2]
    assert {c.source for _, c, _ in relay_app.DELIVERIES if isinstance(c, akter.System)} == {"timer"}
    assert await peek.count("actor_outbox") == 0


async def test_a_keyed_timer_replaced_twice_delivers_only_the_last_body(
    app: akter.App, peek: Peek, clock: testing.Clock
) -> None:
    async with app.client() as client, app.relay(FAST) as relay:
        sender = client.actor(Sender, "s1", tenant="acme")
        for n in (1, 2, 3):
            await sender.send(stage, Stage(target="r1", n=n, after_ms=60_000 * n, key="remind"))
        assert await peek.rows("SELECT timer_key, attempts FROM actor_outbox") == [("remind", 0)]
        await clock.advance(timedelta(hours=1))
        await _idle(relay)
    assert _delivered() == [3]
    assert await peek.value("SELECT count(*) FROM actor_receipts WHERE actor_type = 'Receiver'") == 1
    assert await peek.count("actor_outbox") == 0


async def test_keys_are_per_sender(app: akter.App, peek: Peek) -> None:
    async with app.client() as client:
        for sender_id in ("s1", "s2"):
            await client.actor(Sender, sender_id, tenant="acme").send(
                stage, Stage(target="r1", after_ms=60_000, key="k")
            )
        await client.actor(Sender, "s1", tenant="globex").send(
            stage, Stage(target="r1", after_ms=60_000, key="k")
        )
    assert await peek.count("actor_outbox") == 3


async def test_a_cancel_rolled_back_keeps_the_timer_and_a_committed_cancel_removes_it(
    app: akter.App, peek: Peek, clock: testing.Clock
) -> None:
    async with app.client() as client, app.relay(FAST) as relay:
        sender = client.actor(Sender, "s1", tenant="acme")
        await sender.send(stage, Stage(target="r1", n=1, after_ms=60_000, key="k"))
        assert isinstance(
            await sender.send(stage, Stage(target="r1", count=0, cancel="k", fail=True)), Failure
        )
        with pytest.raises(akter.Defect):
            await sender.send(stage, Stage(target="r1", count=0, cancel="k", explode=True))
        assert await peek.count("actor_outbox") == 1
        await sender.send(stage, Stage(target="r1", count=0, cancel="k"))
        assert await peek.count("actor_outbox") == 0
        # cancelling a key with nothing pending is a no-op
        await sender.send(stage, Stage(target="r1", count=0, cancel="k"))
        await clock.advance(timedelta(hours=1))
        await _idle(relay)
    assert relay_app.DELIVERIES == []


async def test_a_cancel_then_send_of_one_key_in_one_turn_keeps_the_send(app: akter.App, peek: Peek) -> None:
    async with app.client() as client:
        sender = client.actor(Sender, "s1", tenant="acme")
        await sender.send(stage, Stage(target="r1", n=1, after_ms=60_000, key="k"))
        await sender.send(stage, Stage(target="r1", n=2, after_ms=60_000, key="k", cancel="k"))
    assert await peek.count("actor_outbox") == 1


async def test_a_receiver_defect_backs_off_and_is_retried(
    app: akter.App, peek: Peek, clock: testing.Clock
) -> None:
    relay_app.FLAKY["failures"] = 1
    async with app.client() as client, app.relay(FAST) as relay:
        await client.actor(Sender, "s1", tenant="acme").send(stage, Stage(target="r1", n=5, command="flaky"))
        await _idle(relay)
        [(attempts, error, waits)] = await peek.rows(
            "SELECT attempts, last_error, due_at > akter_now() FROM actor_outbox"
        )
        assert (attempts, waits) == (1, True)
        assert "RuntimeError: flaky receiver failed on 5" in error
        await _idle(relay)  # backing off: not retried in a loop
        assert len(relay_app.DELIVERIES) == 1
        await clock.advance(timedelta(seconds=2))
        await _idle(relay)
    assert len(relay_app.DELIVERIES) == 2
    assert relay_app.DELIVERIES[0][0] == relay_app.DELIVERIES[1][0]  # same intent id both times
    assert await peek.count("actor_outbox") == 0
    assert await peek.value("SELECT count(*) FROM actor_receipts WHERE actor_type = 'Receiver'") == 1


async def test_a_declared_failure_of_the_receiver_is_a_delivery(app: akter.App, peek: Peek) -> None:
    async with app.client() as client, app.relay(FAST) as relay:
        await client.actor(Sender, "s1", tenant="acme").send(stage, Stage(target="r1", command="refuse"))
        await _idle(relay)
    assert await peek.rows("SELECT failed FROM actor_receipts WHERE actor_type = 'Receiver'") == [(True,)]
    assert await peek.count("actor_outbox") == 0


async def test_poison_rows_back_off_visibly_and_do_not_block_others(app: akter.App, peek: Peek) -> None:
    async with app.client() as client:
        for i in range(6):
            await client.actor(Sender, f"s{i}", tenant="acme").send(stage, Stage(target=f"r{i}", n=i))
    await peek.rows("UPDATE actor_outbox SET payload = '\\x01deadbeef' WHERE actor_id = 's0' RETURNING 1")
    await peek.rows("UPDATE actor_outbox SET command = 'gone' WHERE actor_id = 's1' RETURNING 1")
    await peek.rows("UPDATE actor_outbox SET target_type = 'Gone' WHERE actor_id = 's2' RETURNING 1")
    async with app.relay(FAST) as relay:
        await _idle(relay)
        await _idle(relay)
    assert _delivered() == [3, 4, 5]
    rows = await peek.rows("SELECT actor_id, attempts, last_error FROM actor_outbox ORDER BY actor_id")
    assert [(a, n) for a, n, _ in rows] == [("s0", 1), ("s1", 1), ("s2", 1)]
    assert "CorruptRecord" in rows[0][2]
    assert "UndeliverableIntent" in rows[1][2]
    assert "'gone'" in rows[1][2]
    assert "no actor type 'Gone'" in rows[2][2]


async def test_a_keyed_replacement_during_delivery_is_not_deleted(
    app: akter.App, peek: Peek, clock: testing.Clock
) -> None:
    async with app.client() as client, app.relay(FAST) as relay:
        sender = client.actor(Sender, "s1", tenant="acme")
        await sender.send(stage, Stage(target="r1", n=1, key="k"))
        gate = testing.pause("relay.before_delete", match="r1")
        await gate.reached()  # the old body is delivered, its row not yet deleted
        await sender.send(stage, Stage(target="r1", n=2, key="k", after_ms=60_000))
        gate.release()
        await _idle(relay)
        assert await peek.rows("SELECT attempts, claim IS NULL FROM actor_outbox") == [(0, True)]
        await clock.advance(timedelta(minutes=2))
        await _idle(relay)
    assert _delivered() == [1, 2]
    assert await peek.count("actor_outbox") == 0


async def test_a_chain_of_intents_runs_to_quiet(app: akter.App, peek: Peek) -> None:
    Relayer = akter.Actor("Relayer", state=relay_app.SenderState)

    @Relayer.command
    def hop(turn: akter.Turn[relay_app.SenderState], ping: Ping) -> None:
        if ping.n > 0:
            turn.send(f"h{ping.n - 1}", hop, Ping(ping.n - 1))
        else:
            turn.send("end", receive, Ping(99))

    chain = akter.App([Relayer, Receiver], database_url=app.database_url)
    async with chain.client() as client, chain.relay(FAST) as relay:
        await client.actor(Relayer, "h5", tenant="acme").send(hop, Ping(5))
        await _idle(relay)
    assert _delivered() == [99]
    assert await peek.count("actor_outbox") == 0


async def test_bad_sends_fail_in_the_handler_and_stage_nothing(app: akter.App, peek: Peek) -> None:
    Bad = akter.Actor("Bad", state=relay_app.SenderState)

    @Bad.command
    def foreign(turn: akter.Turn[relay_app.SenderState], ping: Ping) -> None:
        turn.send(akter.ActorRef("globex", "Receiver", "r1"), receive, ping)

    @Bad.command
    def reserved(turn: akter.Turn[relay_app.SenderState], ping: Ping) -> None:
        turn.send("r1", receive, ping, key="wf:123")

    @Bad.command
    def oversized(turn: akter.Turn[relay_app.SenderState], ping: Ping) -> None:
        turn.send("r1", receive, ping, key="é" * 101)

    @Bad.command
    def both(turn: akter.Turn[relay_app.SenderState], ping: Ping) -> None:
        turn.send("r1", receive, ping, after=timedelta(1), at=turn.now)

    bad = akter.App([Bad, Receiver], database_url=app.database_url)
    async with bad.client() as client:
        handle = client.actor(Bad, "b", tenant="acme")
        for command, cause in [
            (foreign, akter.InvalidInput),
            (reserved, InvalidTimerKey),
            (oversized, InvalidTimerKey),
            (both, akter.InvalidInput),
        ]:
            with pytest.raises(akter.Defect) as info:
                await handle.send(command, Ping(1))
            assert isinstance(info.value.__cause__, cause), command
    assert await peek.count("actor_outbox") == 0


async def test_one_in_process_relay_owns_every_bucket_and_releases_them(app: akter.App, peek: Peek) -> None:
    async with app.relay(FAST) as relay:
        await _idle(relay)
        assert relay.owned() == frozenset(ALL_BUCKETS)
        assert (
            await peek.value(
                "SELECT count(*) FROM akter_relay_buckets"
                " WHERE owner = %s AND expires_at > clock_timestamp()",
                relay.member,
            )
            == 256
        )
    assert await peek.value("SELECT count(*) FROM akter_relay_buckets WHERE owner IS NOT NULL") == 0
    assert await peek.count("akter_relay_members") == 0


def test_rendezvous_ownership_partitions_fairly_and_moves_little() -> None:
    three = ["a", "b", "c"]
    shares = {m: wanted(m, three) for m in three}
    assert set().union(*shares.values()) == set(ALL_BUCKETS)
    assert sum(len(s) for s in shares.values()) == 256
    assert all(60 <= len(s) <= 110 for s in shares.values()), {m: len(s) for m, s in shares.items()}
    four = [*three, "d"]
    moved = {m: shares[m] - wanted(m, four) for m in three}
    # a joiner takes buckets from the others; nobody gains buckets from anyone but the leaver
    assert all(wanted(m, four) <= shares[m] for m in three)
    assert sum(len(s) for s in moved.values()) == len(wanted("d", four))
    assert wanted("z", three) == frozenset()


async def test_the_relay_survives_its_connections_being_killed(app: akter.App, peek: Peek) -> None:
    async with app.client() as client, app.relay(FAST) as relay:
        await _idle(relay)
        # what a database restart looks like from here: every session of this database ends
        await peek.rows(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        await client.actor(Sender, "s1", tenant="acme").send(stage, Stage(target="r1", n=1))
        await _idle(relay)
        assert relay.owned() == frozenset(ALL_BUCKETS)
    assert _delivered() == [1]
    assert await peek.count("actor_outbox") == 0


async def test_stop_drains_a_delivery_in_flight(app: akter.App, peek: Peek) -> None:
    async with app.client() as client, app.relay(FAST) as relay:
        gate = testing.pause("relay.before_delivery", match="r1")
        await client.actor(Sender, "s1", tenant="acme").send(stage, Stage(target="r1", n=1))
        await gate.reached()
        stopping = asyncio.create_task(relay.stop())
        gate.release()
        await stopping
        assert _delivered() == [1]
        assert await peek.count("actor_outbox") == 0
        assert await peek.value("SELECT count(*) FROM akter_relay_buckets WHERE owner IS NOT NULL") == 0
