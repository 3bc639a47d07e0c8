"""Schedules on the database clock: each slot delivered once under an id derived from the
schedule and the slot, across relay restarts, two relays, DST changes and a downtime gap."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner

import akter
from akter import testing
from akter.cli import main
from akter.errors import UnknownSchedule
from akter.workflow.api.schedules import slot_key, slot_nonce
from tests.apps.jobs import Jobs, JobsState, Nightly, Ran, RunReport, make_app, run_report
from tests.integration.conftest import Peek

UTC_START = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
APP = "tests.apps.jobs:app"


def job(name: str, member: Any = run_report, payload: object = None, **options: Any) -> akter.Schedule:
    """A schedule on the actor ``Jobs/main`` of tenant ``acme``."""
    payload = RunReport(name) if payload is None else payload
    return akter.Schedule(
        name=name, actor=Jobs, actor_id="main", tenant="acme", member=member, payload=payload, **options
    )


def hourly(**options: Any) -> akter.Schedule:
    return job("hourly", every=timedelta(hours=1), **options)


async def _runs(peek: Peek) -> list[tuple[str, datetime]]:
    """(command id, created_at) of every run_report receipt, in commit order."""
    return await peek.rows(
        "SELECT command_id, created_at FROM actor_receipts WHERE command = 'run_report' ORDER BY created_at"
    )


def _nonces(rows: list[tuple[str, datetime]]) -> list[str]:
    return [cid.rsplit(".", 1)[1] for cid, _ in rows]


@pytest.fixture
async def app(database_url: str, clock: testing.Clock) -> AsyncIterator[akter.App]:
    await clock.set(UTC_START)
    app = make_app(database_url)
    async with app:
        yield app


async def test_each_slot_is_delivered_once_under_an_id_derived_from_the_slot(
    app: akter.App, clock: testing.Clock, peek: Peek
) -> None:
    async with app.client() as client:
        info = await client.schedules.add(hourly())
        assert info.next_slot == datetime(2026, 1, 1, 1, tzinfo=UTC)
        assert info.status == "active"
        spec = info.spec
        slots = [datetime(2026, 1, 1, h, tzinfo=UTC) for h in (1, 2, 3)]
        # the first slot with one relay, the second with two at once, the third after a restart
        async with app.relay() as relay:
            await clock.set(slots[0] + timedelta(seconds=1))
            await relay.idle()
        async with app.relay() as one, app.relay() as two:
            await clock.set(slots[1] + timedelta(seconds=1))
            await one.idle()
            await two.idle()
        async with app.relay() as relay:
            await clock.set(slots[2] + timedelta(seconds=1))
            await relay.idle()
        rows = await _runs(peek)
        assert _nonces(rows) == [slot_nonce(spec, round(s.timestamp() * 1000)) for s in slots]
        info = await client.schedules.get("acme", "hourly")
        assert (info.last_slot, info.next_slot, info.fired) == (slots[2], slots[2] + timedelta(hours=1), 3)
        # one timer, armed for the next slot
        assert await peek.rows("SELECT timer_key, due_at FROM actor_outbox") == [
            (spec.timer_key, slots[2] + timedelta(hours=1))
        ]


@pytest.mark.parametrize(("catch_up", "delivered"), [("latest", [10]), ("all", [8, 9, 10])])
async def test_after_a_downtime_gap_the_catch_up_policy_decides(
    app: akter.App, clock: testing.Clock, peek: Peek, catch_up: str, delivered: list[int]
) -> None:
    async with app.client() as client:
        spec = (await client.schedules.add(hourly(catch_up=catch_up, max_catch_up=3))).spec
        # no relay runs from 00:10 to 10:30: slots 01:00 .. 10:00 pass unseen
        await clock.set(datetime(2026, 1, 1, 10, 30, tzinfo=UTC))
        async with app.relay() as relay:
            await relay.idle()
        expected = [datetime(2026, 1, 1, h, tzinfo=UTC) for h in delivered]
        assert _nonces(await _runs(peek)) == [slot_nonce(spec, round(s.timestamp() * 1000)) for s in expected]
        info = await client.schedules.get("acme", "hourly")
        assert info.next_slot == datetime(2026, 1, 1, 11, tzinfo=UTC)
        assert info.last_slot == expected[-1]


async def test_a_cron_schedule_follows_its_time_zone_across_dst(
    app: akter.App, clock: testing.Clock, peek: Peek
) -> None:
    berlin = job("berlin", cron="30 2 * * *", timezone="Europe/Berlin")
    await clock.set(datetime(2026, 3, 28, 12, tzinfo=UTC))
    async with app.client() as client, app.relay() as relay:
        info = await client.schedules.add(berlin)
        # 02:30 does not exist on 29 March in Berlin: the slot is 03:00 CEST, 01:00 UTC
        assert info.next_slot == datetime(2026, 3, 29, 1, tzinfo=UTC)
        await clock.set(datetime(2026, 3, 29, 1, 0, 1, tzinfo=UTC))
        await relay.idle()
        info = await client.schedules.get("acme", "berlin")
        assert info.next_slot == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)  # 02:30 CEST
        # 25 October: 02:30 happens twice in Berlin; the slot is the first, 02:30 CEST
        await client.schedules.pause("acme", "berlin")
        await clock.set(datetime(2026, 10, 24, 12, tzinfo=UTC))
        info = await client.schedules.resume("acme", "berlin")
        assert info.next_slot == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
        await clock.set(datetime(2026, 10, 25, 0, 30, 1, tzinfo=UTC))
        await relay.idle()
        await clock.set(datetime(2026, 10, 25, 1, 30, 1, tzinfo=UTC))  # the second 02:30
        await relay.idle()
        info = await client.schedules.get("acme", "berlin")
        assert info.last_slot == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
        assert info.next_slot == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)  # 02:30 CET
    assert len(await _runs(peek)) == 2


async def test_pause_trigger_resume_and_delete_at_run_time(
    app: akter.App, clock: testing.Clock, peek: Peek
) -> None:
    async with app.client() as client, app.relay() as relay:
        await client.schedules.add(hourly())
        paused = await client.schedules.pause("acme", "hourly")
        assert (paused.status, paused.next_slot) == ("paused", None)
        assert await peek.count("actor_outbox") == 0
        await clock.set(datetime(2026, 1, 1, 3, 30, tzinfo=UTC))
        await relay.idle()
        assert await _runs(peek) == []
        slot = await client.schedules.trigger("acme", "hourly")  # once now, paused or not
        await relay.idle()
        assert len(await _runs(peek)) == 1
        assert abs(slot - datetime(2026, 1, 1, 3, 30, tzinfo=UTC)) < timedelta(minutes=1)
        resumed = await client.schedules.resume("acme", "hourly")
        assert (resumed.status, resumed.next_slot) == ("active", datetime(2026, 1, 1, 4, tzinfo=UTC))
        await client.schedules.delete("acme", "hourly")
        assert await client.schedules.list() == []
        assert await peek.count("actor_outbox") == 0
        with pytest.raises(UnknownSchedule):
            await client.schedules.pause("acme", "hourly")
        await clock.set(datetime(2026, 1, 1, 5, 30, tzinfo=UTC))
        await relay.idle()
        assert len(await _runs(peek)) == 1


async def test_a_fire_racing_a_pause_neither_delivers_nor_rearms(
    app: akter.App, clock: testing.Clock, peek: Peek
) -> None:
    async with app.client() as client:
        spec = (await client.schedules.add(hourly())).spec
        await clock.set(datetime(2026, 1, 1, 1, 0, 1, tzinfo=UTC))
        # the relay has claimed the slot's timer and is about to deliver it
        gate = testing.pause("relay.before_delivery")
        async with app.relay() as relay:
            await gate.reached()
            await client.schedules.pause("acme", "hourly")
            gate.release()
            await relay.idle()
        assert await _runs(peek) == []
        assert await peek.count("actor_outbox") == 0
        # the fire's turn committed only its receipt
        fires = await peek.value("SELECT count(*) FROM actor_receipts WHERE command = 'akter.schedule.fire'")
        assert fires == 1
        assert (await client.schedules.get("acme", "hourly")).spec == spec


async def test_a_schedule_can_start_a_workflow_keyed_by_its_slot(
    app: akter.App, clock: testing.Clock, peek: Peek
) -> None:
    nightly = job("nightly", member=Nightly, cron="0 3 * * *")
    async with app.client() as client, app.relay() as relay:
        spec = (await client.schedules.add(nightly)).spec
        await clock.set(datetime(2026, 1, 1, 3, 0, 1, tzinfo=UTC))
        await relay.idle()
    key = slot_key(spec, round(datetime(2026, 1, 1, 3, tzinfo=UTC).timestamp() * 1000))
    assert key == "nightly@2026-01-01T03:00:00.000+00:00"
    assert await peek.rows("SELECT key, status FROM actor_workflow_executions") == [(key, "finished")]


def test_a_schedule_declaration_reports_every_problem() -> None:
    with pytest.raises(akter.DeclarationError) as info:
        job(
            "bad:name",
            payload="not a RunReport",
            cron="61 * * * *",
            every=timedelta(seconds=0),
            timezone="Mars/Olympus",
            catch_up="sometimes",
            max_catch_up=0,
        )
    problems = "\n".join(info.value.problems)
    for expected in (
        "name",
        "payload",
        "either cron= or every=",
        "not a cron expression",
        "every must be",
        "unknown time zone",
        "catch_up must be",
        "max_catch_up must be",
    ):
        assert expected in problems


def _report(turn: akter.Turn[JobsState], cmd: RunReport) -> None:
    turn.emit(Ran(label=cmd.label, at=turn.now))


def _declaring(database_url: str, cron: str | None) -> akter.App:
    """An App of a ``Reports`` actor type as one deploy declares it: with a schedule on ``cron``
    or none."""
    reports = akter.Actor("Reports", state=JobsState, events=[Ran])
    command = reports.command(name="run_report")(_report)
    if cron is None:
        akter.enable_schedules(reports)
    else:
        reports.schedule(
            "daily", actor_id="main", tenant="acme", member=command, payload=RunReport("d"), cron=cron
        )
    return akter.App([reports], database_url=database_url)


async def _reconciled(app: akter.App) -> list[akter.ScheduleInfo]:
    async with app, app.relay(), app.client() as client:
        await app.schedule_reconciler.done.wait()  # type: ignore[attr-defined]
        return await client.schedules.list()


async def test_declared_schedules_are_reconciled_when_a_relay_starts(
    database_url: str, clock: testing.Clock, peek: Peek
) -> None:
    await clock.set(UTC_START)
    (first,) = await _reconciled(_declaring(database_url, "0 3 * * *"))
    assert (first.name, first.cron, first.declared, first.next_slot) == (
        "daily",
        "0 3 * * *",
        True,
        datetime(2026, 1, 1, 3, tzinfo=UTC),
    )
    # the same declaration again changes nothing; a changed one replaces the timer
    assert await _reconciled(_declaring(database_url, "0 3 * * *")) == [first]
    (second,) = await _reconciled(_declaring(database_url, "0 4 * * *"))
    assert (second.cron, second.next_slot) == ("0 4 * * *", datetime(2026, 1, 1, 4, tzinfo=UTC))
    assert await peek.rows("SELECT timer_key FROM actor_outbox") == [(second.spec.timer_key,)]
    # a schedule added at run time is left alone; one no longer declared is deleted
    app = _declaring(database_url, None)
    async with app, app.client() as client:
        reports = app.actors["Reports"]
        extra = akter.Schedule(
            name="extra",
            actor=reports,
            actor_id="main",
            tenant="acme",
            member=reports.commands["run_report"],
            payload=RunReport("x"),
            every=timedelta(minutes=5),
        )
        await client.schedules.add(extra)
    assert [s.name for s in await _reconciled(_declaring(database_url, None))] == ["extra"]
    assert await peek.count("actor_outbox") == 1


def test_the_schedules_command(database_url: str, clock: testing.Clock) -> None:
    asyncio.run(clock.set(UTC_START))
    env = {"AKTER_DATABASE_URL": database_url}
    runner = CliRunner()

    def akter_cli(*args: str) -> Any:
        return runner.invoke(main, ["schedules", *args], env=env, catch_exceptions=False)

    added = akter_cli(
        "add",
        APP,
        "acme",
        "hourly",
        "--actor",
        "Jobs",
        "--id",
        "main",
        "--command",
        "run_report",
        "--payload",
        '{"label": "cli"}',
        "--every",
        "3600",
        "--json",
    )
    assert added.exit_code == 0, added.output
    assert json.loads(added.output)[0]["next_slot"] == "2026-01-01T01:00:00+00:00"
    paused = akter_cli("pause", APP, "acme", "hourly", "--json")
    assert (paused.exit_code, json.loads(paused.output)[0]["status"]) == (0, "paused")
    listed = akter_cli("list", APP)
    assert listed.exit_code == 0
    assert "acme/hourly  paused  command acme/Jobs/main.run_report  every 1:00:00" in listed.output
    missing = akter_cli("resume", APP, "acme", "nope")
    assert missing.exit_code == 1
    assert "no schedule 'nope' in tenant 'acme'" in missing.output
    deleted = akter_cli("delete", APP, "acme", "hourly")
    assert (deleted.exit_code, deleted.output.strip()) == (0, "deleted acme/hourly")
    assert json.loads(akter_cli("list", APP, "--json").output) == []
