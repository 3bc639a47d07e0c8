"""A start whose body ends before its first effect finishes in its start turn (``prefix.py``).

With the relay in this process, the start turn runs the body over the new execution's empty
history: a body that reaches its end without asking for any effect is written finished by the
turn itself — no timer, no pass — and the ``Run`` the start returns has its result. Every test
compares with what a pass would have done: ``no_prefix`` turns the prefix off, and the records
of both executions must read the same."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import attrs
import psycopg
import pytest
from returns.result import Failure, Success

import akter
from akter import testing
from akter.faults import InjectedFailure
from akter.operate.timeline import timeline_json
from akter.outbox.relay import Relay
from akter.store.listener import Listener
from akter.workflow.api.commands import InterruptMark
from akter.workflow.api.declare import LAYER, stage_start
from akter.workflow.engine import prefix
from akter.workflow.engine.passes import Pass
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet, until
from tests.integration.workflow_support import running as _running

pytestmark = pytest.mark.integration

ALL_BUCKETS = 256


@attrs.frozen
class Box:
    notes: tuple[str, ...] = ()


@attrs.frozen
class Ask:
    mode: str
    n: int = 0


@attrs.frozen
class Told:
    text: str


@attrs.frozen(auto_exc=True)
class Refused(Exception):
    why: str


class NotStorable:
    """Not a ``Told``: the output type cannot hold it."""


Desk = akter.Actor("PrefixDesk", state=Box)
Answer = Desk.workflow("Answer", input=Ask, output=Told, errors=[Refused])
note = Answer.activity("note", success=str)
Keyed = Desk.workflow("Keyed", input=Ask, output=Told, key=lambda a: a.mode, key_reuse=akter.KeyReuse.NEW_RUN)
Leaf = Desk.workflow("Leaf", input=Ask, output=Told)
Tree = Desk.workflow("Tree", input=Ask, output=Told)
leaf = Tree.child("leaf", Leaf)

body_log = logging.getLogger("akter.workflow.body")


def _note(text: str) -> str:
    return text.upper()


@Answer.body
async def answer(wf: akter.WorkflowContext, ask: Ask) -> Any:
    wf.log.info("answering %s", ask.mode)
    match ask.mode:
        case "ok":
            return Told(f"ok {ask.n} {wf.version('v')} {wf.principal!r}")
        case "refuse":
            raise Refused("no")
        case "crash":
            raise ValueError("not declared")
        case "unstorable":
            return NotStorable()
        case "seeded":
            return Told(f"{wf.random()} {wf.uuid4()}")
        case "now":
            return Told((await wf.now()).isoformat())
        case "activity":
            return Told(await note(_note, "x"))
        case "again":
            if ask.n < 2:
                wf.continue_as_new(Ask("again", ask.n + 1))
            return Told(f"run {wf.run_number}")
    raise AssertionError(ask)


@Keyed.body
async def keyed(wf: akter.WorkflowContext, ask: Ask) -> Told:
    return Told(f"{ask.n} run {wf.run_number}")


@Leaf.body
async def leaf_body(wf: akter.WorkflowContext, ask: Ask) -> Told:
    return Told(f"leaf {ask.n}")


@Tree.body
async def tree(wf: akter.WorkflowContext, ask: Ask) -> Told:
    outcome = await leaf.run(f"leaf-{ask.n}", Ask("ok", ask.n))
    return Told(f"tree got {outcome.unwrap().text}")


@Desk.command
def start_two(turn: akter.Turn[Box], ask: Ask) -> str:
    """A start and, after it, a stage the hook refuses: the turn writes nothing."""
    eid = stage_start(turn, Answer, ask)
    turn.stage(LAYER, InterruptMark(Answer, "not an execution id", None))
    return eid


@Desk.command
def touch(turn: akter.Turn[Box], ask: Ask) -> None:
    """Changes nothing but the actor's version."""


app = akter.App([Desk])


@asynccontextmanager
async def running(app: akter.App) -> AsyncIterator[tuple[Relay, Any]]:
    """The relay in this process, once it owns every bucket (a start then runs its body here)."""
    async with _running(app) as (relay, client):
        await until(lambda: asyncio.sleep(0, relay.owned()), lambda owned: len(owned) == ALL_BUCKETS)
        yield relay, client


