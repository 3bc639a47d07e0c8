"""Schedules: a command or a workflow start on a named actor, at each slot of a cron expression
or a fixed interval, each slot delivered exactly once.

A schedule lives on its target actor, as one keyed timer in the outbox
(``akter.schedule:<name>:<digest>``, the digest being a hash of the schedule's definition). When
the relay delivers the timer, the delivery is a receipted internal turn on the target actor
(``akter.schedule.fire``) that, in one transaction:

- delivers the slot: stages the command to the actor with an intent id whose uuid part is
  derived from the schedule and the slot (``uuid5``), or starts the workflow under the key
  ``<name>@<slot, UTC ISO>``;
- arms the timer of the next slot (the keyed intent replaces the one being delivered);
- records the slot as the schedule's last and the next one in ``akter_schedules``.

The slot is therefore delivered exactly once: a relay that dies mid-delivery redelivers the
same intent id, whose receipt replays; two relays never claim one row. After downtime, the
catch-up policy decides: ``"latest"`` delivers only the latest slot that passed and arms the
next one ahead; ``"all"`` delivers each missed slot in turn (each fire arms the next, already
due), at most ``max_catch_up`` of them — older ones are skipped.

Changes (add, pause, resume, trigger, delete: ``schedule_admin.py``) are receipted System
turns on the target actor too (``akter.schedule.arm``, ``akter.schedule.stop``), so they
serialise with fires under the actor's row lock. ``ScheduleHook`` — the first hook of every
turn — keeps ``akter_schedules`` in step and drops a fire whose schedule was paused, deleted or
redefined since its timer was armed (a delivery racing a pause), so a stale timer neither
delivers nor re-arms.

Slots come from ``cronsim`` (cron, evaluated in the schedule's time zone, so a 02:30 job runs
once on DST days: at 03:00 when 02:30 does not exist, at the first 02:30 when it happens
twice), or from a fixed interval counted from the Unix epoch. Durable time is the database
clock (``turn.now``).

The declaration record (``Schedule``) is here; ``Actor.schedule`` (``akter.workflow.api.actor``)
builds one and keeps it on the actor type, above this module, which names only the base
``WorkflowActor`` (``declare.py``) and so closes no import cycle with ``akter.Actor``.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, LiteralString
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs
from cronsim import CronSim, CronSimError

from akter import codec
from akter.actor import staged
from akter.actor.declare import Actor as ActorType
from akter.actor.kernel import Committed, UnderLock
from akter.actor.turn import Turn
from akter.errors import ConfigurationError, CorruptRecord, DeclarationError, InvalidInput
from akter.ids import check_execution_key
from akter.workflow.api.declare import WorkflowActor, workflows_of

if TYPE_CHECKING:
    from akter.actor.declare import Command

LAYER = "schedules"
FIRE = "akter.schedule.fire"
ARM = "akter.schedule.arm"
STOP = "akter.schedule.stop"
CATCH_UP = ("latest", "all")
MAX_CATCH_UP = 1000
#: slots iterated at most to find where a catch-up resumes (a minutely cron over a long outage)
MAX_SCAN = 100_000
_IDS = uuid.UUID("6b1d1f36-3c61-4c3e-9f0e-5d8f3c1a7e10")


@attrs.frozen
class Spec:
    """A schedule's definition as stored (in its timer's payload and in ``akter_schedules``)."""

    name: str
    actor_type: str
    actor_id: str
    tenant: str
    #: "command" or "workflow"
    kind: str
    member: str
    #: the member's input as canonical JSON
    payload: str
    cron: str | None
    every_ms: int | None
    timezone: str
    catch_up: str
    max_catch_up: int
    declared: bool

    @property
    def digest(self) -> str:
        return hashlib.sha256(codec.canonical_json(codec.to_primitive(self, Spec))).hexdigest()[:16]

    @property
    def timer_key(self) -> str:
        return f"akter.schedule:{self.name}:{self.digest}"


@attrs.frozen
class Fire:
    spec: Spec
    #: the slot, ms since the epoch; None: now (a manual trigger)
    slot_ms: int | None


@attrs.frozen
class Arm:
    spec: Spec
    #: the digest of the definition this one replaces, whose timer is cancelled
    replaces: str | None


@attrs.frozen
class Stop:
    name: str
    digest: str
    delete: bool


@attrs.frozen
class Fired:
    """What a fire turn tells ``ScheduleHook``."""

    spec: Spec
    slot_ms: int
    next_ms: int | None
    manual: bool


@attrs.frozen
class Armed:
    spec: Spec
    next_ms: int


@attrs.frozen
class Stopped:
    name: str
    digest: str
    delete: bool


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidInput(f"unknown time zone {name!r}") from exc


def _dt(ms: int, spec: Spec) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=_zone(spec.timezone))


def _ms(when: datetime) -> int:
    return round(when.timestamp() * 1000)


def _cron(spec: Spec) -> str:
    if spec.cron is None:  # a Spec has a cron or an interval (Schedule checks it)
        raise CorruptRecord(f"schedule {spec.name!r} has neither a cron expression nor an interval")
    return spec.cron


def slots_after(spec: Spec, after_ms: int) -> Iterator[int]:
    """The slots strictly after ``after_ms``, in order."""
    if spec.every_ms is not None:
        slot = (after_ms // spec.every_ms + 1) * spec.every_ms
        while True:
            yield slot
            slot += spec.every_ms
    for when in CronSim(_cron(spec), _dt(after_ms, spec)):
        yield _ms(when)


def next_after(spec: Spec, after_ms: int) -> int:
    return next(slots_after(spec, after_ms))


def latest_at_or_before(spec: Spec, now_ms: int) -> int | None:
    """The last slot at or before ``now_ms`` (None: there is none)."""
    if spec.every_ms is not None:
        return (now_ms // spec.every_ms) * spec.every_ms
    for when in CronSim(_cron(spec), _dt(now_ms + 1000, spec), reverse=True):
        if _ms(when) <= now_ms:
            return _ms(when)
    return None  # pragma: no cover -- a valid cron expression always has a past slot


def plan(spec: Spec, slot_ms: int, now_ms: int) -> tuple[int, int]:
    """For a timer of ``slot_ms`` delivered at ``now_ms``: the slot to deliver and the next
    one to arm (which may already be due, under ``"all"``)."""
    if spec.catch_up == "latest":
        slot = max(slot_ms, latest_at_or_before(spec, now_ms) or slot_ms)
        return slot, next_after(spec, max(slot, now_ms))
    # "all": deliver this slot, unless more than max_catch_up slots are due: then the oldest of
    # the last max_catch_up
    due = [slot_ms]
    for later in slots_after(spec, slot_ms):
        if later > now_ms or len(due) > MAX_SCAN:
            break
        due.append(later)
    slot = due[-spec.max_catch_up] if len(due) > spec.max_catch_up else slot_ms
    return slot, next_after(spec, slot)


def slot_key(spec: Spec, slot_ms: int) -> str:
    """The workflow key of a slot: the schedule's name and the slot's time."""
    when = datetime.fromtimestamp(slot_ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
    return check_execution_key(f"{spec.name}@{when}")


def slot_nonce(spec: Spec, slot_ms: int) -> str:
    """The uuid part of the command id a slot is delivered under."""
    return uuid.uuid5(_IDS, f"{spec.tenant}/{spec.actor_type}/{spec.actor_id}/{spec.name}@{slot_ms}").hex


# --- declarations ---


@attrs.frozen(eq=False)
class Schedule:
    """A schedule: ``member`` (a command or a workflow of ``actor``) with ``payload``, on the
    actor ``actor_id`` of ``tenant``, at each slot of ``cron`` (in ``timezone``) or ``every``.
    ``catch_up``: after downtime, ``"latest"`` (the latest missed slot only) or ``"all"`` (each
    missed slot, at most ``max_catch_up``). Declare one on an actor type with
    ``Actor.schedule(...)`` (reconciled at relay start-up), or build one and ``add`` it at run
    time (``client.schedules``)."""

    name: str
    actor: WorkflowActor[Any]
    actor_id: str
    tenant: str
    member: Any
    payload: Any
    cron: str | None = None
    every: timedelta | None = None
    timezone: str = "UTC"
    catch_up: str = "latest"
    max_catch_up: int = 10
    declared: bool = False

    def __attrs_post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise DeclarationError(f"schedule {self.name!r}", problems)

    def spec(self) -> Spec:
        kind = "workflow" if hasattr(self.member, "start_command") else "command"
        return Spec(
            name=self.name,
            actor_type=self.actor.name,
            actor_id=self.actor_id,
            tenant=self.tenant,
            kind=kind,
            member=self.member.name,
            payload=codec.check(self.payload, self.member.input).decode(),
            cron=self.cron,
            every_ms=None if self.every is None else self.every // timedelta(milliseconds=1),
            timezone=self.timezone,
            catch_up=self.catch_up,
            max_catch_up=self.max_catch_up,
            declared=self.declared,
        )


def _problems(s: Schedule) -> list[str]:  # noqa: PLR0912 -- one check per field, all reported
    problems: list[str] = []
    if not isinstance(s.name, str) or not 1 <= len(s.name) <= 100 or ":" in s.name or "@" in s.name:
        problems.append(f"name {s.name!r} must be 1..100 characters without ':' or '@'")
    if not isinstance(s.actor, WorkflowActor):
        problems.append(f"actor must be an akter.Actor, got {s.actor!r}")
        return problems
    if getattr(s.member, "actor", None) is not s.actor:
        problems.append(f"{s.member!r} is not a command or workflow of {s.actor.name}")
    elif getattr(s.member, "internal", False):
        problems.append(f"{s.member!r} is internal")
    else:
        try:
            codec.check(s.payload, s.member.input)
        except InvalidInput as exc:
            problems.append(f"payload: {exc}")
    if (s.cron is None) == (s.every is None):
        problems.append("give either cron= or every=")
    if s.cron is not None:
        try:
            CronSim(s.cron, datetime.now(UTC))
        except (CronSimError, TypeError) as exc:
            problems.append(f"cron {s.cron!r} is not a cron expression: {exc}")
    if s.every is not None and (not isinstance(s.every, timedelta) or s.every < timedelta(seconds=1)):
        problems.append(f"every must be a timedelta of at least one second, got {s.every!r}")
    try:
        _zone(s.timezone)
    except InvalidInput as exc:
        problems.append(str(exc))
    if s.catch_up not in CATCH_UP:
        problems.append(f"catch_up must be one of {CATCH_UP}, got {s.catch_up!r}")
    if not isinstance(s.max_catch_up, int) or not 1 <= s.max_catch_up <= MAX_CATCH_UP:
        problems.append(f"max_catch_up must be an int in 1..{MAX_CATCH_UP}, got {s.max_catch_up!r}")
    return problems


def enabled(actor: ActorType[Any]) -> bool:
    """Whether ``actor`` carries schedules (``enable`` registered their internal commands)."""
    return FIRE in actor.commands


def enable(actor: WorkflowActor[Any]) -> None:
    """Let ``actor`` carry schedules (its internal schedule commands); declaring one does it."""
    if not isinstance(actor, WorkflowActor):
        raise ConfigurationError(f"{actor!r} is not an akter.Actor: only those carry schedules")
    if FIRE in actor.commands:
        return

    def fire(turn: Turn[Any], payload: Fire) -> int:
        return _fire(actor, turn, payload)

    def arm(turn: Turn[Any], payload: Arm) -> int:
        return _arm(actor, turn, payload)

    def stop(turn: Turn[Any], payload: Stop) -> None:
        staged.cancel_internal(turn, f"akter.schedule:{payload.name}:{payload.digest}")
        turn.stage(LAYER, Stopped(payload.name, payload.digest, payload.delete))

    fire.__annotations__ = {"turn": Turn, "payload": Fire, "return": int}
    arm.__annotations__ = {"turn": Turn, "payload": Arm, "return": int}
    stop.__annotations__ = {"turn": Turn, "payload": Stop, "return": None}
    # renewable: a fire's keyed timer is replaced in the fire's own transaction (an expired one
    # was never delivered), a workflow slot starts under the slot's key, and arming or stopping
    # again leaves the same timer; see docs/schedules.md, "Outages"
    actor.internal_command(FIRE, fire, renewable=True)
    actor.internal_command(ARM, arm, renewable=True)
    actor.internal_command(STOP, stop, renewable=True)


def _member(actor: WorkflowActor[Any], spec: Spec) -> Any:
    table = workflows_of(actor) if spec.kind == "workflow" else actor.commands
    member = table.get(spec.member)
    if member is None:
        raise InvalidInput(f"{actor.name} has no {spec.kind} {spec.member!r} (schedule {spec.name!r})")
    return member


def _now_ms(turn: Turn[Any]) -> int:
    return _ms(turn.now)


def _arm_timer(actor: WorkflowActor[Any], turn: Turn[Any], spec: Spec, due_ms: int) -> None:
    fire: Command[Any, Any, Any] = actor.commands[FIRE]
    due = datetime.fromtimestamp(due_ms / 1000, tz=UTC)
    staged.stage_internal(turn, turn.ref, fire, Fire(spec, due_ms), key=spec.timer_key, at=due)


def _fire(actor: WorkflowActor[Any], turn: Turn[Any], payload: Fire) -> int:
    spec, now_ms = payload.spec, _now_ms(turn)
    member = _member(actor, spec)
    value = staged.decode_payload(codec.frame(spec.payload.encode()), member.input)
    if payload.slot_ms is None:
        slot, next_ms = now_ms, None
    else:
        slot, next_ms = plan(spec, payload.slot_ms, now_ms)
        _arm_timer(actor, turn, spec, next_ms)
    if spec.kind == "workflow":
        turn.start(member, value, key=slot_key(spec, slot))
    else:
        send = staged.build_send(turn, turn.ref, member, value)
        turn.stage(staged.LAYER, attrs.evolve(send, nonce=slot_nonce(spec, slot)))
    turn.stage(LAYER, Fired(spec, slot, next_ms, payload.slot_ms is None))
    return slot


def _arm(actor: WorkflowActor[Any], turn: Turn[Any], payload: Arm) -> int:
    spec = payload.spec
    _member(actor, spec)  # a schedule of a member this code lacks is refused here
    if payload.replaces is not None and payload.replaces != spec.digest:
        staged.cancel_internal(turn, f"akter.schedule:{spec.name}:{payload.replaces}")
    next_ms = next_after(spec, _now_ms(turn))
    _arm_timer(actor, turn, spec, next_ms)
    turn.stage(LAYER, Armed(spec, next_ms))
    return next_ms


# --- the hook ---

_KEY: LiteralString = "routing_key = %(rk)s AND tenant = %(tenant)s AND name = %(name)s"

UPSERT: LiteralString = """
INSERT INTO akter_schedules (routing_key, tenant, name, actor_type, actor_id, digest, spec,
                             declared, status, next_slot_at, updated_at)
