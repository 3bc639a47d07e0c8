"""Step boundaries of several passes, written in one round trip
(``sql/functions/akter_wf_begin_one.sql``, ``akter_wf_begin_many.sql``).

An activity's step boundary (settle what the pass ran, write the next attempt pending) is one
fenced statement per pass. With many executions in flight, several passes have one ready at the
same moment; each would take a pooled connection, adapt its parameters, send, wait and parse on
its own. The combiner sends them together instead: one call of ``akter_wf_begin_many`` for all
the boundaries that are ready, one transaction, one commit, one result row per boundary.

**No added latency.** A boundary is sent at once when fewer than ``most`` combined writes are in
flight (``EngineTuning.combine_most``: one, measured best in docs/performance.md);
otherwise it waits for one of them to return and goes with every boundary that became ready
meanwhile. There is no timer: a lone pass's write is sent the moment it is asked for.

**Each boundary on its own fence.** The function fences each boundary on its own generation: one
whose generation no longer holds writes nothing and returns ``fenced = false`` (that pass alone
goes ``Stale``); the others are written. The boundaries are taken in their actor rows' order, so
two combined writes never wait on each other's generation rows in a cycle.

**Failures.** A combined write that loses its connection (committed or not) raises that error
in every pass it carried, exactly as each one's single write would have: the pass puts its
settles back for its next write (settling twice is harmless — only an open row settles) and its
attempt's pending row is written again (a rerun finds its own row). One that fails otherwise (a
rival's lock held past the lock timeout, a deadlock) committed nothing, and may have failed for
one boundary alone: each of its boundaries is written again on its own, so the error reaches
only the pass whose boundary meets it. A pass cancelled while its
boundary waits to be sent takes it out: nothing of it is sent. One cancelled while its boundary is
in flight leaves the write to complete or not, as a cancelled single write does; the pass does
not act on it either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import weakref
from datetime import timedelta
from typing import TYPE_CHECKING, Any, LiteralString

import attrs
from psycopg.rows import dict_row

from akter import faults
from akter.store.sqlstate import is_connection_lost

if TYPE_CHECKING:
    import psycopg_pool

# One boundary with at most one settle, as scalars: a lone pass's usual write.
BEGIN_ONE: LiteralString = (
    "SELECT fenced, settled, started_ms, exit FROM akter_wf_begin_one("
    "%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, %(generation)s, %(eid)s, %(bucket)s::smallint,"
    " %(settle_step)s, %(settle_scope)s, %(settle_occurrence)s, %(settle_attempt)s, %(settle_exit)s,"
    " %(step)s, %(scope)s, %(occurrence)s, %(attempt)s, %(recovery)s)"
)
# Every boundary ready at once, as one jsonb array.
BEGIN_MANY: LiteralString = (
    "SELECT i, fenced, settled, started_ms, exit FROM akter_wf_begin_many(%(begins)s::jsonb)"
)

BEFORE = "workflow.before_combined_write"
AFTER = "workflow.after_combined_write"

#: an attempt to settle: step, scope, occurrence, attempt, exit
Settle = tuple[str, str, int, int, bytes]
_NO_SETTLE = {
    "settle_step": None,
    "settle_scope": None,
    "settle_occurrence": None,
    "settle_attempt": None,
    "settle_exit": None,
}


@attrs.frozen
class Boundary:
    """One pass's step boundary: settle ``settles``, then write ``step``/``scope``/
    ``occurrence``/``attempt`` pending. ``params``: the pass's actor key, execution, generation
    and bucket."""

    params: dict[str, Any]
    settles: list[Settle]
    step: str
    scope: str
    occurrence: int
    attempt: int
    recovery: timedelta

    def scalars(self) -> dict[str, Any]:
        """For ``akter_wf_begin_one`` (at most one settle)."""
        settle = _NO_SETTLE if not self.settles else dict(zip(_NO_SETTLE, self.settles[0], strict=True))
        return {
            **self.params,
            **settle,
            "step": self.step,
            "scope": self.scope,
            "occurrence": self.occurrence,
            "attempt": self.attempt,
            "recovery": self.recovery,
        }

    def element(self, i: int) -> dict[str, Any]:
        """As an element of ``akter_wf_begin_many``'s array (its index ``i``)."""
        p = self.params
        return {
            "i": i,
            "rk": p["rk"],
            "t": p["tenant"],
            "at": p["actor_type"],
            "a": p["actor_id"],
            "g": p["generation"],
            "e": p["eid"],
            "b": p["bucket"],
            "s": self.step,
            "sc": self.scope,
            "o": self.occurrence,
            "n": self.attempt,
            "r": self.recovery.total_seconds() * 1000,
            "x": [[s, sc, o, n, exit_.hex()] for s, sc, o, n, exit_ in self.settles],
        }


