"""The turn plan (``akter/actor/plan.py``) driven by hand, without a database: what each kind of
turn asks for, in which order, and what it comes to when the answers are the test's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest
from returns.result import Success

import akter
from akter.actor import plan, queries
from akter.actor.cache import Known
from akter.actor.kernel import Answer, Committed, Read, UnderLock, encode_outcome, prepare_request
from akter.actor.turn import Turn
from akter.callers import User
from akter.errors import CommandExpired
from akter.ids import ActorRef, CommandId
from tests.apps import counter
from tests.apps.counter import Add, TooMuch, add, add_at_most_10

NOW = 1_800_000_000_000
REF = ActorRef("acme", "Counter", "c1")
CALLER = User("ann")

Serve = Callable[[plan.Step], Any]


@attrs.frozen
class At:
    iso: str = ""


Stamped = akter.Actor("Stamped", state=At)


@Stamped.command
def stamp(turn: akter.Turn[At], cmd: Add) -> str:
    turn.state = At(turn.now.isoformat())
    return turn.state.iso


def request(command: Any = add, amount: int = 2, *, expires_in: int = 60_000) -> Any:
    cid = CommandId.mint(NOW - 1000, expires_in)
    return prepare_request(command, REF, Add(amount), cid, CALLER)


def loaded(*, version: int | None = 3, event_seq: int = 5, state: bytes | None = None) -> queries.Loaded:
    return queries.Loaded(event_seq, state, None, None, None, None, None, NOW, version)


def run(steps: plan.Plan, serve: Serve) -> tuple[list[plan.Step], plan.Done | plan.Fallback]:
    """Drive ``steps`` to the end, answering each step with ``serve``; the steps it asked for."""
    asked: list[plan.Step] = []
    answer: Any = None
    while True:
        try:
            step = steps.send(answer)
        except StopIteration as done:
            return asked, done.value
        asked.append(step)
        answer = serve(step)


def database(row: queries.Loaded, reads: dict[str, Answer] | None = None) -> Serve:
    """Answers as a database holding ``row`` would give them; batched statements answer one row."""

    def serve(step: plan.Step) -> Any:
        match step:
            case plan.Load():
                return row
            case Read(query=query):
                return (reads or {})[query]
            case plan.Commit(statements=statements):
                return [(f"answer of {query}",) for query, _ in statements]
        return None

    return serve


class Batching:
    """A hook that batches one statement and keeps the answer it is handed after the write."""

    def __init__(self) -> None:
        self.answered: list[tuple[Any, ...] | None] = []

    async def before_commit(self, db: UnderLock, turn: Turn[Any], record: Committed) -> None:
        record.with_write("INSERT batched", {"n": 1}, self.answered.append)

    def after_commit(self, record: Committed) -> None:
        pass


class Reading:
    """A hook that must read under the lock before it decides what to batch."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...] | None] = []

    async def before_commit(self, db: UnderLock, turn: Turn[Any], record: Committed) -> None:
        row = await (await db.execute("SELECT existing", {"k": 1})).fetchone()
        self.seen.append(row)
        record.with_write("INSERT decided", {"row": row})

    def after_commit(self, record: Committed) -> None:
        pass


def test_a_pooled_turn_loads_passes_its_fault_point_and_commits_the_hooks_statements_before_its_write() -> (
    None
):
    hook = Batching()
    asked, done = run(plan.turn(request(), [hook]), database(loaded()))
    assert [type(s) for s in asked] == [plan.Load, plan.Fault, plan.Commit]
    commit = asked[-1]
    assert isinstance(commit, plan.Commit)
    assert [q for q, _ in commit.statements] == ["INSERT batched"]
    write, params = commit.write
    assert "akter_turn_write" in write
    assert params["event_seq"] == 5
    assert params["tag0"] == "Added"
    assert isinstance(done, plan.Done)
    assert done.record.outcome == Success(2)
    assert done.record.events[0][0] == 6
    assert hook.answered == [("answer of INSERT batched",)]
    assert done.known.version == 4
    assert done.known.event_seq == 6
    assert done.known.state == params["state"]


def test_a_known_id_replays_its_receipt_after_the_load_and_sends_nothing() -> None:
    req = request()
    outcome = encode_outcome(add, Success(2))
    receipt = queries.Loaded(5, None, None, add.name, req.payload_hash, CALLER.key, outcome, NOW, 3)
    runs = counter.RUNS.get("add", 0)
    asked, done = run(plan.turn(req, [Batching()]), database(receipt))
    assert asked == [plan.LOAD]
    assert isinstance(done, plan.Done)
    assert done.record.replayed
    assert done.record.outcome == Success(2)
    assert done.turn is None
    assert counter.RUNS.get("add", 0) == runs


