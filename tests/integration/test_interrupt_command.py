"""``run.interrupt()`` is a receipted turn: the member's interrupt command, checked by the actor's
access policy, deduplicated by its command id and recorded with the principal that asked."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import attrs
import pytest
from returns.result import Failure

import akter
from akter import testing
from akter.errors import CommandConflict
from akter.ids import ActorRef, ExecutionId
from akter.workflow.api.payloads import Interrupt
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet, running, until


@attrs.frozen
class Notes:
    lines: tuple[str, ...] = ()


@attrs.frozen
class Task:
    name: str


@attrs.frozen
class Finished:
    name: str


def ops_interrupt(caller: akter.Caller, command: akter.Command) -> bool:  # type: ignore[type-arg]
    """Anyone may start a chore; only ``ops-*`` users may interrupt one."""
    if command is Chore.interrupt_command or command is Errand.interrupt_command:
        return isinstance(caller, akter.User) and caller.subject.startswith("ops")
    return True


Desk = akter.Actor("Desk", state=Notes, access=ops_interrupt)
Chore = Desk.workflow("Chore", input=Task, output=Finished)
nap = Chore.sleep("nap")
Errand = Desk.workflow("Errand", input=Task, output=Finished)
errand_nap = Errand.sleep("nap")


@Chore.body
async def chore(wf: akter.WorkflowContext, task: Task) -> Finished:
    await nap(timedelta(hours=1))
    return Finished(task.name)


@Errand.body
async def errand(wf: akter.WorkflowContext, task: Task) -> Finished:
    await errand_nap(timedelta(hours=1))
    return Finished(task.name)


ALICE = akter.User("alice")
OPS = akter.User("ops-1")


@pytest.fixture
async def env(database_url: str) -> AsyncIterator[tuple[akter.App, Any, Any]]:
    app = akter.App([Desk], database_url=database_url)
    async with running(app) as (relay, client):
        yield app, relay, client


async def started(env: Any) -> akter.Run[Finished]:
    """A chore alice started on desk d1, once it sleeps."""
    _, _, client = env
    run: akter.Run[Finished] = await client.actor(Desk, "d1", tenant="acme", caller=ALICE).start(
        Chore, Task("sweep")
    )
    await until(run.poll, lambda s: s.status == "suspended")
    return run


def as_caller(client: Any, run: akter.Run[Any], caller: akter.Caller) -> akter.Run[Any]:
    """The same execution, re-attached by another caller."""
    return client.actor(Desk, "d1", tenant="acme", caller=caller).run(Chore, run.execution_id)  # type: ignore[no-any-return]


async def interrupt_receipts(peek: Peek) -> list[tuple[Any, ...]]:
    return await peek.rows(
        "SELECT command_id, caller_key FROM actor_receipts WHERE command = 'akter.wf.interrupt:Chore'"
        " ORDER BY created_at"
    )


async def test_an_interrupt_is_a_receipted_turn_recorded_with_who_asked(env: Any, peek: Peek) -> None:
    app, relay, client = env
    run = await started(env)
    ops = as_caller(client, run, OPS)
    cid = client.new_command_id()
    await ops.interrupt(command_id=cid)
    assert await interrupt_receipts(peek) == [(cid, "user:ops-1")]
    result = await run.result(timeout=60)
    assert isinstance(result, Failure)
    assert isinstance(result.failure(), akter.Interrupted)
    # read back by another caller: who interrupted comes from the execution's record
    status = await client.run(Chore, run.execution_id, tenant="acme").poll()
    assert status.outcome == "interrupted"
    assert status.interrupt_requested
    assert status.interrupted_by == OPS
    # the same command id replays its receipt: no second turn, no error
    await ops.interrupt(command_id=cid)
    assert await interrupt_receipts(peek) == [(cid, "user:ops-1")]
    # the same id for another execution is a conflict, as for any command
    other = await client.actor(Desk, "d1", tenant="acme").start(Chore, Task("other"))
    with pytest.raises(CommandConflict):
        await as_caller(client, other, OPS).interrupt(command_id=cid)
    # interrupting a finished execution succeeds and changes nothing
    await as_caller(client, run, akter.User("ops-2")).interrupt()
    assert (await run.poll()).interrupted_by == OPS
    assert [key for _, key in await interrupt_receipts(peek)] == ["user:ops-1", "user:ops-2"]
    await quiet(app, relay)
    assert (await run.poll()).outcome == "interrupted"


async def test_a_caller_the_policy_refuses_gets_access_denied_and_nothing_is_written(
    env: Any, peek: Peek
) -> None:
    _, _, client = env
    run = await started(env)
    timer = await peek.rows("SELECT intent_id, due_at FROM actor_outbox")
    with pytest.raises(akter.AccessDenied):
        await run.interrupt()  # alice started it; the policy lets only ops interrupt
    with pytest.raises(akter.AccessDenied):
        await as_caller(client, run, akter.Anonymous()).interrupt()
    assert await interrupt_receipts(peek) == []
    assert await peek.rows("SELECT interrupt, status FROM actor_workflow_executions") == [
        (False, "suspended")
    ]
    assert await peek.rows("SELECT intent_id, due_at FROM actor_outbox") == timer
    status = await run.poll()
    assert (status.interrupt_requested, status.interrupted_by) == (False, None)


async def test_an_interrupt_of_a_forged_or_foreign_execution_id_is_refused(env: Any, peek: Peek) -> None:
    _, _, client = env
    run = await started(env)
    ops = client.actor(Desk, "d1", tenant="acme", caller=OPS)
    never_id = ExecutionId(ops.ref, "Chore", "never-started")
    never = akter.Run(client.sender, client.results, Chore, never_id, caller=OPS)
    with pytest.raises(akter.InvalidExecutionId):
        await never.interrupt()
    with pytest.raises(akter.InvalidExecutionId):
        await never.poll()
    unused = ExecutionId(ActorRef("acme", "Desk", "d9"), "Chore", "never-started")
    with pytest.raises(akter.InvalidExecutionId):
        await akter.Run(client.sender, client.results, Chore, unused, caller=OPS).interrupt()
    assert await peek.count("actor_generations", "d9") == 0  # not even the actor row
    eid = ExecutionId.parse(run.execution_id)
    foreign = [
        ExecutionId(ActorRef("globex", "Desk", "d1"), "Chore", eid.key),  # another tenant's
        ExecutionId(ActorRef("acme", "Desk", "d2"), "Chore", eid.key),  # another actor's
        ExecutionId(ops.ref, "Errand", eid.key),  # another member's
    ]
    for bad in [*map(str, foreign), "x1.!!!", run.execution_id + "A"]:
        with pytest.raises(akter.InvalidExecutionId):
            await ops.send(Chore.interrupt_command, Interrupt(execution_id=bad))
    assert await interrupt_receipts(peek) == []
    assert await peek.value("SELECT count(*) FROM actor_workflow_executions WHERE interrupt") == 0
    assert (await run.poll()).status == "suspended"


async def test_the_interrupt_commits_with_its_receipt_and_can_be_paused_before_commit(
    env: Any, peek: Peek
) -> None:
    _, _, client = env
    run = await started(env)
    cid = client.new_command_id()
    gate = testing.pause("turn.before_commit", match=cid)
    task = asyncio.create_task(as_caller(client, run, OPS).interrupt(command_id=cid))
    await gate.reached()
    # the turn holds the actor's lock with its writes made: none is visible yet
    assert await peek.value("SELECT interrupt FROM actor_workflow_executions") is False
    assert await interrupt_receipts(peek) == []
    assert (await run.poll()).interrupt_requested is False
    gate.release()
    await task
    assert await peek.value("SELECT interrupt FROM actor_workflow_executions") is True
    assert await interrupt_receipts(peek) == [(cid, "user:ops-1")]
    result = await run.result(timeout=60)
    assert isinstance(result, Failure)
    assert isinstance(result.failure(), akter.Interrupted)


def test_the_sync_facade_interrupts_as_its_caller(database_url: str) -> None:
    app = akter.App([Desk], database_url=database_url)
    ready, stop = threading.Event(), asyncio.Event()
    loop = asyncio.new_event_loop()

    async def relay_until() -> None:
        async with app.relay():
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(relay_until(),), daemon=True)
    thread.start()
    try:
        assert ready.wait(timeout=30)
        with app.sync_client(caller=OPS) as client:
            run = client.actor(Desk, "d1", tenant="acme").start(Chore, Task("sync"))
            with pytest.raises(akter.AccessDenied):
                client.actor(Desk, "d1", tenant="acme", caller=ALICE).run(Chore, run.execution_id).interrupt()
            run.interrupt(command_id=client.new_command_id())
            result = run.result(timeout=60)
            assert isinstance(result, Failure)
            assert isinstance(result.failure(), akter.Interrupted)
            assert run.poll().interrupted_by == OPS
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)
        loop.close()