class _Waiting:
    __slots__ = ("boundary", "future")

    def __init__(self, boundary: Boundary, future: asyncio.Future[dict[str, Any]]) -> None:
        self.boundary = boundary
        self.future = future


class Combiner:
    """The boundaries of one pool's passes, sent together when several are ready at once."""

    def __init__(self, pool: psycopg_pool.AsyncConnectionPool[Any], most: int) -> None:
        self.pool = pool
        self.most = most
        self.waiting: list[_Waiting] = []
        self.flying = 0
        #: combined writes sent so far, and the boundaries they carried (for tests and profiles)
        self.writes = 0
        self.boundaries = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def begin(self, boundary: Boundary) -> dict[str, Any]:
        """Write one pass's boundary (with whatever else is ready); its row: ``fenced``,
        ``settled``, ``started_ms``, ``exit``."""
        waiting = _Waiting(boundary, asyncio.get_running_loop().create_future())
        self.waiting.append(waiting)
        if self.flying < self.most:
            self._send()
        try:
            return await waiting.future
        except asyncio.CancelledError:
            if waiting in self.waiting:  # not sent: nothing of it is written
                self.waiting.remove(waiting)
            raise

    def _send(self) -> None:
        batch, self.waiting = self.waiting, []
        if not batch:
            return
        self.flying += 1
        task = asyncio.get_running_loop().create_task(self._write(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, batch: list[_Waiting]) -> None:
        try:
            if faults.armed(BEFORE):
                await faults.hit(BEFORE, *_ids(batch))
            rows = await self._rows(batch)
            if faults.armed(AFTER):
                await faults.hit(AFTER, *_ids(batch))
            self.writes += 1
            self.boundaries += len(batch)
            for w, row in zip(batch, rows, strict=True):
                if not w.future.done():
                    w.future.set_result(row)
        except Exception as exc:
            if len(batch) > 1 and not is_connection_lost(exc):
                # nothing of it committed (the statement failed, its transaction rolled back), and
                # one boundary may be the cause (a rival's lock past the lock timeout): each goes
                # again alone, so that an error stays with the pass whose boundary meets it
                await asyncio.gather(*(self._write_alone(w) for w in batch))
            else:  # lost with the connection, committed or not: as each one's single write
                for w in batch:
                    _fail(w, exc)
        except BaseException:  # this task cancelled (the loop is ending): so are its passes' writes
            for w in batch:
                w.future.cancel()
            raise
        finally:
            self.flying -= 1
            if self.waiting and self.flying < self.most:
                with contextlib.suppress(RuntimeError):  # the loop is closing
                    self._send()

    async def _write_alone(self, w: _Waiting) -> None:
        if w.future.done():  # its pass left meanwhile
            return
        try:
            (row,) = await self._rows([w])
        except Exception as exc:
            _fail(w, exc)
        else:
            if not w.future.done():
                w.future.set_result(row)

    async def _rows(self, batch: list[_Waiting]) -> list[dict[str, Any]]:
        """The rows of the batch's boundaries, in its order: a lone boundary with at most one
        settle goes as scalars, anything else as one array."""
        if len(batch) == 1 and len(batch[0].boundary.settles) <= 1:
            async with self.pool.connection() as conn:
                cur = conn.cursor(row_factory=dict_row)
                await cur.execute(BEGIN_ONE, batch[0].boundary.scalars())
                row = await cur.fetchone()
            return [row if row is not None else dict(_LOST)]
        begins = json.dumps([w.boundary.element(i) for i, w in enumerate(batch)])
        async with self.pool.connection() as conn:
            cur = await conn.execute(BEGIN_MANY, {"begins": begins})
            got = await cur.fetchall()
        rows = [dict(_LOST) for _ in batch]  # a boundary the function did not return: a lost fence
        for i, fenced, settled, started_ms, exit_ in got:
            rows[i] = {"fenced": fenced, "settled": settled, "started_ms": started_ms, "exit": exit_}
        return rows


def _ids(batch: list[_Waiting]) -> list[str]:
    """The ids a fault point at a combined write matches: each boundary's actor and execution."""
    return [i for w in batch for i in (w.boundary.params["actor_id"], w.boundary.params["eid"])]


def _fail(w: _Waiting, exc: Exception) -> None:
    if not w.future.done():
        w.future.set_exception(exc)
        w.future.exception()  # retrieved: a pass that left does not warn about it


_LOST: dict[str, Any] = {"fenced": False, "settled": 0, "started_ms": None, "exit": None}

_COMBINERS: weakref.WeakKeyDictionary[Any, Combiner] = weakref.WeakKeyDictionary()


def of(pool: psycopg_pool.AsyncConnectionPool[Any], most: int) -> Combiner:
    """The combiner of ``pool``'s passes (one per pool; ``most``: combined writes in flight)."""
    combiner = _COMBINERS.get(pool)
    if combiner is None:
        combiner = _COMBINERS[pool] = Combiner(pool, most)
    return combiner
