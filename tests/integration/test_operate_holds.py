"""Executions that rest until a person acts (``akter.workflow.engine.holds``): an activity whose outcome
is unknown needs attention and an operator resolves it; a consecutive-failure cap stops a
crash loop; pause and resume. Through the client API and through ``akter executions`` (click's
runner in this process: ``tests.integration.cli_support``), asserting what a second connection
reads and what the receiver recorded.

An unknown outcome is made as it happens in production: the activity's commands landed, its
runner lost the actor before it settled the attempt (another activation fenced it out), and the
rerun comes after the derived ids expired — so nobody can know whether its effects happened."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import attrs
import pytest
from returns.result import Failure, Success

import akter
from akter import testing
from akter.errors import ExecutionNotResolvable, InvalidResolution
from akter.outbox.relay import Relay
from tests.apps import attend, flows
from tests.apps.flows import Book, Done, Flows, Job, Settle
from tests.integration.cli_support import akter_in_process
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet, until

APP = "tests.apps.flows:app"


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    flows.CALLS.clear()
    flows.GATES.clear()
    attend.RUNS.clear()
    yield
    testing.disarm_all()


@attrs.frozen
class Env:
    url: str
    app: akter.App
    relay: Relay
    client: Any


@pytest.fixture
async def env(database_url: str) -> AsyncIterator[Env]:
    app = flows.make_app(database_url)
    async with app.relay() as relay, app.client(akter.User("ann")) as client:
        yield Env(database_url, app, relay, client)


async def cli(url: str, command: str, *args: str, app: str = APP) -> Any:
    return await akter_in_process("executions", command, app, *args, "--database-url", url)


async def status_of(peek: Peek, execution_id: str) -> str:
    return str(
        await peek.value("SELECT status FROM actor_workflow_executions WHERE execution_id = %s", execution_id)
    )


async def unknown_outcomes(e: Env, peek: Peek, clock: testing.Clock, *names: str) -> dict[str, str]:
    """Start a Settle per name and leave each needing attention: its ledger attempt's two
    commands landed, the attempt was never settled, and its rerun came past the ids' expiry."""
    gates = {n: testing.pause("workflow.before_settle", match=f"att-{n}") for n in names}
    ids = {}
    for n in names:
        ids[n] = (
            await e.client.actor(Flows, f"att-{n}", tenant="acme").start(Settle, Job(n, seconds=0))
        ).execution_id
    for n, gate in gates.items():
        await gate.reached()
        await peek.rows(
            "UPDATE actor_generations SET generation = generation + 1 WHERE actor_id = %s RETURNING 1",
            f"att-{n}",
        )
        gate.release()
    await quiet(e.app, e.relay)
    window = await peek.value("SELECT retry_window FROM actor_deployment")
    await clock.advance(window + timedelta(minutes=1))
    for execution_id in ids.values():
        await until(lambda i=execution_id: status_of(peek, i), lambda s: s == "needs_attention")
    return ids


async def pass_of(e: Env, execution_id: str) -> Any:
    return e.app.workflow_runner._passes.get(execution_id)


async def calls(name: str) -> int:
    return flows.CALLS.get(name, 0)


async def receipts(peek: Peek, name: str) -> int:
    return await peek.count("actor_receipts", f"ledger-{name}")


# ---- needs attention --------------------------------------------------------------------------


