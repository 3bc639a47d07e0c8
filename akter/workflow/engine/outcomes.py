"""Where a step's outcome lands: the one carrier of what a pass decided and has not written yet.

An activity attempt's outcome is decided in the pass (``Pass._attempt``: its exit, its retry
time) and recorded in the driver at once, so the body goes on in memory. It is written by the
pass's next write, under the fence, in the same statement — one statement per step boundary.
Every such write is a method of ``Outcomes``, so attempt *n*'s outcome lands in exactly one of:

* ``begin``: the next attempt's pending row (``combine.py``: with the boundaries other passes
  have ready at the same moment, one round trip);
* ``carrying``: a record (a clock, wait or race), a child's start, the suspension, a hold, the
  finish or a continue-as-new — each statement takes the settles as parameters
  (``sql/functions/akter_wf_settle_many.sql``);
* ``flush``: on its own, before the pass waits for anything else, so no outcome stays
  unwritten while the pass is idle;
* ``hand_off``: with the timer made due now, as a draining relay hands the execution on.

A write that does not complete puts its settles back for the next one: settling twice is
harmless, only an open row settles. Nothing outside the pass acts on an outcome before its
write committed: the next attempt's work starts only once ``begin`` returned.

The pass's collaborators (waits: ``waiting.py``; children: ``children.py``) write through the
same carrier and return to the pass what the need came to — a wait a ``Served`` (with whether a
row changed and the event it consumed), a child True or None. None of them takes the pass itself.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import attrs
from psycopg.rows import dict_row

from akter import codec
from akter.outbox import queries as outbox_queries
from akter.workflow.core.driver import Driver, StepKey
from akter.workflow.core.step_params import key_params, settle_params
from akter.workflow.core.step_params import step_row as _row
from akter.workflow.engine import combine, queries

if TYPE_CHECKING:
    import psycopg_pool

    from akter.ids import ActorRef

#: an attempt run and recorded in the driver, not written yet: its key, number and exit
Settle = tuple[StepKey, int, bytes]
CLOCK_EXIT = codec.encode({"ok": None})


class Stale(BaseException):
    """This runner's generation no longer holds: another activation owns the actor.

    A control-flow signal, not an error (Trio's ``Cancelled`` is the model): it derives from
    ``BaseException`` so that no ``except Exception`` between the fenced write and ``Pass.run``
    (an attempt's handler of the activity's own errors, a loop that logs and goes on) can take it
    for a failure; only ``Pass.run`` catches it, and abandons the pass quietly."""


@attrs.frozen
class Served:
    """What serving one need came to, for the pass: ``result`` True when something was recorded
    (advance again), an int when parked until that time (ms), None when parked with no due time;
    ``wrote``: a row changed (a refused suspension with no change since is backed off);
    ``cursor``: the event a settled wait consumed, which later waits start after."""

    result: bool | int | None
    wrote: bool = False
    cursor: int | None = None


class Outcomes:
    """The settles of one pass not written yet, and every fenced write of the pass."""

    def __init__(
        self,
        pool: psycopg_pool.AsyncConnectionPool[Any],
        ref: ActorRef,
        params: dict[str, Any],
        *,
        recovery: timedelta,
        most: int,
    ) -> None:
        self.pool = pool
        self.ref = ref
        #: the pass's fence: owner, execution, generation, bucket
        self.params = params
        self.recovery = recovery
        self.most = most
        self.pending: list[Settle] = []

    def add(self, settle: Settle) -> None:
        """An outcome recorded in the driver, to land with the pass's next write."""
        self.pending.append(settle)

    def take(self) -> list[Settle]:
        """The outcomes not written yet, for a write that carries them (``begin``)."""
        taken, self.pending = self.pending, []
        return taken

    def _put_back(self, settles: list[Settle]) -> None:
        self.pending[:0] = settles  # settling twice is harmless: only an open row settles

    def stale(self) -> Stale:
        return Stale(f"generation {self.params['generation']} of {self.ref} no longer holds")

    async def one(self, sql: Any, extra: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """One statement with the pass's parameters; its first row, if it returns one."""
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(sql, {**self.params, **(extra or {})})
            return await cur.fetchone() if cur.description else None

    async def fenced_now(self, sql: Any, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """A fenced write that carries no outcome; ``Stale`` when the generation is gone."""
        row = await self.one(sql, extra)
        if row is None or not row["fenced"]:
            raise self.stale()
        return row

    async def fenced(self, sql: Any, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """A fenced write whose statement takes no settles: the outcomes so far land first."""
        await self.flush()
        return await self.fenced_now(sql, extra)

    async def carrying(
        self, sql: Any, extra: dict[str, Any], carry: list[Settle] | None = None
    ) -> dict[str, Any]:
        """A fenced write that settles the outcomes so far (``carry``, or all not written yet)
        in the same statement. Should it not complete, they are left to the next write."""
        settles = self.take() if carry is None else carry
        try:
            return await self.fenced_now(sql, {**extra, **settle_params(settles)})
        except BaseException:
            self._put_back(settles)
            raise

    async def begin(self, key: StepKey, attempt: int, carry: list[Settle]) -> dict[str, Any]:
        """The step boundary before an attempt's work (``akter_wf_begin_one.sql``,
        ``akter_wf_begin_many.sql``): settle ``carry``, write the attempt pending, keep the recovery timer
        armed — sent with the boundaries of the other passes ready at the same moment (``combine.py``)."""
        boundary = combine.Boundary(
            self.params,
            [(k.step, k.scope, k.occurrence, a, e) for k, a, e in carry],
            key.step,
            key.scope,
            key.occurrence,
            attempt,
            self.recovery,
        )
        try:
            row = await combine.of(self.pool, self.most).begin(boundary)
        except BaseException:
            self._put_back(carry)
            raise
        if not row["fenced"]:
            self._put_back(carry)  # as ``carrying`` leaves them: the pass ends here anyway
            raise self.stale()
        return row

    async def flush(self) -> None:
        """Write the outcomes so far on their own, before the pass waits for anything else."""
        if self.pending:
            await self.carrying(queries.SETTLE_STEPS, {})

    async def record(self, driver: Driver, params: dict[str, Any]) -> None:
        """Record a step (with the outcomes so far, in one statement) and take its row as the
        statement returns it: a clock already due comes back settled."""
        row = await self.carrying(queries.RECORD_STEP, {**params, "clock_exit": CLOCK_EXIT})
        driver.record(_row(row))

    async def reload(self, driver: Driver, key: StepKey) -> None:
        """Read a step's rows as another writer left them."""
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(queries.STEP_ROW, {**self.params, **key_params(key)})
            rows = await cur.fetchall()
        for r in rows:
            driver.record(_row(r))

    async def hand_off(self) -> None:
        """The relay drains: the outcomes so far and the timer made due now, under the fence in
        one transaction, so whichever process owns the bucket next resumes the execution at
        once instead of after its recovery timer."""
        settles = self.take()
        try:
            async with self.pool.connection() as conn, conn.transaction():
                cur = await conn.execute(queries.SETTLE_STEPS, {**self.params, **settle_params(settles)})
                row = await cur.fetchone()
                fenced = row is not None and bool(row[0])
                if fenced:  # else the fence's lock went with a newer generation: nothing written
                    await conn.execute(queries.OFFER_NOW, self.params)
                    await conn.execute(outbox_queries.NOTIFY, {"bucket_text": str(self.ref.bucket)})
        except BaseException:
            self._put_back(settles)
            raise
        if not fenced:
            raise self.stale()


def rewrote(driver: Driver, key: StepKey, *, exit_: bytes | None = None, scanned: int | None = None) -> None:
    """Record in the driver what a fenced write of the pass did to a clock's or wait's row
    (attempt 1), instead of reading it back: the fence rules out any other writer."""
    row = driver.history[key][-1]
    if exit_ is not None:
        row = attrs.evolve(row, exit=codec.decode_primitive(exit_))
    if scanned is not None:  # greatest(), which ignores NULL, as the statements do
        row = attrs.evolve(row, scanned=scanned if row.scanned is None else max(row.scanned, scanned))
    driver.record(row)
