"""A pass's waits on the actor's events (invariant 6): registering a wait, scanning the events
after its scanned mark in batches, matching them against its ``where`` predicate, timing it out
only once every event stamped by its deadline was read, and settling it under the fence. The
pass (``passes.py``) serves an ``AwaitEvent`` need here; functions take it as ``self``, as
``children.py`` and ``holds.py`` do."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from psycopg.rows import dict_row

from akter import codec
from akter.errors import CorruptRecord
from akter.workflow import queries
from akter.workflow.driver import AwaitEvent, StepKey
from akter.workflow.effects import Wait
from akter.workflow.step_params import key_params, record_params

if TYPE_CHECKING:
    from akter.workflow.passes import Pass

#: events read per scan statement
SCAN_BATCH = 200


async def serve(self: Pass, need: AwaitEvent) -> bool | int | None:
    """A wait the driver asks for: register it, or scan the actor's events after its mark for
    one that matches, or time it out; True when a row changed (advance again), else its due
    time (None: only an event wakes it)."""
    effect, key, row = need.effect, need.key, need.row
    step = effect.step
    tag = step.event.__name__
    if row is None:
        after = None if effect.timeout is None else effect.timeout.total_seconds() * 1000
        await self._record(record_params("wait", key, after_ms=after, tag=tag, cursor=self.cursor))
        return True
    scanned = row.scanned if row.scanned is not None else self.cursor
    async with self.sender.pool.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(queries.SCAN, {**self.params, "tag": tag, "after": scanned, "limit": SCAN_BATCH})
        events = await cur.fetchall()
    now = events[0]["now_ms"] if events else self.now_ms()
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
            return await _settle(self, key, effect, {"defect": defect}, last, timed_out=False)
        if matched:
            match = {"ok": {"seq": last, "event": primitive}}
            return await _settle(self, key, effect, match, last, timed_out=False)
    if len(events) == SCAN_BATCH:
        await _mark_scanned(self, key, last)
        return True
    if row.due_ms is not None and now >= row.due_ms:
        return await _settle(self, key, effect, {"ok": None}, last, timed_out=True)
    if last != scanned:
        await _mark_scanned(self, key, last)
    return row.due_ms


async def _mark_scanned(self: Pass, key: StepKey, scanned: int) -> None:
    await self._fenced(queries.MARK_SCANNED, {**key_params(key), "scanned": scanned})
    self._rewrote(key, scanned=scanned)
    self.writes += 1


async def _settle(
    self: Pass, key: StepKey, effect: Wait, exit_: dict[str, Any], seq: int, *, timed_out: bool
) -> bool | int | None:
    """Settle a wait; True when a row changed (advance again). A refused timeout (an event
    stamped in time arrived past the scanned mark) has still advanced the scanned mark, so
    the next scan starts beyond what this one read."""
    encoded = codec.encode(exit_)
    result = await self._fenced(
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
        self._rewrote(key, exit_=encoded, scanned=seq)
    elif timed_out:
        self._rewrote(key, scanned=seq)  # refused: only the scanned mark moved
    else:
        await self._reload(key)  # already settled (not by this pass): read what is there
    if result["settled"]:
        self.writes += 1
        if not timed_out and "ok" in exit_:
            self.cursor = max(self.cursor, seq)
        return True
    if timed_out:
        self.writes += 1  # the scanned mark moved; there are new events to read
        return True
    return None
