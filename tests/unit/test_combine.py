"""The combiner's scheduling (``akter/workflow/engine/combine.py``), against a pool whose statements a
test answers by hand: a lone boundary is sent at once, boundaries that become ready while a write
is in flight go together in the next one, a failed write fails every pass it carried, and a
boundary whose pass is cancelled before it is sent is never sent."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from akter.workflow.engine import combine


class Sent:
    """One statement the combiner sent, answered when the test says."""

    def __init__(self, query: str, params: dict[str, Any]) -> None:
        self.query = query
        self.params = params
        self.answer: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()

    def eids(self) -> list[str]:
        if "begins" in self.params:
            return [b["e"] for b in json.loads(self.params["begins"])]
        return [self.params["eid"]]

    def answer_all(self, fenced: dict[str, bool] | None = None) -> None:
        fenced = fenced or {}
        if "begins" in self.params:
            begins = json.loads(self.params["begins"])
            self.answer.set_result([(b["i"], fenced.get(b["e"], True), len(b["x"]), 7, None) for b in begins])
        else:
            eid = self.params["eid"]
            settled = 0 if self.params["settle_step"] is None else 1
            self.answer.set_result(
                [{"fenced": fenced.get(eid, True), "settled": settled, "started_ms": 7, "exit": None}]
            )


class Cursor:
    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self.rows: list[Any] = []

    async def execute(self, query: str, params: dict[str, Any]) -> Cursor:
        sent = Sent(query, params)
        self.conn.pool.sent.append(sent)
        self.conn.pool.arrived.set()
        self.rows = await sent.answer
        return self

    async def fetchone(self) -> Any:
        return self.rows[0]

    async def fetchall(self) -> list[Any]:
        return self.rows


class Conn:
    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def cursor(self, row_factory: Any = None) -> Cursor:
        return Cursor(self)

    async def execute(self, query: str, params: dict[str, Any]) -> Cursor:
        return await Cursor(self).execute(query, params)


class Pool:
    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.arrived = asyncio.Event()

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Conn]:
        yield Conn(self)

    async def next_sent(self, count: int) -> list[Sent]:
        async with asyncio.timeout(5):
            while len(self.sent) < count:
                self.arrived.clear()
                await self.arrived.wait()
        return self.sent[:count]


def boundary(eid: str, settles: int = 1) -> combine.Boundary:
    params = {
        "rk": 1,
        "tenant": "t",
        "actor_type": "A",
        "actor_id": eid,
        "generation": 1,
        "eid": eid,
        "bucket": 0,
    }
    return combine.Boundary(
        params, [("s", "", 1, 1, b"\x00x")] * settles, "next", "", 1, 1, timedelta(seconds=30)
    )


@pytest.fixture
def pool() -> Pool:
    return Pool()


async def test_a_lone_boundary_is_sent_at_once_as_scalars(pool: Pool) -> None:
    combiner = combine.Combiner(pool, 1)  # type: ignore[arg-type]
    task = asyncio.create_task(combiner.begin(boundary("e1")))
    (sent,) = await pool.next_sent(1)
    assert sent.query == combine.BEGIN_ONE
    assert sent.params["settle_step"] == "s"
    sent.answer_all()
    assert (await task)["fenced"] is True


async def test_boundaries_ready_while_a_write_is_in_flight_go_together_in_the_next(pool: Pool) -> None:
    combiner = combine.Combiner(pool, 1)  # type: ignore[arg-type]
    first = asyncio.create_task(combiner.begin(boundary("e1")))
    (in_flight,) = await pool.next_sent(1)
    later = [asyncio.create_task(combiner.begin(boundary(eid))) for eid in ("e2", "e3", "e4")]
    await asyncio.sleep(0)  # they reach the combiner and wait: nothing more is sent meanwhile
    assert len(pool.sent) == 1
    assert [w.boundary.params["eid"] for w in combiner.waiting] == ["e2", "e3", "e4"]
    in_flight.answer_all()
    await first
    _, together = await pool.next_sent(2)
    assert together.query == combine.BEGIN_MANY
    assert together.eids() == ["e2", "e3", "e4"]
    together.answer_all(fenced={"e3": False})
    rows = [await t for t in later]
    assert [r["fenced"] for r in rows] == [True, False, True]
    assert (combiner.writes, combiner.boundaries) == (2, 4)


async def test_a_lone_boundary_with_several_settles_goes_as_an_array(pool: Pool) -> None:
    combiner = combine.Combiner(pool, 1)  # type: ignore[arg-type]
    task = asyncio.create_task(combiner.begin(boundary("e1", settles=2)))
    (sent,) = await pool.next_sent(1)
    assert sent.query == combine.BEGIN_MANY
    assert json.loads(sent.params["begins"])[0]["x"] == [["s", "", 1, 1, "0078"]] * 2
    sent.answer_all()
    assert (await task)["settled"] == 2


async def combined_write_of(
    pool: Pool, combiner: combine.Combiner, eids: list[str]
) -> tuple[list[Any], Sent]:
    """Boundaries of ``eids`` sent together (behind a first write), and that write, unanswered."""
    first = asyncio.create_task(combiner.begin(boundary("e0")))
    (in_flight,) = await pool.next_sent(1)
    later = [asyncio.create_task(combiner.begin(boundary(eid))) for eid in eids]
    await asyncio.sleep(0)
    in_flight.answer_all()
    await first
    _, together = await pool.next_sent(2)
    assert together.eids() == eids
    return later, together


async def test_a_combined_write_that_lost_its_connection_fails_every_pass_it_carried(pool: Pool) -> None:
    combiner = combine.Combiner(pool, 1)  # type: ignore[arg-type]
    later, together = await combined_write_of(pool, combiner, ["e2", "e3"])
    together.answer.set_exception(psycopg.OperationalError("server closed the connection unexpectedly"))
    for task in later:
        with pytest.raises(psycopg.OperationalError):
            await task
    await asyncio.gather(*combiner._tasks)
    assert len(pool.sent) == 2  # committed or not, nothing is sent again for them here
    assert combiner.flying == 0  # and the next boundary is sent at once
    again = asyncio.create_task(combiner.begin(boundary("e2")))
    (*_, retried) = await pool.next_sent(3)
    retried.answer_all()
    assert (await again)["fenced"] is True


async def test_a_combined_write_failing_otherwise_writes_each_boundary_alone(pool: Pool) -> None:
    combiner = combine.Combiner(pool, 1)  # type: ignore[arg-type]
    later, together = await combined_write_of(pool, combiner, ["e2", "e3", "e4"])
    together.answer.set_exception(psycopg.errors.LockNotAvailable("lock timeout"))
    alone = (await pool.next_sent(5))[2:]
    assert sorted(sent.eids()[0] for sent in alone) == ["e2", "e3", "e4"]
    assert {sent.query for sent in alone} == {combine.BEGIN_ONE}
    for sent in alone:  # the lock is e3's: only its pass meets the error
        if sent.eids() == ["e3"]:
            sent.answer.set_exception(psycopg.errors.LockNotAvailable("lock timeout"))
        else:
            sent.answer_all()
    assert (await later[0])["fenced"] is True
    with pytest.raises(psycopg.errors.LockNotAvailable):
        await later[1]
    assert (await later[2])["fenced"] is True
    await asyncio.gather(*combiner._tasks)
    assert combiner.flying == 0


async def test_a_pass_cancelled_while_its_boundary_waits_never_sends_it(pool: Pool) -> None:
    combiner = combine.Combiner(pool, 1)  # type: ignore[arg-type]
    first = asyncio.create_task(combiner.begin(boundary("e1")))
    (in_flight,) = await pool.next_sent(1)
    leaving = asyncio.create_task(combiner.begin(boundary("e2")))
    staying = asyncio.create_task(combiner.begin(boundary("e3")))
    await asyncio.sleep(0)
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert [w.boundary.params["eid"] for w in combiner.waiting] == ["e3"]
    in_flight.answer_all()
    await first
    _, after = await pool.next_sent(2)
    assert after.eids() == ["e3"]
    after.answer_all()
    await staying
