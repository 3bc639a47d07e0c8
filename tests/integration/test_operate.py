"""Operating executions (``akter.operate``, ``akter executions``): find them, show one as a
timeline, interrupt them, retry them — through the client API and through the ``akter`` command
as an operator types it, asserting what the operator sees and what a second connection reads.

The desk (``tests.apps.desk``) runs with its relay in this process; the commands commit their
turns and leave the passes to that relay, as an operator's shell would beside a deployment. They
run through click's runner in this process (``tests.integration.cli_support``); the first
listing, and the command run as a revoked user, are real processes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import attrs
import pytest
from returns.result import Failure, Success

import akter
from akter.ids import ActorRef, ExecutionId
from akter.outbox.relay import Relay
from tests.apps import desk
from tests.integration.cli_support import akter_cli, akter_in_process
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet

APP = "tests.apps.desk:app"
MODES = {"sleeper": "sleep", "waiter": "wait", "failer": "fail", "broken": "defect", "done": "ok"}
KEYS = tuple(MODES)


@attrs.frozen
class Desk:
    url: str
    app: akter.App
    relay: Relay
    client: Any
    #: execution ids of the acme/front jobs, by key
    ids: dict[str, str]
    other: str

    async def quiet(self) -> None:
        await quiet(self.app, self.relay)


@pytest.fixture
async def desk_jobs(database_url: str) -> AsyncIterator[Desk]:
    desk.FIXED.clear()
    desk.RUNS.clear()
    app = desk.make_app(database_url)
    async with app.relay() as relay, app.client() as client:
        front = client.actor(desk.Desk, "front", tenant="acme")
        ids = {}
        for key, mode in MODES.items():
            ids[key] = (await front.start(desk.Job, desk.Task(key, mode))).execution_id
        other = await client.actor(desk.Desk, "front", tenant="other").start(desk.Job, desk.Task("done"))
        await quiet(app, relay)
        yield Desk(database_url, app, relay, client, ids, other.execution_id)


async def executions(
    d: Desk, *args: str, env: dict[str, str] | None = None, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """``akter executions COMMAND APP ARGS --database-url URL``: in this process, or as a real
    one with ``process`` (the family's smoke test) or with an ``env`` of its own."""
    command, *rest = args
    line = ("executions", command, APP, *rest, "--database-url", d.url)
    if process or env:
        return await asyncio.to_thread(akter_cli, *line, env=env)
    return await akter_in_process(*line)


# ---- find ---------------------------------------------------------------------------------------


async def test_the_api_finds_executions_by_filter_newest_first(desk_jobs: Desk) -> None:
    d = desk_jobs
    client = d.client
    rows = [row async for row in client.executions(tenant="acme")]
    assert [r.key for r in rows] == list(reversed(KEYS))
    by_key = {r.key: r for r in rows}
    assert {k: (r.status, r.outcome) for k, r in by_key.items()} == {
        "sleeper": ("suspended", None),
        "waiter": ("suspended", None),
        "failer": ("finished", "failed"),
        "broken": ("finished", "defect"),
        "done": ("finished", "succeeded"),
    }
    sleeper, waiter = by_key["sleeper"], by_key["waiter"]
    assert (sleeper.tenant, sleeper.actor_type, sleeper.actor_id, sleeper.workflow) == (
        "acme",
        "Desk",
        "front",
        "Job",
    )
    assert sleeper.execution_id == d.ids["sleeper"]
    assert sleeper.waiting.startswith("sleeping until ")
    assert sleeper.waiting.endswith("(nap#1)")
    assert waiter.waiting.startswith("waiting for Poked after event #0 until ")
    assert by_key["failer"].waiting == "finished: failed"

    async def keys(**criteria: Any) -> list[str]:
        return [row.key async for row in client.executions(**criteria)]

    assert await keys(tenant="acme", status="suspended") == ["waiter", "sleeper"]
    assert await keys(outcome=["failed", "defect"]) == ["broken", "failer"]
    assert await keys(workflow=desk.Job, key_prefix="do") == ["done", "done"]
    assert await keys(tenant="other") == ["done"]
    assert await keys(tenant="acme", actor_type="Desk", actor_id="front", status="finished") == [
        "done",
        "broken",
        "failer",
    ]
    assert await keys(tenant="acme", actor_type="Desk", actor_id="back") == []
    started = by_key["failer"].started_at
    assert await keys(tenant="acme", started_after=started) == ["done", "broken"]
    assert await keys(tenant="acme", started_before=started) == ["waiter", "sleeper"]
    assert await keys(finished_before=started) == []

    # keyset pages: no row twice, none missed, the same order as one pass
    seen: list[str] = []
    after = None
    while True:
        page = await client.execution_page(limit=2, after=after)
        seen += [r.execution_id for r in page.rows]
        if page.next_cursor is None:
            break
        after = page.next_cursor
    assert seen == [r.execution_id async for r in client.executions(page_size=1)]
    assert len(seen) == len(set(seen)) == len(KEYS) + 1

    counts = await client.execution_counts(tenant="acme")
    assert [(c.workflow, c.status, c.outcome, c.count) for c in counts] == [
        ("Job", "finished", "defect", 1),
        ("Job", "finished", "failed", 1),
        ("Job", "finished", "succeeded", 1),
        ("Job", "suspended", None, 2),
    ]
    with pytest.raises(akter.InvalidInput, match="unknown status 'stuck'"):
        akter.ExecutionFilter(status="stuck")
    with pytest.raises(akter.InvalidInput, match="the criteria are"):
        client.executions(colour="red")
    with pytest.raises(akter.InvalidInput, match="with its tenant and actor type"):
        akter.ExecutionFilter(actor_id="front")


async def test_the_sync_client_finds_the_same_executions(desk_jobs: Desk) -> None:
    def find() -> tuple[list[str], list[str]]:
        with desk_jobs.app.sync_client() as client:
            every = [r.key for r in client.executions(tenant="acme", page_size=2)]
            return every, [r.key for r in client.executions(akter.ExecutionFilter(status="suspended"))]

    every, suspended = await asyncio.to_thread(find)
    assert every == list(reversed(KEYS))
    assert suspended == ["waiter", "sleeper"]


async def test_list_and_counts_commands(desk_jobs: Desk) -> None:
    d = desk_jobs
    text = await executions(d, "list", "--tenant", "acme", "--status", "suspended", process=True)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == "2 executions, newest first"
    assert lines[1].startswith("acme/Desk/front Job 'waiter'  suspended  started ")
    assert lines[2].startswith("    waiting for Poked after event #0 until ")
    assert lines[3] == f"    {d.ids['waiter']}"
    assert lines[4].startswith("acme/Desk/front Job 'sleeper'  suspended  started ")

    paged = await executions(d, "list", "--limit", "2", "--json")
    first = json.loads(paged.stdout)
    assert [r["key"] for r in first["executions"]] == ["done", "done"]
    rest = json.loads((await executions(d, "list", "--after", first["next_cursor"], "--json")).stdout)
    assert [r["key"] for r in rest["executions"]] == ["broken", "failer", "waiter", "sleeper"]
    assert rest["next_cursor"] is None
    assert rest["executions"][0]["execution_id"] == d.ids["broken"]

    counts = json.loads((await executions(d, "counts", "--outcome", "failed", "--json")).stdout)
    assert counts == {
        "counts": [
            {"actor_type": "Desk", "workflow": "Job", "status": "finished", "outcome": "failed", "count": 1}
        ],
        "total": 1,
    }
    shown = await executions(d, "counts", "--tenant", "acme")
    assert "Desk.Job  suspended  2" in shown.stdout.splitlines()
    assert shown.stdout.splitlines()[-1] == "total 5"

    nothing = await executions(d, "list", "--tenant", "nobody")
    assert (nothing.returncode, nothing.stdout) == (1, "0 executions, newest first\n")
    bad = await executions(d, "list", "--status", "stuck")
    assert bad.returncode == 2
    assert "'stuck' is not one of" in bad.stderr
    cursor = await executions(d, "list", "--after", "nonsense")
    assert (cursor.returncode, cursor.stderr) == (
        2,
        "akter: 'nonsense' is not a cursor returned by a page of executions\n",
    )


# ---- show ---------------------------------------------------------------------------------------


async def test_show_is_a_timeline_of_every_attempt_and_why_it_waits(desk_jobs: Desk, peek: Peek) -> None:
    d = desk_jobs
    shown = await executions(d, "show", d.ids["sleeper"])
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert text.startswith("execution acme/Desk/front Job 'sleeper'\n")
    assert f"  id         {d.ids['sleeper']}\n" in text
    assert "  status     suspended\n" in text
    assert "  why        sleeping until " in text
    assert "  input      Task(name='sleeper', mode='sleep')\n" in text
    assert "timeline (1 attempts)" in text
    assert "nap#1 attempt 1 (clock): pending: sleeping until " in text

    failed = await d.client.timeline(d.ids["failer"])
    assert (failed.status, failed.outcome, failed.waiting) == ("finished", "failed", "finished: failed")
    [attempt] = failed.entries
    assert (attempt.step, attempt.attempt, attempt.kind) == ("work#1", 1, "activity")
    assert attempt.exit is not None
    assert attempt.exit.text == "error Refused(name='failer')"
    assert attempt.settled_at is not None
    assert attempt.duration == attempt.settled_at - attempt.started_at
    assert failed.view.result is not None
    assert failed.view.result.text == "error Refused(name='failer')"

    # an exit that no longer decodes is shown with its stored JSON
    await peek.conn.execute(
        "UPDATE actor_workflow_step SET exit = '\\x00'::bytea"
        ' || convert_to(\'{"error": {"type": "Gone", "value": {"why": 1}}}\', \'UTF8\')'
        " WHERE execution_id = %s",
        (d.ids["failer"],),
    )
    as_json = json.loads((await executions(d, "show", d.ids["failer"], "--json")).stdout)
    [entry] = as_json["entries"]
    assert entry["exit"]["raw"] == {"error": {"type": "Gone", "value": {"why": 1}}}
    assert "no longer declares error Gone" in entry["exit"]["undecodable"]
    assert entry["duration_seconds"] >= 0
    assert as_json["status"] == "finished"
    text = (await executions(d, "show", d.ids["failer"])).stdout
    assert '      stored {"error": {"type": "Gone", "value": {"why": 1}}}' in text

    malformed = await executions(d, "show", "x1.nonsense")
    assert malformed.returncode == 2
    gone = str(ExecutionId(ActorRef("acme", "Desk", "front"), "Job", "never"))
    nothing = await executions(d, "show", gone)
    assert nothing.returncode == 1
    assert f"no execution {gone} is stored" in nothing.stderr
    with pytest.raises(akter.InvalidExecutionId, match="is stored"):
        await d.client.timeline(gone)


# ---- interrupt ------------------------------------------------------------------------------------


async def test_interrupt_one_through_the_command_with_a_reason_and_who_asked(
    desk_jobs: Desk, peek: Peek
) -> None:
    d = desk_jobs
    sleeper = d.ids["sleeper"]
    done = await executions(d, "interrupt", sleeper, "--reason", "customer cancelled", "--as", "ann")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "interrupted acme/Desk/front Job 'sleeper': interrupt requested\n"

    outcome = await d.client.run(desk.Job, sleeper, tenant="acme").result(timeout=30)
    assert isinstance(outcome, Failure)
    error = outcome.failure()
    assert isinstance(error, akter.Interrupted)
    assert str(error) == "interrupted by user:ann: customer cancelled"
    assert (error.by, error.reason) == ("user:ann", "customer cancelled")
    assert await peek.rows(
        "SELECT status, outcome, interrupted_by, interrupt_reason FROM actor_workflow_executions"
        " WHERE execution_id = %s",
        sleeper,
    ) == [("finished", "interrupted", "user:ann", "customer cancelled")]

    timeline = (await executions(d, "show", sleeper)).stdout
    assert "  why        finished: interrupted by user:ann: customer cancelled\n" in timeline
    assert "  interrupt  interrupted by user:ann: customer cancelled\n" in timeline
    [row] = [r async for r in d.client.executions(tenant="acme", key_prefix="sleeper")]
    assert row.waiting == "finished: interrupted by user:ann: customer cancelled"

    again = await executions(d, "interrupt", sleeper, "--as", "ann")
    assert again.returncode == 1
    assert (
        again.stderr
        == "akter: not interrupted acme/Desk/front Job 'sleeper': already finished (interrupted)\n"
    )


async def test_interrupt_every_match_and_an_access_refusal(desk_jobs: Desk, peek: Peek) -> None:
    d = desk_jobs
    refused = await executions(
        d, "interrupt", "--tenant", "acme", "--as", "mallory", env={"AKTER_TEST_REVOKED": "mallory"}
    )
    assert refused.returncode == 1
    assert refused.stderr.count("akter: not interrupted") == 2
    assert "refused:" in refused.stderr
    assert "mallory" in refused.stderr
    assert await peek.value("SELECT count(*) FROM actor_workflow_executions WHERE interrupt") == 0

    async with d.app.client(akter.User("bob")) as bob:
        acted = await bob.interrupt_executions(where=akter.ExecutionFilter(tenant="acme"), reason="drain")
    assert sorted((a.execution_id, a.done, a.message) for a in acted) == sorted(
        [(d.ids["sleeper"], True, "interrupt requested"), (d.ids["waiter"], True, "interrupt requested")]
    )
    await d.quiet()
    assert await peek.rows(
        "SELECT key, outcome, interrupted_by, interrupt_reason FROM actor_workflow_executions"
        " WHERE tenant = 'acme' AND interrupt ORDER BY key"
    ) == [("sleeper", "interrupted", "user:bob", "drain"), ("waiter", "interrupted", "user:bob", "drain")]

    nothing = await executions(d, "interrupt", "--tenant", "acme", "--as", "bob")
    assert (nothing.returncode, nothing.stderr) == (1, "akter: no execution matched\n")
    unreachable = await asyncio.to_thread(
        akter_cli,
        "executions",
        "interrupt",
        APP,
        d.ids["waiter"],
        "--database-url",
        "postgresql://postgres@127.0.0.1:1/none",
    )
    assert unreachable.returncode == 2
    assert unreachable.stderr.startswith(
        "akter: cannot connect to the database at postgresql://postgres@127.0.0.1:1"
    )
    usage = await executions(d, "interrupt")
    assert usage.returncode == 2
    assert "name executions by id, or give filters" in usage.stderr


# ---- retry ----------------------------------------------------------------------------------------


async def test_retry_a_failure_as_a_new_execution_linked_to_the_old(desk_jobs: Desk, peek: Peek) -> None:
    d = desk_jobs
    failer = d.ids["failer"]
    desk.FIXED.add("failer")
    done = await executions(d, "retry", failer, "--as", "ann")
    assert done.returncode == 0, done.stderr
    new = str(ExecutionId(ActorRef("acme", "Desk", "front"), "Job", "failer~retry"))
    assert done.stdout == f"retried acme/Desk/front Job 'failer': retried as {new}\n"

    outcome = await d.client.run(desk.Job, new, tenant="acme").result(timeout=30)
    assert outcome == Success(desk.Done("failer", 1))
    assert desk.RUNS["failer"] == 2  # once failing, once in the retry
    assert await peek.rows(
        "SELECT key, retry_of, retried_by, outcome FROM actor_workflow_executions"
        " WHERE execution_id IN (%s, %s) ORDER BY key",
        failer,
        new,
    ) == [("failer", None, None, "failed"), ("failer~retry", failer, "user:ann", "succeeded")]
    # the retry acts for whom the original acted for; the old one keeps its own result
    principals = await peek.value(
        "SELECT count(DISTINCT principal) FROM actor_workflow_executions WHERE execution_id IN (%s, %s)",
        failer,
        new,
    )
    assert principals == 1
    old = await d.client.timeline(failer)
    assert old.retries == [new]
    retry = await d.client.timeline(new)
    assert (retry.retry_of, retry.retried_by) == (failer, "user:ann")
    assert f"  retry of   {failer} (asked by user:ann)" in (await executions(d, "show", new)).stdout

    again = await executions(d, "retry", failer, "--as", "ann")
    assert again.returncode == 1
    assert f"was retried already as {new}" in again.stderr
    succeeded = await executions(d, "retry", d.ids["done"], "--as", "ann")
    assert succeeded.returncode == 1
    assert "only a failed or defect execution is retried" in succeeded.stderr
    suspended = await executions(d, "retry", d.ids["sleeper"])
    assert suspended.returncode == 1
    assert "is suspended and not blocked: there is nothing to retry" in suspended.stderr


async def test_retry_by_filter_and_offer_a_blocked_execution_again(desk_jobs: Desk, peek: Peek) -> None:
    d = desk_jobs
    # a runner left the waiter blocked and backed off its timer (as after an incompatible deploy)
    await peek.conn.execute(
        "UPDATE actor_workflow_executions SET blocked_reason = 'no runner declares step poked'"
        " WHERE execution_id = %s",
        (d.ids["waiter"],),
    )
    await peek.conn.execute(
        "UPDATE actor_outbox SET due_at = akter_now() + interval '30 days' WHERE timer_key = %s",
        ("wf:" + d.ids["waiter"],),
    )
    [blocked] = [r async for r in d.client.executions(status="blocked")]
    assert (blocked.key, blocked.waiting) == ("waiter", "blocked: no runner declares step poked")

    desk.FIXED.add("broken")
    async with d.app.client(akter.User("carol")) as carol:
        acted = await carol.retry_executions(where=akter.ExecutionFilter(tenant="acme"))
    assert {a.execution_id: (a.done, a.message) for a in acted} == {
        d.ids["waiter"]: (True, "offered to runners again now"),
        d.ids["broken"]: (True, f"retried as {acted[1].new_execution_id}"),
        d.ids["failer"]: (True, f"retried as {acted[2].new_execution_id}"),
    }
    await d.quiet()
    # the pass ran at once: no longer blocked, its timer at the wait's deadline, not 30 days on
    assert (
        await peek.value(
            "SELECT blocked_reason FROM actor_workflow_executions WHERE execution_id = %s", d.ids["waiter"]
        )
        is None
    )
    deadline = await peek.value(
        "SELECT due_at <= akter_now() + interval '1 day' FROM actor_outbox WHERE timer_key = %s",
        "wf:" + d.ids["waiter"],
    )
    assert deadline is True
    assert await peek.rows(
        "SELECT key, outcome, retried_by FROM actor_workflow_executions"
        " WHERE retry_of IS NOT NULL ORDER BY key"
    ) == [("broken~retry", "succeeded", "user:carol"), ("failer~retry", "failed", "user:carol")]


async def test_retry_of_a_retry_gets_the_next_key(desk_jobs: Desk) -> None:
    d = desk_jobs
    [first] = await d.client.retry_executions(d.ids["failer"])
    await d.quiet()
    assert first.new_execution_id is not None
    [second] = await d.client.retry_executions(first.new_execution_id)
    assert second.done, second.message
    assert second.new_execution_id is not None
    assert ExecutionId.parse(second.new_execution_id).key == "failer~retry2"
    await d.quiet()
    rows = [r async for r in d.client.executions(key_prefix="failer")]
    assert [(r.key, r.outcome, r.retry_of) for r in rows] == [
        ("failer~retry2", "failed", first.new_execution_id),
        ("failer~retry", "failed", d.ids["failer"]),
        ("failer", "failed", None),
    ]
    assert timedelta(0) <= rows[0].started_at - rows[1].started_at