VALUES (%(rk)s, %(tenant)s, %(name)s, %(actor_type)s, %(actor_id)s, %(digest)s, %(spec)s,
        %(declared)s, 'active', to_timestamp(%(next_ms)s / 1000.0), akter_now())
ON CONFLICT (routing_key, tenant, name) DO UPDATE
   SET digest = excluded.digest, spec = excluded.spec, declared = excluded.declared,
       status = 'active', next_slot_at = excluded.next_slot_at, updated_at = excluded.updated_at
"""

FIRED: LiteralString = f"""
UPDATE akter_schedules
   SET last_slot_at = to_timestamp(%(slot_ms)s / 1000.0), fired = fired + 1, updated_at = akter_now(),
       next_slot_at = CASE WHEN %(manual)s THEN next_slot_at ELSE to_timestamp(%(next_ms)s / 1000.0) END
 WHERE {_KEY} AND digest = %(digest)s AND (%(manual)s OR status = 'active')
"""

PAUSED: LiteralString = f"""
UPDATE akter_schedules SET status = 'paused', next_slot_at = NULL, updated_at = akter_now()
 WHERE {_KEY} AND digest = %(digest)s
"""

DELETE: LiteralString = f"DELETE FROM akter_schedules WHERE {_KEY}"


class ScheduleHook:
    """Keeps ``akter_schedules`` in step with the turns of ``enable``'s commands; drops a stale
    fire. It runs first, before the workflow and outbox hooks write what the fire staged."""

    async def before_commit(self, conn: UnderLock, turn: Turn[Any], record: Committed) -> None:
        items = turn.staged.get(LAYER)
        if not items:
            return
        ref = record.ref
        for item in items:
            match item:
                case Fired(spec=spec, slot_ms=slot, next_ms=next_ms, manual=manual):
                    params = {"rk": ref.routing_key, "tenant": ref.tenant, "name": spec.name}
                    cur = await conn.execute(
                        FIRED,
                        {
                            **params,
                            "digest": spec.digest,
                            "slot_ms": slot,
                            "next_ms": next_ms,
                            "manual": manual,
                        },
                    )
                    if cur.rowcount == 0:
                        # paused, deleted or redefined since this timer was armed: nothing of
                        # this fire is written (the turn's receipt says which slot it was)
                        turn.staged.clear()
                        return
                case Armed(spec=spec, next_ms=next_ms):
                    await conn.execute(
                        UPSERT,
                        {
                            "rk": ref.routing_key,
                            "tenant": ref.tenant,
                            "name": spec.name,
                            "actor_type": ref.actor_type,
                            "actor_id": ref.actor_id,
                            "digest": spec.digest,
                            "spec": codec.encode(spec, Spec),
                            "declared": spec.declared,
                            "next_ms": next_ms,
                        },
                    )
                case Stopped(name=name, digest=digest, delete=delete):
                    params = {"rk": ref.routing_key, "tenant": ref.tenant, "name": name, "digest": digest}
                    await conn.execute(DELETE if delete else PAUSED, params)

    def after_commit(self, record: Committed) -> None:
        """Nothing: the timers it leaves are the outbox's to deliver."""
