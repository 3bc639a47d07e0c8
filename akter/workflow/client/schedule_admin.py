"""Managing schedules at run time, and reconciling the declared ones at relay start-up.

``client.schedules`` (``Schedules``) adds, lists, pauses, resumes, triggers and deletes
schedules (``akter.workflow.api.schedules``); ``akter schedules ...`` (``akter.cli.schedules``) is the
same from a shell. Every change is a receipted System turn on the schedule's target actor
(``akter.schedule.arm`` / ``.stop`` / ``.fire``), so it commits with the timer it arms or
cancels, under the actor's row lock; reads go through the pool and see committed rows only.

``install(app)`` is what an App whose actor types carry schedules runs when it is built: the
``ScheduleHook`` first among the turn hooks, and the ``Reconciler`` beside every relay, which
arms a declared schedule that has no row (or whose declaration changed) and deletes the rows of
declared schedules the code no longer declares. A schedule added at run time is never touched
by reconciliation; a paused declared schedule stays paused until its declaration changes.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, LiteralString

import attrs
import psycopg
import psycopg_pool
from psycopg.rows import dict_row

from akter import codec
from akter.actor.declare import Actor
from akter.callers import System
from akter.errors import ConfigurationError, InvalidInput, UnknownSchedule
from akter.ids import ActorRef
from akter.store.sqlstate import is_connection_lost
from akter.workflow.api.actor import schedules_of
from akter.workflow.api.schedules import (
    ARM,
    FIRE,
    STOP,
    Arm,
    Fire,
    Schedule,
    ScheduleHook,
    Spec,
    Stop,
)

if TYPE_CHECKING:
    from akter.actor.sender import Sender
    from akter.outbox.relay import Relay

log = logging.getLogger("akter.schedules")

# With the timer's parking, if the relay gave up on it (a point read by the timer-key index): a
# schedule whose timer is parked fires nothing until an operator retries it.
SELECT: LiteralString = """
SELECT tenant, name, actor_type, actor_id, digest, spec, declared, status, next_slot_at,
       last_slot_at, fired, t.parked_at, t.parked_reason, t.intent_id AS timer_intent
  FROM akter_schedules s
  LEFT JOIN LATERAL (
      SELECT o.parked_at, o.parked_reason, o.intent_id FROM actor_outbox o
       WHERE o.routing_key = s.routing_key AND o.tenant = s.tenant AND o.actor_type = s.actor_type
         AND o.actor_id = s.actor_id AND o.timer_key = 'akter.schedule:' || s.name || ':' || s.digest
         AND o.parked_at IS NOT NULL) t ON true"""


@attrs.frozen
class ScheduleInfo:
    """A schedule as stored: its definition, whether it is active, and its next and last slot
    (the database clock; ``next_slot`` is None while paused). ``status`` is ``"active"``,
    ``"paused"``, or ``"parked"``: active, but the relay gave up delivering its timer
    (``parked_reason`` says why; ``akter outbox retry <parked_intent>`` delivers it again), so it
    fires nothing, not even at ``next_slot``."""

    tenant: str
    name: str
    actor: ActorRef
    kind: str
    member: str
    cron: str | None
    every: timedelta | None
    timezone: str
    catch_up: str
    max_catch_up: int
    status: str
    next_slot: datetime | None
    last_slot: datetime | None
    fired: int
    declared: bool
    spec: Spec = attrs.field(repr=False, eq=False)
    parked_reason: str | None = None
    #: the intent id of the parked timer (what ``akter outbox retry`` takes)
    parked_intent: str | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ScheduleInfo:
        spec: Spec = codec.decode(bytes(row["spec"]), Spec)
        return cls(
            tenant=row["tenant"],
            name=row["name"],
            actor=ActorRef(tenant=row["tenant"], actor_type=row["actor_type"], actor_id=row["actor_id"]),
            kind=spec.kind,
            member=spec.member,
            cron=spec.cron,
            every=None if spec.every_ms is None else timedelta(milliseconds=spec.every_ms),
            timezone=spec.timezone,
            catch_up=spec.catch_up,
            max_catch_up=spec.max_catch_up,
            status="parked" if row["parked_at"] is not None else row["status"],
            next_slot=row["next_slot_at"],
            last_slot=row["last_slot_at"],
            fired=row["fired"],
            declared=row["declared"],
            spec=spec,
            parked_reason=row["parked_reason"] if row["parked_at"] is not None else None,
            parked_intent=row["timer_intent"],
        )

    def as_json(self) -> dict[str, Any]:
        def iso(when: datetime | None) -> str | None:
            return None if when is None else when.isoformat()

        return {
            "tenant": self.tenant,
            "name": self.name,
            "actor": str(self.actor),
            "kind": self.kind,
            "member": self.member,
            "cron": self.cron,
            "every_seconds": None if self.every is None else self.every.total_seconds(),
            "timezone": self.timezone,
            "catch_up": self.catch_up,
            "max_catch_up": self.max_catch_up,
            "status": self.status,
            "next_slot": iso(self.next_slot),
            "last_slot": iso(self.last_slot),
            "fired": self.fired,
            "declared": self.declared,
            "parked_reason": self.parked_reason,
            "parked_intent": self.parked_intent,
        }


def _caller(name: str) -> System:
    return System(source="schedule", ref=name)


class Schedules:
    """Run-time management of an App's schedules; ``client.schedules``."""

    def __init__(self, sender: Sender) -> None:
        self._sender = sender

    async def _rows(
        self, where: LiteralString = "", params: dict[str, Any] | None = None
    ) -> list[ScheduleInfo]:
        async with self._sender.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(SELECT + where + " ORDER BY tenant, name", params or {})
            return [ScheduleInfo.from_row(row) for row in await cur.fetchall()]

    async def list(self, tenant: str | None = None) -> builtins.list[ScheduleInfo]:
        if tenant is None:
            return await self._rows()
        return await self._rows(" WHERE tenant = %(tenant)s", {"tenant": tenant})

    async def get(self, tenant: str, name: str) -> ScheduleInfo:
        found = await self._rows(
            " WHERE tenant = %(tenant)s AND name = %(name)s", {"tenant": tenant, "name": name}
        )
        if not found:
            raise UnknownSchedule(f"no schedule {name!r} in tenant {tenant!r}")
        return found[0]

    def _actor(self, actor_type: str) -> Actor[Any]:
        actor = self._sender.actors.get(actor_type)
        if actor is None or FIRE not in actor.commands:
            raise ConfigurationError(
                f"actor type {actor_type!r} carries no schedules in this App: declare one on it "
                f"or call akter.enable_schedules({actor_type}) before building the App"
            )
        return actor

    async def _turn(self, actor: Actor[Any], ref: ActorRef, command: str, payload: object, name: str) -> Any:
        record = await self._sender.send(ref, actor.commands[command], payload, None, _caller(name))
        return record.outcome.unwrap()

    async def _act(self, info: ScheduleInfo, command: str, payload: object) -> Any:
        return await self._turn(self._actor(info.actor.actor_type), info.actor, command, payload, info.name)

    async def add(self, schedule: Schedule) -> ScheduleInfo:
        """Add ``schedule`` (or replace the one of its name on the same actor): its first slot
        is the first one after now."""
        spec = schedule.spec()
        actor = self._actor(spec.actor_type)
        ref = ActorRef(tenant=spec.tenant, actor_type=spec.actor_type, actor_id=spec.actor_id)
        replaces = None
        try:
            current = await self.get(spec.tenant, spec.name)
        except UnknownSchedule:
            pass
        else:
            if current.actor != ref:
                raise InvalidInput(
                    f"tenant {spec.tenant!r} has a schedule {spec.name!r} on {current.actor} already"
                )
            replaces = current.spec.digest
        await self._turn(actor, ref, ARM, Arm(spec, replaces), spec.name)
        return await self.get(spec.tenant, spec.name)

    async def pause(self, tenant: str, name: str) -> ScheduleInfo:
        """Stop arming slots; a slot being delivered at this moment may still run."""
        info = await self.get(tenant, name)
        await self._turn(
            self._actor(info.actor.actor_type), info.actor, STOP, Stop(name, info.spec.digest, False), name
        )
        return await self.get(tenant, name)

    async def resume(self, tenant: str, name: str) -> ScheduleInfo:
        """Arm the first slot after now again (the slots missed while paused are skipped)."""
        info = await self.get(tenant, name)
        await self._act(info, ARM, Arm(info.spec, None))
        return await self.get(tenant, name)

    async def trigger(self, tenant: str, name: str) -> datetime:
        """Deliver the schedule once now, outside its slots (paused or not); returns the slot
        it was delivered as (the database clock now)."""
        info = await self.get(tenant, name)
        slot_ms = await self._turn(
            self._actor(info.actor.actor_type), info.actor, FIRE, Fire(info.spec, None), name
        )
        return datetime.fromtimestamp(slot_ms / 1000, tz=UTC)

    async def delete(self, tenant: str, name: str) -> None:
        info = await self.get(tenant, name)
        await self._turn(
            self._actor(info.actor.actor_type), info.actor, STOP, Stop(name, info.spec.digest, True), name
        )

    async def reconcile(self) -> builtins.list[str]:
        """Bring the declared schedules of the App's code into the database; what changed."""
        declared = {
            (s.tenant, s.name): s
            for actor in self._sender.actors.values()
            for s in schedules_of(actor).values()
        }
        stored = {(i.tenant, i.name): i for i in await self.list() if i.declared}
        changes: builtins.list[str] = []
        for key, schedule in declared.items():
            current = stored.get(key)
            if current is None or current.spec.digest != schedule.spec().digest:
                await self.add(schedule)
                changes.append(f"{'armed' if current is None else 'redefined'} {key[0]}/{key[1]}")
        for key in stored:
            if key not in declared:
                await self.delete(*key)
                changes.append(f"deleted {key[0]}/{key[1]} (no longer declared)")
        return changes