async def test_an_unknown_outcome_needs_attention_and_an_operator_supplies_the_result(
    env: Env, peek: Peek, clock: testing.Clock
) -> None:
    ids = await unknown_outcomes(env, peek, clock, "api")
    eid = ids["api"]
    assert await receipts(peek, "api") == 2  # the first run's two commands landed
    # it holds its position: the attempt is still pending, nothing was recorded by guesswork
    assert await peek.rows(
        "SELECT attempt, exit IS NULL FROM actor_workflow_step WHERE execution_id = %s AND step = 'ledger'",
        eid,
    ) == [(1, True)]
    [row] = [r async for r in env.client.executions(status="needs_attention")]
    assert row.execution_id == eid
    assert row.waiting.startswith("needs attention: activity ledger#1 attempt 1: ")
    assert "expired" in row.waiting

    # a value of the wrong type is refused and changes nothing
    with pytest.raises(InvalidResolution, match="ledger"):
        await env.client.resolve(eid, result="two")
    with pytest.raises(InvalidResolution, match="not an error"):
        await env.client.resolve(eid, error=ValueError("nope"))
    assert await status_of(peek, eid) == "needs_attention"

    acted = await env.client.resolve(eid, result=7)
    assert (acted.done, acted.message) == (True, "its result supplied; it goes on")
    outcome = await env.client.run(Settle, eid, tenant="acme").result(timeout=60)
    assert outcome == Success(Done("ledger 7; principal User(subject='ann'); tenant acme"))
    # the effect was not repeated: the receiver still holds the first run's two commands
    assert await receipts(peek, "api") == 2
    exit_ = await peek.value(
        "SELECT exit FROM actor_workflow_step WHERE execution_id = %s AND step = 'ledger'", eid
    )
    assert json.loads(akter.codec.unframe(bytes(exit_))) == {
        "ok": 7,
        "resolved_by": "user:ann",
        "resolution": "result",
    }
    assert await peek.rows(
        "SELECT status, resolved_by, resolution, attention_reason FROM actor_workflow_executions"
        " WHERE execution_id = %s",
        eid,
    ) == [("finished", "user:ann", "supplied the result of ledger#1", None)]
    timeline = await env.client.timeline(eid)
    [entry] = [x for x in timeline.entries if x.step == "ledger#1"]
    assert entry.exit is not None
    assert entry.exit.text == "ok 7 (resolved by user:ann, result)"


async def test_resolving_through_the_command_refuses_a_wrong_type_then_finishes(
    env: Env, peek: Peek, clock: testing.Clock
) -> None:
    eid = (await unknown_outcomes(env, peek, clock, "cli"))["cli"]
    listed = await cli(env.url, "list", "--status", "needs_attention")
    assert listed.returncode == 0, listed.stderr
    assert "    needs attention: activity ledger#1 attempt 1: " in listed.stdout
    shown = (await cli(env.url, "show", eid)).stdout
    assert "  status     needs_attention\n" in shown
    assert "  attention  since " in shown

    wrong = await cli(env.url, "resolve", eid, "--result", '"two"', "--as", "bob")
    assert wrong.returncode == 1
    assert "is not a int" in wrong.stderr
    assert await status_of(peek, eid) == "needs_attention"
    usage = await cli(env.url, "resolve", eid, "--result", "7", "--retry")
    assert usage.returncode == 2

    done = await cli(env.url, "resolve", eid, "--result", "7", "--as", "bob", "--json")
    assert done.returncode == 0, done.stderr
    [acted] = json.loads(done.stdout)["acted"]
    assert (acted["done"], acted["execution_id"]) == (True, eid)
    outcome = await env.client.run(Settle, eid, tenant="acme").result(timeout=60)
    assert outcome == Success(Done("ledger 7; principal User(subject='ann'); tenant acme"))
    assert await receipts(peek, "cli") == 2
    again = await cli(env.url, "resolve", eid, "--fail", "--as", "bob")
    assert again.returncode == 1
    assert "does not need attention (it is finished); resolved by user:bob" in again.stderr


async def test_failing_an_unknown_outcome_raises_it_in_the_body(
    env: Env, peek: Peek, clock: testing.Clock
) -> None:
    eid = (await unknown_outcomes(env, peek, clock, "fail"))["fail"]
    acted = await env.client.resolve(eid, fail=True)
    assert acted.done, acted.message
    outcome = await env.client.run(Settle, eid, tenant="acme").result(timeout=60)
    assert isinstance(outcome, Failure)
    assert isinstance(outcome.failure(), akter.ActivityOutcomeUnknown)
    assert await receipts(peek, "fail") == 2


async def test_resolve_and_interrupt_at_once_exactly_one_wins(
    env: Env, peek: Peek, clock: testing.Clock
) -> None:
    eid = (await unknown_outcomes(env, peek, clock, "race"))["race"]
    # both actions read the execution needing attention, then wait here, side by side
    barrier = [testing.pause("operate.before_send", match=eid) for _ in range(2)]
    resolving = asyncio.create_task(env.client.resolve(eid, result=7))
    await barrier[0].reached()
    interrupting = asyncio.create_task(env.client.interrupt_executions(eid, reason="give up"))
    await barrier[1].reached()
    for gate in barrier:
        gate.release()
    resolved = await resolving
    [interrupted] = await interrupting
    assert sorted([resolved.done, interrupted.done]) == [False, True]
    loser = interrupted if resolved.done else resolved
    assert isinstance(loser.error, ExecutionNotResolvable), loser
    outcome = await env.client.run(Settle, eid, tenant="acme").result(timeout=60)
    if resolved.done:
        assert outcome == Success(Done("ledger 7; principal User(subject='ann'); tenant acme"))
    else:
        assert isinstance(outcome, Failure)
        assert isinstance(outcome.failure(), akter.Interrupted)
        assert outcome.failure().by == "user:ann"
    assert await receipts(peek, "race") == 2