def make_app(database_url: str) -> akter.App:
    return akter.App([Desk], database_url=database_url)


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The executions a pass ran for, in order."""
    ran: list[str] = []
    original = Pass._run

    async def counted(self: Pass) -> None:
        ran.append(str(self.eid))
        await original(self)

    monkeypatch.setattr(Pass, "_run", counted)
    return ran


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every result this process handed to its waiters, by execution id."""
    seen: list[str] = []
    original = Listener.hand_over

    def counted(self: Listener, key: str, value: object, *, channel: str | None = None) -> None:
        seen.append(key)
        original(self, key, value, channel=channel)

    monkeypatch.setattr(Listener, "hand_over", counted)
    return seen


@pytest.fixture
def prefixes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every prefix run (the hook's calls of ``prefix.run``), by execution id."""
    seen: list[str] = []
    original = prefix.run

    def counted(workflow: Any, eid: Any, params: dict[str, Any]) -> Any:
        seen.append(str(eid))
        return original(workflow, eid, params)

    monkeypatch.setattr(prefix, "run", counted)
    return seen


def no_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefix, "run", lambda *_: None)


EXECUTION_COLUMNS = """
SELECT workflow, manifest_hash, payload, principal, versions, event_cursor, status, outcome,
       result, interrupt, blocked_reason, run_number, failed_passes,
       deadline_at IS NOT NULL AS has_deadline, parent_id, parent_type, parent_actor_id,
       started_at <= updated_at AND updated_at = finished_at AS times_ordered, paused_at, retry_of
  FROM actor_workflow_executions WHERE execution_id = %s"""


async def _record(peek: Peek, eid: str) -> dict[str, Any]:
    """What is stored of an execution, but its id and times; its steps and intents."""
    rows = await peek.rows(EXECUTION_COLUMNS, eid)
    assert len(rows) == 1
    names = [
        "workflow", "manifest_hash", "payload", "principal", "versions", "event_cursor", "status",
        "outcome", "result", "interrupt", "blocked_reason", "run_number",
        "failed_passes", "has_deadline", "parent_id", "parent_type", "parent_actor_id",
        "times_ordered", "paused_at", "retry_of",
    ]  # fmt: skip
    record = dict(zip(names, rows[0], strict=True))
    record["steps"] = await peek.value(
        "SELECT count(*) FROM actor_workflow_step WHERE execution_id = %s", eid
    )
    record["intents"] = await peek.rows(
        "SELECT timer_key, command FROM actor_outbox WHERE timer_key LIKE '%%' || %s", eid
    )
    return record


def _shown(outcome: Any) -> tuple[Any, ...]:
    """An outcome as it can be compared (errors compare by identity)."""
    if isinstance(outcome, Success):
        return ("ok", outcome.unwrap())
    error = outcome.failure()
    return ("error", type(error), str(error), attrs.asdict(error) if attrs.has(type(error)) else None)


def _timeline(view: Any) -> dict[str, Any]:
    shown = timeline_json(view)
    for key in ("execution_id", "key", "started_at", "finished_at", "updated_at", "now"):
        shown.pop(key, None)
    return shown


async def test_a_body_with_no_effect_finishes_in_its_start_turn(
    database_url: str, peek: Peek, passes: list[str], polls: list[str]
) -> None:
    async with running(make_app(database_url)) as (_, client):
        desk = client.actor(Desk, "d1", tenant="acme")
        run = await desk.start(Answer, Ask("ok", 7))
        assert await run.result(timeout=30) == Success(Told("ok 7 0 Anonymous()"))
    # no pass ran, and the result came with the start: nothing was read after it
    assert passes == []
    assert polls == []
    record = await _record(peek, run.execution_id)
    assert (record["status"], record["outcome"], record["steps"], record["intents"]) == (
        "finished",
        "succeeded",
        0,
        [],
    )


