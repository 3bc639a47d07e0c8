"""Bad input at every public entry point gets a typed error and writes nothing (issue 9).

Each test throws generated input at one entry point — identities, callers, command ids,
execution ids, timings, workflow payloads — and asserts, through a second connection, that a
refused input left every table as it was and that nothing but an ``akter.AkterError`` escaped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import akter

TABLES = ("actor_generations", "actor_receipts", "actor_events", "actor_outbox", "actor_workflow_executions")


@attrs.frozen
class Count:
    n: int = 0


@attrs.frozen
class Bump:
    by: int


@attrs.frozen
class Later:
    seconds: float = 0
    at: datetime | None = None


@attrs.frozen
class Order:
    id: str


Door = akter.Actor("Door", state=Count)


@Door.command
def bump(turn: akter.Turn[Count], cmd: Bump) -> int:
    turn.state = Count(turn.state.n + cmd.by)
    return turn.state.n


@Door.command
def later_command(turn: akter.Turn[Count], cmd: Later) -> None:
    if cmd.at is not None:
        turn.send(turn.ref.actor_id, bump, Bump(1), at=cmd.at)
    else:
        turn.send(turn.ref.actor_id, bump, Bump(1), after=timedelta(seconds=cmd.seconds))


Fulfil = Door.workflow("Fulfil", input=Order, key=lambda order: order.id)


@Fulfil.body
async def fulfil(wf: akter.WorkflowContext, order: Order) -> None:
    return None


#: text as hostile callers send it: NULs, lone surrogates, astral characters, long runs
HOSTILE = st.text(
    alphabet=st.characters(codec=None, categories=None, blacklist_categories=()), max_size=300
) | st.sampled_from(["", "\x00", "a\x00b", "\udc80", "x" * 2000, "v1.1.2.zz", "١٢٣"])

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
#: for entry points that refuse before any database round trip: cheap, so thousands of cases
MANY = settings(SETTINGS, max_examples=1000)


@pytest.fixture
async def env(database_url: str) -> AsyncIterator[tuple[Any, Callable[[], Any]]]:
    app = akter.App([Door], database_url=database_url)
    async with (
        app.client() as client,
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) as peek,
    ):

        async def counts() -> dict[str, int]:
            out = {}
            for table in TABLES:
                cur = await peek.execute(f"SELECT count(*) FROM {table}")  # type: ignore[arg-type]
                out[table] = (await cur.fetchone())[0]  # type: ignore[index]
            return out

        yield client, counts


async def refused_or_done(action: Any, counts: Callable[[], Any]) -> bool:
    """Run ``action``; True when it was refused with a typed error having written nothing."""
    before = await counts()
    try:
        await action()
    except akter.AkterError:
        assert await counts() == before, "a refused input wrote something"
        return True
    return False


@given(tenant=HOSTILE, actor_id=HOSTILE)
@SETTINGS
async def test_identities(env: Any, tenant: str, actor_id: str) -> None:
    client, counts = env
    await refused_or_done(lambda: client.actor(Door, actor_id, tenant=tenant).send(bump, Bump(1)), counts)


@given(subject=HOSTILE)
@SETTINGS
async def test_caller_subjects(env: Any, subject: str) -> None:
    client, counts = env

    async def send() -> None:
        await client.actor(Door, "d1", tenant="t", caller=akter.User(subject)).send(bump, Bump(1))

    await refused_or_done(send, counts)


@given(command_id=HOSTILE | st.builds(lambda a, b: f"v1.{a}.{b}.{'0' * 32}", st.integers(), st.integers()))
@MANY
async def test_command_ids(env: Any, command_id: str) -> None:
    client, counts = env
    await refused_or_done(
        lambda: client.actor(Door, "d2", tenant="t").send(bump, Bump(1), command_id=command_id), counts
    )


@given(execution_id=HOSTILE | st.text(max_size=40).map(lambda t: "x1." + t))
@MANY
async def test_execution_ids(env: Any, execution_id: str) -> None:
    client, counts = env

    async def reattach() -> None:
        run = client.run(Fulfil, execution_id, tenant="t")
        await run.poll()
        await run.interrupt()

    assert await refused_or_done(reattach, counts), "a made-up execution id was accepted"


@given(
    later=st.builds(Later, seconds=st.floats(min_value=-1e12, max_value=1e15, allow_nan=False))
    | st.builds(
        Later,
        at=st.datetimes(
            timezones=st.just(UTC), min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)
        ),
    )
)
@SETTINGS
async def test_send_timings(env: Any, later: Later) -> None:
    client, counts = env
    await refused_or_done(lambda: client.actor(Door, "d3", tenant="t").send(later_command, later), counts)


@given(
    payload=st.one_of(
        st.builds(Bump, by=st.integers()), st.builds(Order, id=HOSTILE), st.none(), st.integers()
    )
)
@SETTINGS
async def test_workflow_starts(env: Any, payload: Any) -> None:
    client, counts = env
    await refused_or_done(lambda: client.actor(Door, "d4", tenant="t").start(Fulfil, payload), counts)


def test_declaring_with_hostile_names_is_a_declaration_error() -> None:
    for name in (["list"], None, 7, "", "akter.x", "\x00", "a" * 500):
        with pytest.raises(akter.DeclarationError):
            Door.workflow(name, input=Order)  # type: ignore[arg-type]
    with pytest.raises(akter.ConfigurationError):
        akter.App([Door]).check_declared("Door")  # type: ignore[arg-type]
