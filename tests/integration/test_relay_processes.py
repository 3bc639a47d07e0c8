"""The relay as real processes (``akter relay``): crashes at the relay's and the kernel's fault
points, failover of bucket ownership after SIGKILL, a joining process, draining on SIGTERM, and
the command's exit codes. Every check reads the database through a second connection."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta

import pytest

from akter import testing
from akter.outbox.ownership import wanted
from tests.apps.relay_app import Sender, Stage, make_app, stage
from tests.apps.relay_procs import ROOT, TEST_SETTINGS, RelayProcess
from tests.integration.conftest import Peek
from tests.integration.workflow_support import until

pytestmark = pytest.mark.slow

OWNED = "SELECT count(*) FROM akter_relay_buckets WHERE owner IS NOT NULL AND expires_at > clock_timestamp()"
RECEIPTS = "SELECT count(*) FROM actor_receipts WHERE actor_type = 'Receiver'"

HEARTBEAT = float(TEST_SETTINGS["AKTER_RELAY_HEARTBEAT"])
LEASE = float(TEST_SETTINGS["AKTER_RELAY_OWNERSHIP_LEASE"])
# A hand-over leaves each moving bucket unowned until the gainer's next heartbeat, so a join
# settles within about two heartbeats; a member whose heartbeat ran later than its lease loses its
# buckets and takes them back a lease and two heartbeats later at most (docs/relay.md, "A
# hand-over leaves a gap"). On a loaded 2-core machine heartbeats run late: the bound allows
# that five times over.
SETTLES_WITHIN = 5 * (LEASE + 2 * HEARTBEAT)


@pytest.fixture
def relays() -> Iterator[list[RelayProcess]]:
    started: list[RelayProcess] = []
    yield started
    for proc in started:
        proc.close()


def _start(relays: list[RelayProcess], url: str, **kwargs: str) -> RelayProcess:
    proc = RelayProcess(url, **kwargs)
    relays.append(proc)
    return proc


async def _stage(url: str, *stages: tuple[str, Stage]) -> None:
    async with make_app(url).client() as client:
        for sender_id, order in stages:
            await client.actor(Sender, sender_id, tenant="acme").send(stage, order)


async def test_a_sender_killed_before_commit_stages_nothing(database_url: str, peek: Peek) -> None:
    died = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "tests.apps.relay_send", database_url, "s1", "r1"],
        env={**os.environ, "AKTER_FAULTS": "turn.before_commit=crash@s1", "PYTHONPATH": str(ROOT)},
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert died.returncode == -signal.SIGKILL, died.stderr
    assert await peek.count("actor_outbox") == 0
    assert await peek.count("actor_receipts") == 0


async def test_a_delivered_row_goes_with_its_receivers_commit(
    database_url: str, peek: Peek, relays: list[RelayProcess]
) -> None:
    await _stage(database_url, ("s1", Stage(target="r1", n=1)))
    first = _start(relays, database_url, faults="relay.before_delete=crash@r1")
    assert first.wait() == -signal.SIGKILL, first.output()
    # the handler succeeded: the row was deleted inside the receiver's turn, nothing is left to
    # redeliver although the relay died right after the commit
    assert await peek.value(RECEIPTS) == 1
    assert await peek.count("actor_outbox") == 0
    assert await peek.value("SELECT event_seq FROM actor_generations WHERE actor_type = 'Receiver'") == 1


async def test_relay_killed_before_the_delete_redelivers_once_after_the_lease(
    database_url: str, peek: Peek, clock: testing.Clock, relays: list[RelayProcess]
) -> None:
    # a declared failure commits only its receipt; the row is deleted after the turn
    await _stage(database_url, ("s1", Stage(target="r1", n=1, command="refuse")))
    first = _start(relays, database_url, faults="relay.before_delete=crash@r1")
    assert first.wait() == -signal.SIGKILL, first.output()
    # the receiver committed; the row is still there, claimed by the dead process
    assert await peek.value(RECEIPTS) == 1
    assert await peek.rows("SELECT attempts, due_at > akter_now() FROM actor_outbox") == [(1, True)]
    await clock.advance(timedelta(seconds=31))  # past the claim lease
    second = _start(relays, database_url)
    await until(lambda: peek.count("actor_outbox"), lambda n: n == 0, why="redelivery")
    assert await peek.value(RECEIPTS) == 1
    assert await peek.value("SELECT count(*) FROM actor_receipts WHERE failed") == 1
    assert second.terminate() == 0, second.output()


async def test_receiver_killed_before_commit_is_delivered_again_and_commits_once(
    database_url: str, peek: Peek, clock: testing.Clock, relays: list[RelayProcess]
) -> None:
    await _stage(database_url, ("s1", Stage(target="r1", n=1)))
    first = _start(relays, database_url, faults="turn.before_commit=crash@r1")
    assert first.wait() == -signal.SIGKILL, first.output()
    assert await peek.value(RECEIPTS) == 0
    assert await peek.value("SELECT attempts FROM actor_outbox") == 1
    await clock.advance(timedelta(seconds=31))
    second = _start(relays, database_url)
    await until(lambda: peek.count("actor_outbox"), lambda n: n == 0, why="redelivery")
    assert await peek.value(RECEIPTS) == 1
    assert await peek.value("SELECT event_seq FROM actor_generations WHERE actor_type = 'Receiver'") == 1
    assert second.terminate() == 0, second.output()


async def test_sigterm_releases_every_bucket_and_exits_0(
    database_url: str, peek: Peek, relays: list[RelayProcess]
) -> None:
    proc = _start(relays, database_url)
    await until(lambda: peek.value(OWNED), lambda n: n == 256, why="ownership")
    assert proc.terminate() == 0, proc.output()
    assert await peek.value("SELECT count(*) FROM akter_relay_buckets WHERE owner IS NOT NULL") == 0
    assert await peek.count("akter_relay_members") == 0
    assert "relay stopped" in proc.output()


async def test_three_relays_a_kill_and_a_join_deliver_every_intent_exactly_once(
    database_url: str, peek: Peek, relays: list[RelayProcess]
) -> None:
    settings = {"AKTER_RELAY_CLAIM_LEASE": "2"}
    trio = [_start(relays, database_url, **settings) for _ in range(3)]

    async def live_owners() -> int:
        return int(await peek.value(OWNED.replace("count(*)", "count(DISTINCT owner)")))

    await until(live_owners, lambda n: n == 3, why="three owners")
    total = 240
    orders = [(f"s{i % 40}", Stage(target=f"r{(i * 7) % 40}", n=i)) for i in range(total)]
    async with make_app(database_url).client() as client:

        async def send(chunk: list[tuple[str, Stage]]) -> None:
            await asyncio.gather(*(client.actor(Sender, s, tenant="acme").send(stage, o) for s, o in chunk))

        for start in range(0, total, 20):
            await send(orders[start : start + 20])
            if start == 80:
                assert trio[0].kill() == -signal.SIGKILL
            if start == 160:
                joiner = _start(relays, database_url, **settings)
    await until(lambda: peek.count("actor_outbox"), lambda n: n == 0, within=30, why="outbox drained")
    # Every bucket ends up owned by the live process rendezvous hashing gives it — the joiner
    # included, with its fair share. While the hand-over runs, buckets the old owners released
    # are owned by nobody until the joiner's next heartbeat: the state is awaited, not sampled.
    views = await until(
        lambda: _ownership(peek),
        lambda v: v[:3] == (3, 256, 0),
        within=SETTLES_WITHIN,
        why="ownership settled on the three live processes",
    )
    assert any(f":{joiner.pid}:" in member and share >= 30 for member, share in views[3]), views
    assert await peek.value(RECEIPTS) == total
    assert await peek.rows("SELECT count(*), count(DISTINCT value) FROM actor_events") == [(total, total)]
    assert (
        await peek.value("SELECT sum(event_seq) FROM actor_generations WHERE actor_type = 'Receiver'")
        == total
    )
    for proc in [*trio[1:], joiner]:
        assert proc.terminate() == 0, proc.output()


async def _ownership(peek: Peek) -> tuple[int, int, int, tuple[tuple[str, int], ...]]:
    """Live members, buckets under a live lease, how many of those the wrong member holds, and
    each live member's share."""
    members = [
        member
        for (member,) in await peek.rows(
            "SELECT member_id FROM akter_relay_members WHERE expires_at > clock_timestamp()"
        )
    ]
    owners = dict(
        await peek.rows(
            "SELECT bucket, owner FROM akter_relay_buckets"
            " WHERE owner IS NOT NULL AND expires_at > clock_timestamp()"
        )
    )
    rightful = {bucket: m for m in members for bucket in wanted(m, members)}
    misplaced = sum(1 for bucket, owner in owners.items() if owner != rightful.get(bucket))
    shares = tuple(sorted((m, sum(1 for o in owners.values() if o == m)) for m in members))
    return len(members), len(owners), misplaced, shares


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "akter.cli", *args],
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_cli_exit_codes(database_url: str) -> None:
    assert _cli("migrate", "--database-url", database_url).returncode == 0
    missing = _cli("relay", "tests.apps.nowhere:app", "--database-url", database_url)
    assert (missing.returncode, "cannot import" in missing.stderr) == (2, True)
    assert _cli("relay", "tests.apps.relay_app", "--database-url", database_url).returncode == 2
    assert _cli("relay", "tests.apps.relay_app:Sender", "--database-url", database_url).returncode == 2
    assert _cli("relay", "tests.apps.relay_app:app", "--concurrency", "0").returncode == 2
    # an unreachable database is no exit for a relay: it waits (tests/integration/test_relay_startup.py)
    assert _cli("migrate", "--database-url", "postgresql://nobody@127.0.0.1:1/x").returncode == 2
    assert "Exit codes" in _cli("--help").stdout