@pytest.mark.parametrize("mode", ["ok", "refuse", "crash", "unstorable", "seeded"])
async def test_an_execution_finished_in_its_start_reads_as_one_a_pass_finished(
    database_url: str, peek: Peek, monkeypatch: pytest.MonkeyPatch, passes: list[str], mode: str
) -> None:
    app = make_app(database_url)
    async with running(app) as (relay, client):
        desk = client.actor(Desk, "d1", tenant="acme")
        here = await desk.start(Answer, Ask(mode, 1))
        outcome_here = await here.result(timeout=30)
        assert passes == []
        timeline_here = _timeline(await client.timeline(here.execution_id))
        with monkeypatch.context() as m:
            no_prefix(m)
            passed = await desk.start(Answer, Ask(mode, 1), command_id=None)
            outcome_passed = await passed.result(timeout=30)
            await quiet(app, relay)
        assert passes == [passed.execution_id]
        timeline_passed = _timeline(await client.timeline(passed.execution_id))
    if mode == "seeded":  # derived from the execution id: different, and of the same form
        assert outcome_here != outcome_passed
        assert isinstance(outcome_here, Success)
    else:
        assert _shown(outcome_here) == _shown(outcome_passed)
    if mode == "refuse":
        assert _shown(outcome_here) == _shown(Failure(Refused("no")))
    here_record, passed_record = (
        await _record(peek, here.execution_id),
        await _record(peek, passed.execution_id),
    )
    if mode == "seeded":
        here_record.pop("result")
        passed_record.pop("result")
        timeline_here.pop("result", None)
        timeline_passed.pop("result", None)
    # the event cursor differs only because the second start's turn came after the first's
    assert here_record == passed_record
    assert timeline_here == timeline_passed
    expected = {"ok": "succeeded", "refuse": "failed", "crash": "defect", "unstorable": "defect"}
    assert here_record["outcome"] == expected.get(mode, "succeeded")