# ---- the consecutive-failure cap --------------------------------------------------------------


async def test_passes_failing_in_a_row_need_attention_with_each_error(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    app = attend.make_app(database_url)
    # a bug in akter's own code, where every pass of this execution meets it
    testing.fail("workflow.before_settle", match="ward-1")
    async with app.relay() as relay, app.client() as client:
        run = await client.actor(attend.Clinic, "ward-1", tenant="acme").start(
            attend.Mend, attend.Patient("ada")
        )
        eid = run.execution_id
        for failed in range(1, attend.LIMIT + 1):
            await until(
                lambda: peek.value(
                    "SELECT failed_passes FROM actor_workflow_executions WHERE execution_id = %s", eid
                ),
                lambda n, f=failed: n == f,
            )
            if failed < attend.LIMIT:
                assert await status_of(peek, eid) == "running"
                await clock.advance(timedelta(seconds=31))  # the recovery timer resumes it
        assert await status_of(peek, eid) == "needs_attention"
        assert attend.RUNS["ada"] == attend.LIMIT
        # no more passes: its recovery timer fires into the resting state and changes nothing
        await clock.advance(timedelta(seconds=31))
        await until(lambda: peek.count("actor_outbox", "ward-1"), lambda n: n == 0)
        await quiet(app, relay)
        assert attend.RUNS["ada"] == attend.LIMIT

        [row] = [r async for r in client.executions(status="needs_attention")]
        assert row.failed_passes == attend.LIMIT
        assert len(row.pass_errors) == attend.LIMIT
        assert all("InjectedFailure" in e["error"] for e in row.pass_errors)
        assert row.waiting.startswith(
            f"needs attention: {attend.LIMIT} passes failed in a row; the last: InjectedFailure"
        )
        shown = (await cli(database_url, "show", eid, app="tests.apps.attend:app")).stdout
        assert shown.count("  pass failed at ") == attend.LIMIT

        value = await cli(database_url, "resolve", eid, "--result", '"x"', app="tests.apps.attend:app")
        assert value.returncode == 1
        assert "no step waits for a result" in value.stderr
        failed_it = await cli(
            database_url, "resolve", eid, "--fail", "--as", "ops", app="tests.apps.attend:app"
        )
        assert failed_it.returncode == 0, failed_it.stderr
        outcome = await run.result(timeout=30)
    assert isinstance(outcome, Failure)
    assert "failed by user:ops after its passes failed" in str(outcome.failure())
    assert await peek.rows(
        "SELECT status, outcome, resolved_by FROM actor_workflow_executions WHERE execution_id = %s", eid
    ) == [("finished", "defect", "user:ops")]


# ---- pause and resume -------------------------------------------------------------------------


async def test_a_pause_lets_the_attempt_in_flight_finish_then_holds(env: Env, peek: Peek) -> None:
    run = await env.client.actor(Flows, "pz", tenant="acme").start(Book, Job("inflight", seconds=0))
    await until(lambda: calls("inflight-hold"), lambda n: n == 1)
    # the hold attempt is in flight (its ledger step settled before it began)
    settling = testing.pause("workflow.before_settle", match="pz")
    flows.gate("inflight-hold").set()
    await settling.reached()  # its work returned; its outcome is not recorded yet
    [acted] = await env.client.pause_executions(run.execution_id, reason="drain before deploy")
    assert (acted.done, acted.message) == (True, "pause requested")
    [row] = [r async for r in env.client.executions(tenant="acme", actor_type="Flows", actor_id="pz")]
    assert row.waiting.startswith("pausing (paused by user:ann: drain before deploy)")
    # a barrier, not an assertion: the pause's wake-up reached the running pass
    await until(lambda: pass_of(env, run.execution_id), lambda p: p is not None and p.pausing)
    settling.release()  # the attempt in flight finishes
    await until(lambda: status_of(peek, run.execution_id), lambda s: s == "paused")
    await quiet(env.app, env.relay)
    # the attempt settled; the body did not go on to its sleep
    assert await peek.rows(
        "SELECT step, exit IS NULL FROM actor_workflow_step WHERE execution_id = %s ORDER BY started_at",
        run.execution_id,
    ) == [("ledger", False), ("hold", False)]
    [row] = [r async for r in env.client.executions(status="paused")]
    assert row.waiting.startswith("paused by user:ann: drain before deploy since ")
    assert (row.paused_by, row.pause_reason) == ("user:ann", "drain before deploy")

    [resumed] = await env.client.resume_executions(where=akter.ExecutionFilter(status="paused"))
    assert (resumed.done, resumed.message) == (True, "goes on now")
    outcome = await run.result(timeout=60)
    assert outcome == Success(Done("ledger 2; principal User(subject='ann'); tenant acme"))
    assert flows.CALLS["inflight-hold"] == 1


@pytest.mark.slow
async def test_a_pause_holds_across_a_relay_restart_and_loses_nothing(
    database_url: str, peek: Peek, clock: testing.Clock
) -> None:
    from tests.apps.relay_procs import RelayProcess

    first = RelayProcess(database_url, app=APP)
    second: RelayProcess | None = None
    try:
        async with flows.make_app(database_url).client() as client:
            run = await client.actor(Flows, "pr", tenant="acme").start(Settle, Job("held", seconds=600))
            eid = run.execution_id
            await until(run.poll, lambda s: s.status == "suspended")
            paused = await cli(database_url, "pause", eid, "--reason", "deploy", "--as", "ops")
            assert paused.returncode == 0, paused.stderr
            assert paused.stdout.endswith(": paused now\n")
            assert await peek.rows(
                "SELECT status, paused_by, pause_reason FROM actor_workflow_executions"
                " WHERE execution_id = %s",
                eid,
            ) == [("paused", "user:ops", "deploy")]
            assert first.kill() == -9
            second = RelayProcess(database_url, app=APP)
            # the sleep ends while it is paused: its timer fires into the paused state
            await clock.advance(timedelta(seconds=601))
            await until(lambda: peek.count("actor_outbox", "pr"), lambda n: n == 0)
            assert await status_of(peek, eid) == "paused"
            assert await peek.value(
                "SELECT exit IS NULL FROM actor_workflow_step WHERE execution_id = %s AND step = 'nap'", eid
            )
            assert await receipts(peek, "held") == 0
            listed = await cli(database_url, "list", "--status", "paused")
            assert "    paused by user:ops: deploy since " in listed.stdout

            resumed = await cli(database_url, "resume", "--status", "paused", "--as", "ops")
            assert resumed.returncode == 0, resumed.stderr
            outcome = await run.result(timeout=60)
        assert outcome == Success(Done("ledger 2; principal Anonymous(); tenant acme"))
        assert await receipts(peek, "held") == 2
        nothing = await cli(database_url, "resume", eid)
        assert nothing.returncode == 1
    finally:
        first.close()
        if second is not None:
            second.close()


async def test_an_interrupt_of_an_execution_that_needs_attention_resolves_it(
    env: Env, peek: Peek, clock: testing.Clock
) -> None:
    eid = (await unknown_outcomes(env, peek, clock, "stop"))["stop"]
    await env.client.run(Settle, eid, tenant="acme").interrupt(reason="not worth it")
    outcome = await env.client.run(Settle, eid, tenant="acme").result(timeout=60)
    assert isinstance(outcome, Failure)
    assert str(outcome.failure()) == "interrupted by user:ann: not worth it"
    exit_ = await peek.value(
        "SELECT exit FROM actor_workflow_step WHERE execution_id = %s AND step = 'ledger'", eid
    )
    recorded = json.loads(akter.codec.unframe(bytes(exit_)))
    # its outcome stays unknown, settled after the interrupt, with who decided
    assert recorded["defect"]["type"] == "ActivityOutcomeUnknown"
    assert (recorded["after_interrupt"], recorded["resolved_by"]) == (True, "user:ann")
    assert await receipts(peek, "stop") == 2


async def test_pause_and_resume_every_match_a_page_at_a_time(env: Env, peek: Peek) -> None:
    names = [f"many-{i}" for i in range(5)]
    runs = [
        await env.client.actor(Flows, "pm", tenant="acme").start(Settle, Job(name, seconds=600))
        for name in names
    ]
    await quiet(env.app, env.relay)
    where = akter.ExecutionFilter(tenant="acme", actor_type="Flows", actor_id="pm")
    acted = [a async for a in env.client.each_matching("pause", where, reason="drain", page_size=2)]
    # every match, newest first, across three pages of two
    assert [a.execution_id for a in acted] == [r.execution_id for r in reversed(runs)]
    assert all((a.done, a.message) == (True, "paused now") for a in acted)
    assert await peek.value(
        "SELECT count(*) FROM actor_workflow_executions WHERE actor_id = 'pm' AND status = 'paused'"
    ) == len(names)
    again = [a async for a in env.client.each_matching("pause", where, page_size=2)]
    assert again == []  # paused ones are not paused again
    resumed = await cli(
        env.url, "resume", "--actor-id", "pm", "--tenant", "acme", "--actor-type", "Flows", "--json"
    )
    assert resumed.returncode == 0, resumed.stderr
    # one JSON document, written as each execution was resumed
    assert [(a["done"], a["message"]) for a in json.loads(resumed.stdout)["acted"]] == [
        (True, "goes on now")
    ] * len(names)
    await until(
        lambda: peek.value(
            "SELECT count(*) FROM actor_workflow_executions WHERE actor_id = 'pm' AND status = 'suspended'"
        ),
        lambda n: n == len(names),
    )
    assert await peek.value("SELECT count(*) FROM actor_workflow_executions WHERE paused_at IS NOT NULL") == 0


async def test_a_pause_asked_while_it_needs_attention_holds_it_after_the_resolution(
    env: Env, peek: Peek, clock: testing.Clock
) -> None:
    eid = (await unknown_outcomes(env, peek, clock, "both"))["both"]
    [paused] = await env.client.pause_executions(eid, reason="after the fix")
    assert (paused.done, paused.message) == (True, "pause requested")
    [row] = [r async for r in env.client.executions(status="needs_attention")]
    assert row.waiting.endswith("(paused by user:ann: after the fix too)")
    assert (await env.client.resolve(eid, result=7)).done
    # resolved, and paused rather than resumed: the resolution waits for the resume
    await until(lambda: status_of(peek, eid), lambda s: s == "paused")
    await quiet(env.app, env.relay)
    assert await status_of(peek, eid) == "paused"
    [resumed] = await env.client.resume_executions(eid)
    assert resumed.done, resumed.message
    outcome = await env.client.run(Settle, eid, tenant="acme").result(timeout=60)
    assert outcome == Success(Done("ledger 7; principal User(subject='ann'); tenant acme"))


async def test_a_declared_error_that_cannot_be_stored_is_the_attempts_defect_not_a_failing_pass(
    database_url: str, peek: Peek
) -> None:
    app = attend.make_app(database_url)
    async with app.relay() as relay, app.client() as client:
        ward = client.actor(attend.Clinic, "ward-2", tenant="acme")
        run = await ward.start(attend.Worse, attend.Patient("bo"))
        outcome = await run.result(timeout=30)
        await quiet(app, relay)
    # one attempt, recorded as a defect that names the field; no pass failed on it
    assert isinstance(outcome, Failure)
    assert "declared error Relapse cannot be stored" in str(outcome.failure())
    assert attend.RUNS["bo"] == 1
    assert (
        await peek.value(
            "SELECT failed_passes FROM actor_workflow_executions WHERE execution_id = %s", run.execution_id
        )
        == 0
    )


async def test_an_execution_that_finishes_while_paused_keeps_no_pause(env: Env, peek: Peek) -> None:
    """A paused execution that is interrupted finishes; the finished row says nothing of a pause
    (a pause is about what goes on next, and nothing does), read through a second connection."""
    flows.gate("pfin-hold").set()
    run = await env.client.actor(Flows, "pfin", tenant="acme").start(Book, Job("pfin", seconds=3600))
    await until(lambda: status_of(peek, run.execution_id), lambda s: s == "suspended")
    [paused] = await env.client.pause_executions(run.execution_id, reason="hold it")
    assert paused.done
    await until(lambda: status_of(peek, run.execution_id), lambda s: s == "paused")
    [interrupted] = await env.client.interrupt_executions(run.execution_id, reason="not needed")
    assert interrupted.done
    await until(lambda: status_of(peek, run.execution_id), lambda s: s == "finished")
    assert await peek.rows(
        "SELECT paused_at, paused_by, pause_reason FROM actor_workflow_executions WHERE execution_id = %s",
        run.execution_id,
    ) == [(None, None, None)]