def test_an_expired_id_is_refused_with_the_clock_the_load_read() -> None:
    with pytest.raises(CommandExpired) as refused:
        run(plan.turn(request(expires_in=10), []), database(loaded()))
    assert refused.value.database_now_ms == NOW


def test_a_declared_failure_runs_no_hook_and_writes_its_receipt_without_state() -> None:
    hook = Batching()
    asked, done = run(plan.turn(request(add_at_most_10, 11), [hook]), database(loaded()))
    commit = asked[-1]
    assert isinstance(commit, plan.Commit)
    assert commit.statements == ()
    assert commit.write[1]["failed"]
    assert commit.write[1]["state"] is None
    assert isinstance(done, plan.Done)
    failure = done.record.outcome.failure()
    assert isinstance(failure, TooMuch)
    assert failure.asked == 11
    assert hook.answered == []


def test_a_hooks_read_is_a_step_under_the_lock_and_its_answer_decides_what_it_batches() -> None:
    hook = Reading()
    reads = {"SELECT existing": Answer(((7,),), 1)}
    asked, done = run(plan.turn(request(), [hook]), database(loaded(), reads))
    assert [type(s) for s in asked] == [plan.Load, plan.Fault, Read, plan.Commit]
    assert asked[2] == Read("SELECT existing", {"k": 1})
    commit = asked[-1]
    assert isinstance(commit, plan.Commit)
    assert commit.statements == (("INSERT decided", {"row": (7,)}),)
    assert hook.seen == [(7,)]
    assert isinstance(done, plan.Done)


def test_on_memory_a_hook_that_must_read_falls_back_and_the_loaded_turn_reuses_the_handlers_run() -> None:
    known = Known(version=3, event_seq=5, state=None, state_shape=None)
    runs = counter.RUNS.get("add", 0)
    hook = Reading()
    asked, fell = run(plan.turn(request(), [hook], memory=plan.remembered(known, NOW)), database(loaded()))
    # the handler ran (on memory); the hook's read was never sent, nor anything else
    assert asked == [plan.Fault("turn.before_handler")]
    assert isinstance(fell, plan.Fallback)
    assert fell.prior is not None
    assert counter.RUNS["add"] == runs + 1
    reads = {"SELECT existing": Answer(((1,),), 1)}
    asked, done = run(plan.turn(request(), [hook], prior=fell.prior), database(loaded(version=4), reads))
    # the loaded state is the one the handler ran on: its outcome stands, it does not run again
    assert [type(s) for s in asked] == [plan.Load, Read, plan.Commit]
    assert counter.RUNS["add"] == runs + 1
    assert isinstance(done, plan.Done)
    assert done.record.outcome == Success(2)
    assert not done.record.estimated
    assert hook.seen == [(1,)]


def test_on_memory_a_turn_that_needs_no_read_asks_only_for_its_commit() -> None:
    known = Known(version=None, event_seq=0, state=None, state_shape=None)
    asked, done = run(
        plan.turn(request(), [Batching()], memory=plan.remembered(known, NOW)), database(loaded())
    )
    assert [type(s) for s in asked] == [plan.Fault, plan.Commit]
    commit = asked[-1]
    assert isinstance(commit, plan.Commit)
    assert commit.ran is not None  # for the loaded turn, should the check refuse the memory
    assert isinstance(done, plan.Done)
    assert done.record.estimated
    assert done.known.version == 1


def test_on_memory_an_id_the_estimate_finds_expired_falls_back_before_the_handler() -> None:
    known = Known(version=3, event_seq=5, state=None, state_shape=None)
    asked, fell = run(
        plan.turn(request(expires_in=10), [], memory=plan.remembered(known, NOW)), database(loaded())
    )
    assert asked == []
    assert fell == plan.Fallback()


def test_on_memory_a_handler_that_read_the_clock_falls_back_and_runs_again_on_the_loaded_state() -> None:
    req = prepare_request(
        stamp, ActorRef("acme", "Stamped", "s1"), Add(1), CommandId.mint(NOW, 60_000), CALLER
    )
    known = Known(version=1, event_seq=0, state=None, state_shape=None)
    asked, fell = run(plan.turn(req, [], memory=plan.remembered(known, NOW)), database(loaded()))
    assert fell == plan.Fallback()
    asked, done = run(plan.turn(req, []), database(loaded()))
    assert plan.Fault("turn.before_handler") in asked
    assert isinstance(done, plan.Done)
    assert done.record.outcome == Success(datetime.fromtimestamp(NOW / 1000, tz=UTC).isoformat())


def test_a_hook_that_awaits_anything_but_its_statements_is_refused() -> None:
    class Sleepy:
        async def before_commit(self, db: UnderLock, turn: Turn[Any], record: Committed) -> None:
            await asyncio.sleep(0)

        def after_commit(self, record: Committed) -> None:
            pass

    with pytest.raises(TypeError, match="may await only"):
        run(plan.turn(request(), [Sleepy()]), database(loaded()))