async def test_a_defect_is_logged_once_and_its_result_says_why(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with running(make_app(database_url)) as (_, client):
        run = await client.actor(Desk, "d1", tenant="acme").start(Answer, Ask("unstorable"))
        failure = (await run.result(timeout=30)).failure()
    assert "returned an output that cannot be stored" in str(failure)
    defects = [r for r in caplog.records if r.getMessage().startswith("execution ended with a defect")]
    assert len(defects) == 1
    # the body's log line, once, from the body's own line, after the turn committed
    said = [r for r in caplog.records if r.name == body_log.name]
    assert [r.getMessage() for r in said] == ["answering unstorable"]
    assert said[0].funcName == "answer"
    assert said[0].filename == "test_start_prefix.py"


async def test_a_body_that_asks_for_an_effect_runs_in_a_pass_and_logs_once(
    database_url: str, peek: Peek, passes: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with running(make_app(database_url)) as (_, client):
        desk = client.actor(Desk, "d1", tenant="acme")
        activity = await desk.start(Answer, Ask("activity"))
        assert await activity.result(timeout=30) == Success(Told("X"))
        now = await desk.start(Answer, Ask("now"))
        assert isinstance(await now.result(timeout=30), Success)
    assert passes == [activity.execution_id, now.execution_id]
    said = [r.getMessage() for r in caplog.records if r.name == body_log.name]
    assert said == ["answering activity", "answering now"]
    steps = await peek.rows("SELECT step FROM actor_workflow_step WHERE execution_id = %s", now.execution_id)
    assert steps == [("@now",)]


async def test_a_keyed_execution_finished_in_its_start_is_followed_into_its_next_run(
    database_url: str, passes: list[str]
) -> None:
    async with running(make_app(database_url)) as (_, client):
        desk = client.actor(Desk, "d1", tenant="acme")
        first = await desk.start(Keyed, Ask("k", 1))
        assert await first.result(timeout=30) == Success(Told("1 run 1"))
        assert passes == []
        second = await desk.start(Keyed, Ask("k", 2))  # another input: a new run (a pass's)
        assert second.execution_id == first.execution_id
        assert await second.result(timeout=30) == Success(Told("2 run 2"))
        # the first handle follows the latest run, as a handle of a pass-finished one does
        assert await first.result(timeout=30) == Success(Told("2 run 2"))
    assert passes == [first.execution_id]


async def test_continue_as_new_is_left_to_the_pass(database_url: str, passes: list[str]) -> None:
    async with running(make_app(database_url)) as (_, client):
        run = await client.actor(Desk, "d1", tenant="acme").start(Answer, Ask("again"))
        assert await run.result(timeout=30) == Success(Told("run 3"))
    assert passes == [run.execution_id] * 3


async def test_a_deadline_is_recorded_and_never_left_armed(
    database_url: str, peek: Peek, passes: list[str]
) -> None:
    async with running(make_app(database_url)) as (_, client):
        run = await client.actor(Desk, "d1", tenant="acme").start(
            Answer, Ask("ok"), timeout=timedelta(minutes=5)
        )
        assert isinstance(await run.result(timeout=30), Success)
    assert passes == []
    record = await _record(peek, run.execution_id)
    assert record["has_deadline"] is True
    assert record["intents"] == []


async def test_a_child_finished_in_its_start_resumes_its_parent(
    database_url: str, peek: Peek, passes: list[str]
) -> None:
    async with running(make_app(database_url)) as (_, client):
        run = await client.actor(Desk, "d1", tenant="acme").start(Tree, Ask("ok", 3))
        assert await run.result(timeout=30) == Success(Told("tree got leaf 3"))
    child = await peek.rows(
        "SELECT execution_id, status, parent_id, parent_type, parent_actor_id"
        " FROM actor_workflow_executions WHERE workflow = 'Leaf'"
    )
    assert len(child) == 1
    assert child[0][1:] == ("finished", run.execution_id, Desk.name, "d1")
    # the child had no pass; its parent had two (start the child, then take its result)
    assert passes == [run.execution_id, run.execution_id]


async def test_a_turn_that_fails_after_the_body_ran_writes_and_hands_over_nothing(
    database_url: str, peek: Peek, handed: list[str], prefixes: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with running(make_app(database_url)) as (_, client):
        desk = client.actor(Desk, "d1", tenant="acme")
        with pytest.raises(akter.InvalidExecutionId):
            await desk.send(start_two, Ask("ok"))
        assert prefixes != []  # the body ran in the turn
        testing.fail("turn.before_commit")  # the write sent, the commit not
        try:
            with pytest.raises(InjectedFailure):
                await desk.start(Answer, Ask("ok"))
        finally:
            testing.disarm_all()
        assert len(prefixes) >= 2
    assert handed == []
    assert await peek.value("SELECT count(*) FROM actor_workflow_executions") == 0
    assert [r for r in caplog.records if r.name == body_log.name] == []


async def test_a_refused_optimistic_start_runs_the_prefix_again_and_hands_over_once(
    database_url: str, peek: Peek, handed: list[str], prefixes: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    other = make_app(database_url)
    async with running(make_app(database_url)) as (_, client), other.client() as second:
        desk = client.actor(Desk, "d1", tenant="acme")
        await desk.send(touch, Ask("ok"))  # remembered here ...
        await second.actor(Desk, "d1", tenant="acme").send(touch, Ask("ok"))  # ... and moved there
        misses = client.sender.options.cache.misses
        run = await desk.start(Answer, Ask("ok", 2))
        assert client.sender.options.cache.misses == misses + 1  # the check refused the memory
        assert await run.result(timeout=30) == Success(Told("ok 2 0 Anonymous()"))
    assert prefixes == [run.execution_id, run.execution_id]
    assert handed == [run.execution_id]
    said = [r.getMessage() for r in caplog.records if r.name == body_log.name]
    assert said == ["answering ok"]
    assert (await _record(peek, run.execution_id))["outcome"] == "succeeded"


async def test_a_start_in_the_applications_transaction_goes_through_the_relay(
    database_url: str, passes: list[str], prefixes: list[str]
) -> None:
    app = make_app(database_url)
    async with running(app) as (_, client):
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            run = await client.with_connection(conn).actor(Desk, "d1", tenant="acme").start(Answer, Ask("ok"))
            await conn.commit()
        assert await run.result(timeout=30) == Success(Told("ok 0 0 Anonymous()"))
    # no runner in a joined turn: nothing ran in it, the relay's pass finished it (and handed the
    # result to the waiting run, or the run read it: which first depends on how fast the pass is)
    assert prefixes == []
    assert passes == [run.execution_id]
