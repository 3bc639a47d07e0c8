"""A pass's waits on the actor's events (invariant 6): registering a wait, scanning the events
after its scanned mark in batches, matching them against its ``where`` predicate, timing it out
only once every event stamped by its deadline was read, and settling it under the fence. The
pass (``passes.py``) serves an ``AwaitEvent`` need here: it hands over its ``Outcomes`` (the
fenced writer that carries its unwritten settles), its driver and its event cursor, and gets a
``Served`` back (what the need came to, whether a row changed, the event a match consumed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg.rows import dict_row

from akter import codec
from akter.errors import CorruptRecord
from akter.workflow.api.declare import Wait
from akter.workflow.core.driver import AwaitEvent, Driver, StepKey
from akter.workflow.core.step_params import key_params, record_params
from akter.workflow.engine import queries
from akter.workflow.engine.outcomes import Outcomes, Served, rewrote

#: events read per scan statement
SCAN_BATCH = 200


async def serve(
    need: AwaitEvent, out: Outcomes, driver: Driver, cursor: int, now_ms: Callable[[], int]
) -> Served:
    """A wait the driver asks for: register it, or scan the actor's events after its mark for
    one that matches, or time it out; True when a row changed (advance again), else its due
    time (None: only an event wakes it)."""
    effect, key, row = need.effect, need.key, need.row
    step = effect.step
    tag = step.event.__name__
    if row is None:
        after = None if effect.timeout is None else effect.timeout.total_seconds() * 1000
        await out.record(driver, record_params("wait", key, after_ms=after, tag=tag, cursor=cursor))
        return Served(True, wrote=True)
    scanned = row.scanned if row.scanned is not None else cursor
    async with out.pool.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(queries.SCAN, {**out.params, "tag": tag, "after": scanned, "limit": SCAN_BATCH})
        events = await cur.fetchall()
    now = events[0]["now_ms"] if events else now_ms()
    last = scanned
    for ev in events:
        last = ev["sequence"]
        if row.due_ms is not None and ev["created_ms"] > row.due_ms:
            # stamped after the deadline: it cannot win the race with the timeout. Events
            # are not in time order when the clock stepped back, so later ones may still
            # be in time: skip it, never stop the scan here.
            continue
        try:
            primitive = codec.decode_primitive(bytes(ev["value"]))
            value: Any = codec.from_primitive(primitive, step.event)
        except CorruptRecord as exc:
            # stored data, not the body's doing: park with the reason (invariant 13)
            raise CorruptRecord(f"wait {key}: event #{last} does not decode: {exc}") from exc
        try:
            matched = effect.where is None or bool(effect.where(value))
        except Exception as exc:
            where = getattr(effect.where, "__qualname__", repr(effect.where))
            message = f"the where predicate {where} of wait {key} raised on event #{last}: {exc!r}"
            defect = {"type": type(exc).__qualname__, "message": message}
            return await _settle(out, driver, key, effect, {"defect": defect}, seq=last, timed_out=False)
        if matched:
            match = {"ok": {"seq": last, "event": primitive}}
            return await _settle(out, driver, key, effect, match, seq=last, timed_out=False)
    if len(events) == SCAN_BATCH:
        await _mark_scanned(out, driver, key, last)
        return Served(True, wrote=True)
    if row.due_ms is not None and now >= row.due_ms:
        return await _settle(out, driver, key, effect, {"ok": None}, seq=last, timed_out=True)
    moved = last != scanned
    if moved:
        await _mark_scanned(out, driver, key, last)
    return Served(row.due_ms, wrote=moved)


async def _mark_scanned(out: Outcomes, driver: Driver, key: StepKey, scanned: int) -> None:
    await out.fenced(queries.MARK_SCANNED, {**key_params(key), "scanned": scanned})
    rewrote(driver, key, scanned=scanned)


async def _settle(
    out: Outcomes,
    driver: Driver,
    key: StepKey,
    effect: Wait,
    exit_: dict[str, Any],
    *,
    seq: int,
    timed_out: bool,
) -> Served:
    """Settle a wait; True when a row changed (advance again). A refused timeout (an event
    stamped in time arrived past the scanned mark) has still advanced the scanned mark, so
    the next scan starts beyond what this one read."""
    encoded = codec.encode(exit_)
    result = await out.fenced(
        queries.SETTLE_WAIT,
        {
            **key_params(key),
            "tag": effect.step.event.__name__,
            "exit": encoded,
            "scanned": seq,
            "timeout": timed_out,
        },
    )
    if result["settled"]:
        rewrote(driver, key, exit_=encoded, scanned=seq)
        return Served(True, wrote=True, cursor=seq if not timed_out and "ok" in exit_ else None)
    if timed_out:
        rewrote(driver, key, scanned=seq)  # refused: only the scanned mark moved
        return Served(True, wrote=True)  # there are new events to read
    await out.reload(driver, key)  # already settled (not by this pass): read what is there
    return Served(None)
