"""The two ways a step boundary is written record identical rows: the one-settle scalar
``akter_wf_begin_one`` (a lone boundary) and the combined ``akter_wf_begin_many`` (through
``combine.py``'s own encoding), alone in its call or beside another execution's boundary."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from akter import codec
from akter.store.pool import open_pool
from akter.workflow.engine import combine
from tests.integration.conftest import Peek

RECOVERY = timedelta(seconds=30)
OWNER = {
    "rk": 4242,
    "tenant": "acme",
    "actor_type": "Steps",
    "actor_id": "rows",
    "generation": 3,
    "bucket": 0,
}
EXIT_A = codec.encode({"ok": "first"})
EXIT_B = codec.encode({"error": {"type": "Declined", "fields": {"why": "x" * 300}}})

#: (settles, step to write pending): the boundaries every path writes, in order — a first
#: attempt, one settled by the next, the same boundary again (a rerun: settling twice is
#: harmless, the pending row is found), a later attempt
SEQUENCE: list[tuple[list[tuple[str, str, int, int, bytes]], tuple[str, str, int, int]]] = [
    ([], ("first", "", 1, 1)),
    ([("first", "", 1, 1, EXIT_A)], ("second", "b/0", 2, 1)),
    ([("first", "", 1, 1, EXIT_A)], ("second", "b/0", 2, 1)),
    ([("second", "b/0", 2, 1, EXIT_B)], ("second", "b/0", 2, 2)),
]


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Any]:
    pool = await open_pool(database_url, min_size=1, max_size=2)
    try:
        yield pool
    finally:
        await pool.close()


def boundary(eid: str, settles: list[Any], write: tuple[str, str, int, int], generation: int = 3) -> Any:
    params = {**OWNER, "generation": generation, "eid": eid}
    return combine.Boundary(params, settles, *write, RECOVERY)


async def through(combiner: combine.Combiner, *boundaries: combine.Boundary) -> list[dict[str, Any]]:
    waiting = [combine._Waiting(b, asyncio.get_running_loop().create_future()) for b in boundaries]
    return await combiner._rows(waiting)


async def recorded(peek: Peek, eid: str) -> list[tuple[Any, ...]]:
    return await peek.rows(
        "SELECT step, scope, occurrence, attempt, kind, exit, settled_at IS NULL, started_at IS NULL"
        " FROM actor_workflow_step WHERE execution_id = %s ORDER BY step, scope, occurrence, attempt",
        eid,
    )


def answer(row: dict[str, Any]) -> tuple[Any, ...]:
    exit_ = row["exit"]
    return (row["fenced"], row["settled"], None if exit_ is None else bytes(exit_), row["started_ms"] is None)


async def test_the_scalar_and_the_combined_paths_record_identical_rows(pool: Any, peek: Peek) -> None:
    await peek.rows(
        "INSERT INTO actor_generations (routing_key, tenant, actor_type, actor_id, generation)"
        " VALUES (4242, 'acme', 'Steps', 'rows', 3) RETURNING 1"
    )
    combiner = combine.Combiner(pool, 1)
    answers: dict[str, list[tuple[Any, ...]]] = {"scalars": [], "combined": [], "beside": []}
    for settles, write in SEQUENCE:
        (alone,) = await through(combiner, boundary("e-scalars", settles, write))
        answers["scalars"].append(answer(alone))
        # combined with a boundary of another execution, listed first: each row goes to its own
        beside, mine = await through(
            combiner, boundary("e-beside", settles, write), boundary("e-combined", settles, write)
        )
        answers["combined"].append(answer(mine))
        answers["beside"].append(answer(beside))
    assert answers["combined"] == answers["scalars"]
    assert answers["beside"] == answers["scalars"]
    # fenced, the rerun settled nothing twice, no exit read back, a start time every time
    assert answers["scalars"] == [(True, 0, None, False), (True, 1, None, False)] * 2
    rows = {eid: await recorded(peek, eid) for eid in ("e-scalars", "e-combined", "e-beside")}
    assert rows["e-scalars"] == [
        ("first", "", 1, 1, "activity", EXIT_A, False, False),
        ("second", "b/0", 2, 1, "activity", EXIT_B, False, False),
        ("second", "b/0", 2, 2, "activity", None, True, False),
    ]
    assert rows["e-combined"] == rows["e-beside"] == rows["e-scalars"]


async def test_a_stale_boundary_in_a_combined_write_writes_nothing_and_the_others_are_written(
    pool: Any, peek: Peek
) -> None:
    await peek.rows(
        "INSERT INTO actor_generations (routing_key, tenant, actor_type, actor_id, generation)"
        " VALUES (4242, 'acme', 'Steps', 'rows', 3) RETURNING 1"
    )
    combiner = combine.Combiner(pool, 1)
    write = ("first", "", 1, 1)
    before, stale, after = await through(
        combiner,
        boundary("e-before", [], write),
        boundary("e-stale", [], write, generation=2),
        boundary("e-after", [], write),
    )
    assert (before["fenced"], stale["fenced"], after["fenced"]) == (True, False, True)
    assert await recorded(peek, "e-stale") == []
    assert await recorded(peek, "e-before") == await recorded(peek, "e-after") != []