class SyncSchedules:
    """``Schedules``, blocking: ``sync_client.schedules``."""

    def __init__(self, portal: Any, schedules: Schedules) -> None:
        self._portal = portal
        self._schedules = schedules

    def list(self, tenant: str | None = None) -> builtins.list[ScheduleInfo]:
        return self._portal.run(self._schedules.list(tenant))  # type: ignore[no-any-return]

    def get(self, tenant: str, name: str) -> ScheduleInfo:
        return self._portal.run(self._schedules.get(tenant, name))  # type: ignore[no-any-return]

    def add(self, schedule: Schedule) -> ScheduleInfo:
        return self._portal.run(self._schedules.add(schedule))  # type: ignore[no-any-return]

    def pause(self, tenant: str, name: str) -> ScheduleInfo:
        return self._portal.run(self._schedules.pause(tenant, name))  # type: ignore[no-any-return]

    def resume(self, tenant: str, name: str) -> ScheduleInfo:
        return self._portal.run(self._schedules.resume(tenant, name))  # type: ignore[no-any-return]

    def trigger(self, tenant: str, name: str) -> datetime:
        return self._portal.run(self._schedules.trigger(tenant, name))  # type: ignore[no-any-return]

    def delete(self, tenant: str, name: str) -> None:
        self._portal.run(self._schedules.delete(tenant, name))


class Reconciler:
    """The relay plugin that reconciles declared schedules when a relay starts, retrying while
    the database is unreachable; ``done`` is set once it succeeded."""

    def __init__(self) -> None:
        self.done = asyncio.Event()

    async def run(self, relay: Relay) -> None:
        delay = 0.1
        while True:
            try:
                changes = await Schedules(relay.sender).reconcile()
                break
            except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
                if not (isinstance(exc, psycopg_pool.PoolTimeout) or is_connection_lost(exc)):
                    raise
                log.warning("cannot reconcile schedules yet (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        for change in changes:
            log.info("schedule %s", change)
        self.done.set()
        await asyncio.Event().wait()  # a plugin runs as long as its relay


def install(app: Any) -> None:
    """Make ``app`` keep schedules: the hook first in every turn, the reconciler beside every
    relay."""
    app.hooks.insert(0, ScheduleHook())
    app.schedule_reconciler = Reconciler()
    app.relay_plugins.append(app.schedule_reconciler)
