"""Read-only queries: answered from the last committed state, with nothing written and no lock."""

from __future__ import annotations

import asyncio
from typing import Any

import attrs
import pytest
from returns.result import Failure, Success

import akter
from akter import testing
from tests.apps.counter import Add, Added, CounterState
from tests.integration.conftest import Peek


@attrs.frozen
class Total:
    pass


@attrs.frozen
class Last:
    count: int


@attrs.frozen
class Summary:
    total: int
    sequence: int
    recent: tuple[int, ...]


@attrs.frozen(auto_exc=True)
class NothingYet(Exception):
    actor: str


def members_only(caller: akter.Caller, member: Any) -> bool:
    """Commands for anyone; queries for users only (a policy can tell them apart)."""
    return getattr(member, "kind", "command") != "query" or isinstance(caller, akter.User)


Tally = akter.Actor("Tally", state=CounterState, events=[Added], access=members_only)


@Tally.command
def bump(turn: akter.Turn[CounterState], cmd: Add) -> int:
    total = turn.state.count + cmd.amount
    turn.state = attrs.evolve(turn.state, count=total)
    turn.emit(Added(amount=cmd.amount, total=total))
    return total


@Tally.query
def total(view: akter.View[CounterState], q: Total) -> int:
    return view.state.count


@Tally.query(recent=2, errors=[NothingYet])
def summary(view: akter.View[CounterState], q: Last) -> Summary:
    if view.sequence == 0:
        raise NothingYet(actor=view.ref.actor_id)
    amounts = tuple(e.value.amount for e in view.recent if isinstance(e.value, Added))
    return Summary(total=view.state.count, sequence=view.sequence, recent=amounts[-q.count :])


USER = akter.User("u1")

# every row a turn writes, and the row versions (xmin) of the actor rows: a write of any kind,
# or a row lock (which sets xmax), changes one of them
SNAPSHOT = """
SELECT (SELECT count(*) FROM actor_receipts), (SELECT count(*) FROM actor_events),
       (SELECT count(*) FROM actor_outbox),
       (SELECT array_agg((xmin::text, xmax::text, version) ORDER BY actor_id) FROM actor_generations),
       (SELECT array_agg((xmin::text, updated_at) ORDER BY actor_id) FROM actor_state)
"""


def _app(database_url: str) -> akter.App:
    return akter.App([Tally], database_url=database_url)


async def test_a_query_answers_from_the_committed_state_and_writes_nothing(
    database_url: str, peek: Peek
) -> None:
    async with _app(database_url) as app, app.client(USER) as client:
        handle = client.actor(Tally, "t1", tenant="acme")
        assert await handle.query(total, Total()) == Success(0)
        refused = await handle.query(summary, Last(1))
        assert isinstance(refused, Failure)
        assert attrs.astuple(refused.failure()) == ("t1",)
        assert isinstance(refused.failure(), NothingYet)
        for amount in (1, 2, 3):
            await handle.send(bump, Add(amount))
        before = await peek.rows(SNAPSHOT)
        for _ in range(20):
            assert await handle.query(total, Total()) == Success(6)
        assert await handle.query(summary, Last(5)) == Success(Summary(total=6, sequence=3, recent=(2, 3)))
        assert await peek.rows(SNAPSHOT) == before
        # another tenant's actor of the same id is another actor
        assert await client.actor(Tally, "t1", tenant="other").query(total, Total()) == Success(0)
    assert await peek.rows(SNAPSHOT) == before


async def test_a_query_neither_waits_for_nor_sees_a_turn_in_flight(database_url: str, peek: Peek) -> None:
    async with _app(database_url) as app, app.client(USER) as client:
        handle = client.actor(Tally, "t1", tenant="acme")
        await handle.send(bump, Add(1))
        gate = testing.pause("turn.before_commit", match="t1")
        turn = asyncio.create_task(handle.send(bump, Add(10)))
        await gate.reached()  # the turn holds the row lock and has written, uncommitted
        try:
            assert await handle.query(total, Total()) == Success(1)
            assert await handle.query(summary, Last(9)) == Success(Summary(total=1, sequence=1, recent=(1,)))
        finally:
            gate.release()
        assert await turn == Success(11)
        assert await handle.query(total, Total()) == Success(11)


async def test_a_query_is_refused_by_the_access_policy_and_for_a_wrong_payload(
    database_url: str, peek: Peek
) -> None:
    async with _app(database_url) as app, app.client() as client:
        anonymous = client.actor(Tally, "t1", tenant="acme")
        assert await anonymous.send(bump, Add(1)) == Success(1)  # commands are open to all
        with pytest.raises(akter.AccessDenied, match=r"may not ask <query Tally\.total>"):
            await anonymous.query(total, Total())
        handle = client.actor(Tally, "t1", tenant="acme", caller=USER)
        with pytest.raises(akter.InvalidInput, match="takes a Total, got Add"):
            await handle.query(total, Add(1))  # type: ignore[arg-type]
        with pytest.raises(akter.InvalidInput, match=r"Last\.count: expected int"):
            await handle.query(summary, Last("two"))  # type: ignore[arg-type]
        with pytest.raises(akter.InvalidInput, match="is not a query of Tally"):
            await handle.query(bump, Add(1))  # type: ignore[arg-type]
    assert await peek.count("actor_receipts") == 1


def test_the_sync_client_answers_queries(database_url: str) -> None:
    app = _app(database_url)
    with app.running(), app.sync_client(USER) as client:
        handle = client.actor(Tally, "t1", tenant="acme")
        handle.send(bump, Add(4))
        assert handle.query(total, Total()) == Success(4)


def test_a_query_declaration_is_checked() -> None:
    Other = akter.Actor("Other", state=CounterState)

    with pytest.raises(akter.DeclarationError) as info:

        @Other.query(recent=-1)
        async def bad(view: akter.View[CounterState], q: complex) -> None:
            pass

    problems = "\n".join(info.value.problems)
    assert "use def, not async def" in problems
    assert "recent must be an int" in problems
    assert "complex" in problems
