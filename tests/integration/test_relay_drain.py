"""A relay's drain on SIGTERM (and on leaving ``app.relay()``): the activity in flight finishes and
is recorded, nothing new starts, the buckets go at once, the next relay resumes the execution
without waiting out a lease; a drain timeout and a second signal abandon the work as a crash
would. Real ``akter relay`` processes; the activity blocks on a file the test creates
(``tests/apps/drain_app.py``), and every check reads the database through a second connection.

Also: ``akter relay`` reports the database gauges, as ``app.relay()`` does."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from returns.result import Success

import akter
from akter import testing
from akter.ids import ActorRef
from akter.outbox.relay import RelaySettings
from tests.apps import drain_app
from tests.apps.drain_app import Bench, Chore, Shift
from tests.apps.relay_procs import RelayProcess
from tests.integration.conftest import Peek
from tests.integration.workflow_support import until

pytestmark = pytest.mark.slow

APP = "tests.apps.drain_app:app"
OWNED = (
    "SELECT bucket, owner FROM akter_relay_buckets"
    " WHERE owner IS NOT NULL AND expires_at > clock_timestamp() ORDER BY bucket"
)
STEP = "SELECT exit IS NOT NULL FROM actor_workflow_step WHERE step = %s"
#: the execution's timer is due now: the next owner resumes it at once, not after a lease
TIMER_DUE_NOW = "SELECT due_at <= akter_now() FROM actor_outbox WHERE timer_key = 'wf:' || %s"
BUCKET = ActorRef("acme", Bench.name, "b1").bucket


@pytest.fixture
def barrier(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AKTER_TEST_DRAIN_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def relays(database_url: str, barrier: Path) -> Iterator[Callable[..., RelayProcess]]:
    started: list[RelayProcess] = []

    def start(*args: str, app: str = APP, **settings: str) -> RelayProcess:
        proc = RelayProcess(database_url, app=app, args=args, AKTER_TEST_DRAIN_DIR=str(barrier), **settings)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.close()


@pytest.fixture
async def client(database_url: str) -> AsyncIterator[Any]:
    async with drain_app.make_app(database_url).client() as c:
        yield c


def lines(barrier: Path, name: str) -> list[str]:
    path = barrier / name
    return path.read_text().splitlines() if path.exists() else []


async def in_file(barrier: Path, name: str, count: int = 1) -> None:
    await until(lambda: asyncio.sleep(0, lines(barrier, name)), lambda found: len(found) >= count)


async def logged(proc: RelayProcess, text: str) -> None:
    await until(lambda: asyncio.sleep(0, proc.output()), lambda out: text in out)


async def owned(peek: Peek) -> list[tuple[int, str]]:
    return await peek.rows(OWNED)


async def exited(proc: RelayProcess) -> int:
    return await asyncio.to_thread(proc.wait, 60)


async def start(client: Any, kind: str) -> Any:
    return await client.actor(Bench, "b1", tenant="acme").start(Shift, Chore("c1", kind=kind))


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_sigterm_lets_the_running_activity_finish_and_the_next_relay_resumes_at_once(
    kind: str, barrier: Path, peek: Peek, client: Any, relays: Callable[..., RelayProcess]
) -> None:
    first = relays()
    await until(lambda: owned(peek), lambda rows: len(rows) == 256)
    run = await start(client, kind)
    await in_file(barrier, "runs")
    first.proc.send_signal(signal.SIGTERM)
    # draining: out of the member set, every bucket released but the one whose pass still runs
    held = await until(lambda: owned(peek), lambda rows: [b for b, _ in rows] == [BUCKET])
    assert f":{first.pid}:" in held[0][1]
    assert await peek.count("akter_relay_members") == 0
    assert first.proc.poll() is None, first.output()
    assert await peek.value(STEP, "blocking") is False
    assert "in_flight=1 deliveries=0 passes=1 attempts=1" in first.output()

    (barrier / "release").touch()
    assert await exited(first) == 0, first.output()
    # the attempt finished in the draining process and its outcome was recorded there
    assert lines(barrier, "ends") == ["c1"]
    assert await peek.value(STEP, "blocking") is True
    assert await peek.value(STEP, "after") is None  # nothing new started during the drain
    assert lines(barrier, "after") == []
    # the buckets are free and the timer due now: the next relay takes it at its first heartbeat
    assert await owned(peek) == []
    assert await peek.count("akter_relay_members") == 0
    assert await peek.value(TIMER_DUE_NOW, run.execution_id) is True

    second = relays()
    assert await run.result(timeout=60) == Success("c1 done; c1 after")
    assert lines(barrier, "runs") == ["c1"]  # the activity ran once
    assert lines(barrier, "after") == ["c1"]
    assert second.terminate() == 0, second.output()


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_drain_timeout_abandons_the_activity_exits_0_and_the_lease_recovers_it(  # noqa: PLR0917 -- pytest passes fixtures by name
    kind: str,
    barrier: Path,
    peek: Peek,
    client: Any,
    clock: testing.Clock,
    relays: Callable[..., RelayProcess],
) -> None:
    first = relays("--drain-timeout", "0.5")
    await until(lambda: owned(peek), lambda rows: len(rows) == 256)
    run = await start(client, kind)
    await in_file(barrier, "runs")
    # the activity never finishes: the drain gives up after its timeout and the process exits 0
    # (a blocked synchronous activity's thread included)
    first.proc.send_signal(signal.SIGTERM)
    assert await exited(first) == 0, first.output()
    assert "relay drain timed out after 0:00:00.500000" in first.output()
    assert "activity attempt abandoned with its pass" in first.output()
    assert lines(barrier, "ends") == []
    assert await peek.value(STEP, "blocking") is False  # unknown: pending, as after a crash
    assert await owned(peek) == []
    assert await peek.count("akter_relay_members") == 0
    assert await peek.value(TIMER_DUE_NOW, run.execution_id) is False  # the recovery timer

    (barrier / "release").touch()
    second = relays()
    await clock.advance(timedelta(seconds=31))  # past the recovery timer armed with the attempt
    assert await run.result(timeout=60) == Success("c1 done; c1 after")
    assert lines(barrier, "runs") == ["c1", "c1"]  # abandoned, so it ran again
    assert second.terminate() == 0, second.output()


async def test_a_second_sigterm_forces_the_stop(
    barrier: Path, peek: Peek, client: Any, relays: Callable[..., RelayProcess]
) -> None:
    first = relays("--drain-timeout", "600")
    await until(lambda: owned(peek), lambda rows: len(rows) == 256)
    await start(client, "async")
    await in_file(barrier, "runs")
    first.proc.send_signal(signal.SIGTERM)
    await logged(first, "relay draining")
    await until(lambda: owned(peek), lambda rows: [b for b, _ in rows] == [BUCKET])
    first.proc.send_signal(signal.SIGTERM)
    # the drain would wait ten minutes: only the second signal ends it within the test's wait
    assert await exited(first) == 128 + signal.SIGTERM, first.output()
    assert "relay drain forced" in first.output()
    assert lines(barrier, "ends") == []
    assert await peek.value(STEP, "blocking") is False
    assert await owned(peek) == []


async def test_leaving_app_relay_drains_the_running_activity_the_same_way(
    database_url: str, barrier: Path, peek: Peek
) -> None:
    app = drain_app.make_app(database_url)
    settings = RelaySettings(
        heartbeat=timedelta(seconds=0.2),
        ownership_lease=timedelta(seconds=1),
        poll_interval=timedelta(seconds=0.5),
    )
    async with app, app.client() as client:
        block = app.relay(settings)
        relay = await block.__aenter__()
        await until(lambda: owned(peek), lambda rows: len(rows) == 256)
        run = await start(client, "async")
        await in_file(barrier, "runs")
        assert relay.in_flight() == {"deliveries": 0, "passes": 1, "attempts": 1}
        leaving = asyncio.ensure_future(block.__aexit__(None, None, None))
        await until(lambda: owned(peek), lambda rows: [b for b, _ in rows] == [BUCKET])
        assert not leaving.done()
        assert await peek.value(STEP, "blocking") is False
        (barrier / "release").touch()
        await leaving
        assert not relay.abandoned
        assert await peek.value(STEP, "blocking") is True
        assert await peek.value(STEP, "after") is None
        assert await owned(peek) == []
        assert await peek.value(TIMER_DUE_NOW, run.execution_id) is True
        async with app.relay(settings):
            assert await run.result(timeout=60) == Success("c1 done; c1 after")
    assert lines(barrier, "runs") == ["c1"]


async def test_akter_relay_reports_the_database_gauges(
    barrier: Path, tmp_path: Path, client: Any, relays: Callable[..., RelayProcess]
) -> None:
    metrics = tmp_path / "metrics.jsonl"
    # an execution before the relay starts: the gauges' first reading counts it
    await start(client, "async")
    proc = relays(app="tests.apps.gauged_relay:app", AKTER_TEST_METRICS=str(metrics))

    def reported() -> dict[str, Any]:
        found: dict[str, Any] = {}
        text = metrics.read_text() if metrics.exists() else ""
        for line in text.splitlines():
            record = json.loads(line)
            found[record["name"]] = record["points"]
        return found

    got = await until(
        lambda: asyncio.sleep(0, reported()),
        lambda r: {"akter.workflow.execution.count", "akter.outbox.depth", "akter.outbox.parked"} <= set(r),
    )
    assert got["akter.workflow.execution.count"] == [
        {"attributes": {"akter.execution.status": "running"}, "value": 1}
    ]
    assert got["akter.outbox.parked"] == [{"attributes": {}, "value": 0}]
    assert len(got["akter.outbox.depth"]) == 16
    (barrier / "release").touch()
    assert proc.terminate() == 0, proc.output()


def test_the_drain_timeout_is_a_setting_and_a_flag() -> None:
    assert RelaySettings().drain_timeout == timedelta(seconds=25)
    with pytest.raises(akter.ConfigurationError, match="drain_timeout"):
        RelaySettings(drain_timeout=timedelta(seconds=-1))
